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
        entries[P.name] = Entry(name: P.name) { proof, tenantID, store, now in
            let settings = try await provider.settings(for: proof, tenantID: tenantID, store: store)
            let verified = try await provider.verify(proof, settings: settings, tenantID: tenantID, at: now)
            return ProviderVerification(
                verified: verified,
                exchangeCode: Self.codeExchange(provider, settings: settings, subject: verified.identity.subject, tenantID: tenantID),
                revokeLater: Self.revocation(provider, settings: settings))
        }
    }

    /// The provider registered under `name` (`apple`, `google`, `facebook`), if any.
    public subscript(name: String) -> Entry? {
        ProviderName(rawValue: name).flatMap { entries[$0] }
    }

    public var names: [ProviderName] { ProviderName.allCases.filter { entries[$0] != nil } }

    private static func codeExchange<P: IdentityProvider>(_ provider: P, settings: P.Settings, subject: String, tenantID: UUID)
        -> (@Sendable (String, Date) async throws -> KeptProviderToken?)?
    {
        guard let exchanger = provider as? any AuthorizationCodeExchanging else { return nil }
        return bindExchange(exchanger, settings: settings, subject: subject, tenantID: tenantID)
    }

    private static func bindExchange<E: AuthorizationCodeExchanging>(
        _ exchanger: E, settings: any Sendable, subject: String, tenantID: UUID
    ) -> (@Sendable (String, Date) async throws -> KeptProviderToken?)? {
        guard let settings = settings as? E.Settings else { return nil }
        return { code, now in try await exchanger.exchange(code: code, subject: subject, settings: settings, tenantID: tenantID, at: now) }
    }

    private static func revocation<P: IdentityProvider>(_ provider: P, settings: P.Settings)
        -> (@Sendable (KeptProviderToken, String) -> Void)?
    {
        guard let revoker = provider as? any TokenRevoking else { return nil }
        return bindRevocation(revoker, settings: settings)
    }

    private static func bindRevocation<R: TokenRevoking>(_ revoker: R, settings: any Sendable)
        -> (@Sendable (KeptProviderToken, String) -> Void)?
    {
        guard let settings = settings as? R.Settings else { return nil }
        return { token, reason in revoker.revokeLater(token, settings: settings, reason: reason) }
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
