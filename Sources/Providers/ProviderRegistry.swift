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

/// The providers the broker federates, by name: `apple`, `google`, `facebook`. Adding a
/// provider is its folder and one ``register(_:)`` line where the registry is built.
public struct ProviderRegistry: Sendable {
    /// One registered provider, its type erased.
    public struct Entry: Sendable {
        public let name: ProviderName
        /// Resolves the tenant's settings for the proof and verifies it.
        public let verify: @Sendable (ProviderProof, UUID, any ProviderConfigurationStore, Date) async throws -> ProviderVerification
    }

    private var entries: [ProviderName: Entry] = [:]

    public init() {}

    public mutating func register<P: IdentityProvider>(_ provider: P) {
        // The abilities are looked up once, here, not at every sign-in.
        let exchange = Self.exchange(of: provider)
        let revocation = Self.revocation(of: provider)
        entries[P.name] = Entry(name: P.name) { proof, tenantID, store, now in
            let settings = try await provider.settings(for: proof, tenantID: tenantID, store: store)
            let verified = try await provider.verify(proof, settings: settings, tenantID: tenantID, at: now)
            return ProviderVerification(
                verified: verified, exchangeCode: exchange?(settings, verified.identity.subject, tenantID),
                revokeLater: revocation?(settings))
        }
    }

    /// The provider registered under `name`, if any.
    public subscript(name: ProviderName) -> Entry? { entries[name] }

    private typealias CodeExchange = @Sendable (String, Date) async throws -> KeptProviderToken?
    private typealias Revocation = @Sendable (KeptProviderToken, String) -> Void

    /// The provider's code exchange bound to one sign-in's settings, when it can exchange codes.
    private static func exchange<P: IdentityProvider>(of provider: P)
        -> (@Sendable (P.Settings, String, UUID) -> CodeExchange?)?
    {
        guard let exchanger = provider as? any AuthorizationCodeExchanging else { return nil }
        return binding(exchanger, to: P.Settings.self)
    }

    private static func binding<E: AuthorizationCodeExchanging, S>(_ exchanger: E, to: S.Type)
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
    private static func revocation<P: IdentityProvider>(of provider: P) -> (@Sendable (P.Settings) -> Revocation?)? {
        guard let revoker = provider as? any TokenRevoking else { return nil }
        return binding(revoker, to: P.Settings.self)
    }

    private static func binding<R: TokenRevoking, S>(_ revoker: R, to: S.Type) -> @Sendable (S) -> Revocation? {
        { settings in
            guard let settings = settings as? R.Settings else { return nil }
            return { token, reason in revoker.revokeLater(token, settings: settings, reason: reason) }
        }
    }
}

extension ProviderName {
    /// The id-token policy of the provider, for `broker token verify`: the very function its
    /// sign-in uses. Facebook's is Limited Login's (classic access tokens are not JWTs).
    public var tokenPolicy: @Sendable (TokenCheckOptions) -> (VerificationPolicy, NonceExpectation) {
        switch self {
        case .apple: AppleProvider.tokenPolicy
        case .google: GoogleProvider.tokenPolicy
        case .facebook: FacebookProvider.tokenPolicy
        }
    }
}
