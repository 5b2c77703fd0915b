import BrokerCore
import Foundation
import MockIdP
import Providers

/// A provider type that exists only in the tests (decision 0034: a type is one folder holding
/// one descriptor), built through the descriptor API alone, with no change to Sources: it shows
/// that a new type plugs into sign-in, linking, login options, `ProviderAdmin` and the `broker`
/// command line (`broker-with-test-type`, decision 0079) by one registration.
///
/// Type `test-only`. Its proof is `{"test_token", "nonce"?}` (a member name no built-in uses,
/// so the descriptor's reader is the one that runs): an ES256 id token of the fixed issuer
/// ``issuer`` for one of the tenant's client ids, verified by the shared verifier against the
/// key set of a ``MockOIDCIssuer`` held in memory (no network). Settings: `--client-id`
/// (repeatable) and `--display-name`. Identities are scoped to the issuer; emails never join
/// accounts.
public struct TestOnlyProvider: IdentityProvider {
    public static let type = ProviderType(rawValue: "test-only")
    public static let issuer = "https://test-only.invalid"
    /// The variable `broker-with-test-type` reads the type's key set (a JWKS document) from.
    public static let jwksVariable = "BROKER_TEST_ONLY_JWKS"

    public struct Settings: Sendable {
        var provider: ProviderID
        var clientIDs: Set<String>
        var requestedClientID: String?
    }

    let keys: JWKSCache

    /// The type's descriptor, verifying tokens signed by `signer`'s keys.
    public static func descriptor(signer: MockOIDCIssuer) -> ProviderDescriptor {
        descriptor(jwks: (try? signer.jwksJSON()) ?? Data(#"{"keys":[]}"#.utf8))
    }

    /// The type's descriptor, verifying tokens against the key set `jwks`.
    public static func descriptor(jwks: Data) -> ProviderDescriptor {
        let flags = [
            ProviderSettingFlag("client-id", value: "ID", repeatable: true, required: true, help: "A client id tokens may be issued to."),
            ProviderSettingFlag("display-name", value: "TEXT", help: "The name login options show."),
        ]
        return ProviderDescriptor(
            type: type, displayName: "Test Only", abilities: [.idTokens], emailTrust: .never, settingFlags: flags,
            readProof: { object throws(ContractMismatch) in
                ProviderProof(
                    idToken: try ContractReader.required("test_token", in: object),
                    clientID: try ContractReader.optional("client_id", in: object),
                    nonce: try ContractReader.optional("nonce", in: object))
            },
            configure: { input, _ in
                try input.requireOnly(flags, type: type)
                var settings: [String: JSONValue] = ["issuer": .string(issuer)]
                if let name = try input.value("display-name") { settings["display_name"] = .string(name) }
                return ProviderConfiguration(
                    tenantID: input.tenantID, provider: input.provider, type: type, platforms: input.platforms,
                    clientIDs: try input.clientIDs(), settings: settings)
            },
            tokenPolicy: { configuration, options in policy(options) },
            keySet: { _, _ in KeySetLocation(name: "test-only", url: "") },
            describe: { configuration in
                [("issuer", .string(issuer)), ("client_ids", .array(configuration.clientIDs.map(JSONValue.string)))]
            },
            make: { context in
                let cache = context.keySets.declare("test-only", cache: JWKSCache(source: .fixed(jwks), logger: context.logger))
                return .of(TestOnlyProvider(keys: cache))
            })
    }

    public static func policy(_ options: TokenCheckOptions) -> (VerificationPolicy, NonceExpectation) {
        var policy = VerificationPolicy(issuers: [issuer], algorithms: ["ES256"], audiences: options.audiences)
        policy.claimChecks = [.authorizedParty(options.authorizedParties ?? options.audiences)]
        return (policy, options.rawNonce.map { NonceExpectation(rawNonce: $0, mode: .raw) } ?? .none)
    }

    public func settings(for proof: ProviderProof, provider: ProviderID, tenantID: UUID, store: any ProviderConfigurationStore) async throws
        -> Settings
    {
        guard let configuration = try await store.configuration(tenantID: tenantID, provider: provider), configuration.enabled,
            configuration.type == Self.type
        else { throw ProviderFailure.notEnabled(provider) }
        if let clientID = proof.clientID, !configuration.clientIDs.contains(clientID) {
            throw ProviderFailure.unknownClient(provider, clientID: clientID)
        }
        return Settings(provider: provider, clientIDs: Set(configuration.clientIDs), requestedClientID: proof.clientID)
    }

    public func verify(_ proof: ProviderProof, settings: Settings, tenantID: UUID, at now: Date) async throws(ProviderFailure)
        -> VerifiedProof
    {
        guard let token = proof.idToken else { throw .malformedProof("test_token is required") }
        let (policy, nonce) = Self.policy(
            TokenCheckOptions(
                audiences: settings.requestedClientID.map { [$0] } ?? settings.clientIDs, rawNonce: proof.nonce,
                authorizedParties: settings.clientIDs))
        let claims = try await IdentityTokenVerifier(policy: policy, keys: keys).verifyForProvider(
            token, provider: settings.provider, nonce: nonce, at: now)
        let identity = ProviderIdentity(
            provider: settings.provider, providerScope: claims.issuer, subject: claims.subject, email: claims.email,
            emailVerified: claims.emailVerified == true, isPrivateEmail: false, name: claims.name, emailTrust: .never)
        return VerifiedProof(identity: identity, clientID: claims.audiences.first ?? "", claims: claims, token: token, tenantID: tenantID)
    }
}
