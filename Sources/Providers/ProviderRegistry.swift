import BrokerCore
import Foundation

/// A proof verified by its provider, with the provider's abilities bound to the settings it was
/// verified under (what the sign-in service needs after verification).
public struct ProviderVerification: Sendable {
    public let verified: VerifiedProof
    /// Redeems an authorization code for the verified subject, when the provider can.
    public let exchangeCode: (@Sendable (_ code: String, _ now: Date) async throws -> KeptProviderToken?)?
    /// Gives back a token the broker will not keep, when the provider can take it back.
    public let revokeLater: (@Sendable (_ token: KeptProviderToken, _ reason: String) -> Void)?
}

/// The provider types the broker knows, by type (decision 0034), each built from its
/// descriptor: `apple`, `google`, `facebook`, `oidc`, and any other registered the same way
/// (a test registers its own from one folder). A tenant's provider id names its type in
/// `provider_configs`; the ids `apple`, `google` and `facebook` are their own types.
public struct ProviderRegistry: Sendable {
    /// One registered provider, its type erased.
    public struct Entry: Sendable {
        /// Resolves the tenant's settings of the provider id for the proof and verifies it.
        public let verify:
            @Sendable (ProviderProof, ProviderID, UUID, any ProviderConfigurationStore, Date) async throws -> ProviderVerification
        /// The tenant's web client (client id or nil for its only one), when the type has a web
        /// flow (``WebAuthorizing``).
        public let webClient: (@Sendable (String?, ProviderID, UUID, any ProviderConfigurationStore) async throws -> WebClient)?

        public init(
            verify:
                @escaping @Sendable (ProviderProof, ProviderID, UUID, any ProviderConfigurationStore, Date) async throws ->
                ProviderVerification,
            webClient: (@Sendable (String?, ProviderID, UUID, any ProviderConfigurationStore) async throws -> WebClient)? = nil
        ) {
            self.verify = verify
            self.webClient = webClient
        }

        /// The entry of a provider, its abilities looked up once, here, not at every sign-in.
        public static func of<P: IdentityProvider>(_ provider: P) -> Entry {
            let exchange = ProviderRegistry.exchange(of: provider)
            let revocation = ProviderRegistry.revocation(of: provider)
            var webClient: (@Sendable (String?, ProviderID, UUID, any ProviderConfigurationStore) async throws -> WebClient)?
            if let web = provider as? any WebAuthorizing {
                webClient = { clientID, id, tenantID, store in
                    try await web.webClient(clientID: clientID, provider: id, tenantID: tenantID, store: store)
                }
            }
            return Entry(
                verify: { proof, id, tenantID, store, now in
                    let settings = try await provider.settings(for: proof, provider: id, tenantID: tenantID, store: store)
                    let verified = try await provider.verify(proof, settings: settings, tenantID: tenantID, at: now)
                    return ProviderVerification(
                        verified: verified, exchangeCode: exchange?(settings, verified.identity.subject, tenantID),
                        revokeLater: revocation?(settings))
                }, webClient: webClient)
        }
    }

    /// A registered type: its descriptor and its provider.
    public struct Registered: Sendable {
        public let descriptor: ProviderDescriptor
        public let entry: Entry
    }

    private var types: [ProviderType: Registered] = [:]
    /// Registration order (the built-ins first).
    public private(set) var order: [ProviderType] = []
    public let context: ProviderContext

    public init(context: ProviderContext) { self.context = context }

    /// Registers a type: its descriptor builds its provider now.
    public mutating func register(_ descriptor: ProviderDescriptor) {
        if types[descriptor.type] == nil { order.append(descriptor.type) }
        types[descriptor.type] = Registered(descriptor: descriptor, entry: descriptor.make(context))
    }

    /// The type registered under `type`, if any.
    public subscript(type: ProviderType) -> Registered? { types[type] }

    /// Every registered descriptor, in registration order.
    public var descriptors: [ProviderDescriptor] { order.compactMap { types[$0]?.descriptor } }

    typealias CodeExchange = @Sendable (String, Date) async throws -> KeptProviderToken?
    typealias Revocation = @Sendable (KeptProviderToken, String) -> Void

    /// The provider's code exchange bound to one sign-in's settings, when it can exchange codes.
    static func exchange<P: IdentityProvider>(of provider: P)
        -> (@Sendable (P.Settings, String, UUID) -> CodeExchange?)?
    {
        guard let exchanger = provider as? any AuthorizationCodeExchanging else { return nil }
        return binding(exchanger, to: P.Settings.self)
    }

    static func binding<E: AuthorizationCodeExchanging, S>(_ exchanger: E, to: S.Type)
        -> @Sendable (S, String, UUID) -> CodeExchange?
    {
        { settings, subject, tenantID in
            // `S` is `E.Settings` (both are the registered provider's): the cast always holds.
            guard let settings = settings as? E.Settings else { return nil }
            return { code, now in
                try await exchanger.exchange(code: code, subject: subject, settings: settings, tenantID: tenantID, at: now)
            }
        }
    }

    /// The provider's revocation bound to one sign-in's settings, when it can revoke.
    static func revocation<P: IdentityProvider>(of provider: P) -> (@Sendable (P.Settings) -> Revocation?)? {
        guard let revoker = provider as? any TokenRevoking else { return nil }
        return binding(revoker, to: P.Settings.self)
    }

    static func binding<R: TokenRevoking, S>(_ revoker: R, to: S.Type) -> @Sendable (S) -> Revocation? {
        { settings in
            guard let settings = settings as? R.Settings else { return nil }
            return { token, reason in revoker.revokeLater(token, settings: settings, reason: reason) }
        }
    }
}
