import BrokerCore

extension ProviderRegistry {
    /// The built-in types' descriptors, in registration order: Apple, Google, Facebook and
    /// generic OpenID Connect. Another type is one more ``register(_:)`` of its descriptor.
    public static let builtInDescriptors: [ProviderDescriptor] = [
        AppleProvider.descriptor, GoogleProvider.descriptor, FacebookProvider.descriptor, OIDCProvider.descriptor,
    ]

    /// The registry of the built-in types.
    public static func builtIn(_ context: ProviderContext) -> ProviderRegistry {
        var registry = ProviderRegistry(context: context)
        for descriptor in builtInDescriptors { registry.register(descriptor) }
        return registry
    }

    /// The built-in type a reserved id (`apple`, `google`, `facebook`) is, by its descriptor.
    public static func builtInDescriptor(of provider: ProviderID) -> ProviderDescriptor? {
        guard let type = provider.reservedType else { return nil }
        return builtInDescriptors.first { $0.type == type }
    }

    /// How messages name a provider: a reserved id by its type's display name ("Google"), an
    /// operator's id by itself (the id is what the caller sent, so naming it reveals nothing).
    public static func displayName(of provider: ProviderID) -> String {
        builtInDescriptor(of: provider)?.displayName ?? provider.rawValue
    }

    /// What turns a provider that is not enabled on, for a sign-in's hint: a built-in's from its
    /// descriptor; an operator's id (its type and settings are the tenant's) by its id.
    public static func enableHint(_ provider: ProviderID, tenant: String) -> String {
        builtInDescriptor(of: provider)?.enableHint(provider, tenant: tenant)
            ?? "Turn it back on: broker provider enable \(provider.rawValue) --tenant \(tenant)"
    }
}
