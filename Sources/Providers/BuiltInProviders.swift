extension ProviderRegistry {
    /// The registry of the built-in types: Apple, Google, Facebook and generic OpenID Connect.
    /// Another type is one more ``register(_:)`` of its descriptor.
    public static func builtIn(_ context: ProviderContext) -> ProviderRegistry {
        var registry = ProviderRegistry(context: context)
        registry.register(AppleProvider.descriptor)
        registry.register(GoogleProvider.descriptor)
        registry.register(FacebookProvider.descriptor)
        registry.register(OIDCProvider.descriptor)
        return registry
    }
}
