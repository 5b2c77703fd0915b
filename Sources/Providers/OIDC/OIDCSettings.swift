import BrokerCore
import Foundation

/// An OpenID Connect provider's settings as stored in `provider_configs.settings` (decision
/// 0035), read back with their types checked.
public struct OIDCSettings: Sendable, Equatable {
    /// The issuer URL; `{tid}` in it makes a multi-tenant issuer (Microsoft Entra ID).
    public var issuer: String
    /// `--jwks-url`: the operator's key set URL, used instead of discovery's.
    public var jwksURL: String?
    /// Discovery's `jwks_uri` when `enable` read it.
    public var discoveredJWKSURI: String?
    /// Discovery's `id_token_signing_alg_values_supported`.
    public var discoveredAlgorithms: [String]?
    /// `--algorithms`: the operator's narrowing.
    public var algorithms: [String]?
    public var emailTrust: EmailTrust
    /// `--allowed-tid`: the tenant ids a `{tid}` issuer accepts (empty: any).
    public var allowedTenantIDs: [String]
    public var nonceRequired: Bool
    public var displayName: String?

    /// The asymmetric algorithms an OpenID Connect id token may be signed with. `none` and the
    /// HMAC algorithms never are: a client secret is no proof of who signed.
    public static let supportedAlgorithms = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]

    public init(
        issuer: String, jwksURL: String? = nil, discoveredJWKSURI: String? = nil, discoveredAlgorithms: [String]? = nil,
        algorithms: [String]? = nil, emailTrust: EmailTrust = .never, allowedTenantIDs: [String] = [], nonceRequired: Bool = false,
        displayName: String? = nil
    ) {
        self.issuer = issuer
        self.jwksURL = jwksURL
        self.discoveredJWKSURI = discoveredJWKSURI
        self.discoveredAlgorithms = discoveredAlgorithms
        self.algorithms = algorithms
        self.emailTrust = emailTrust
        self.allowedTenantIDs = allowedTenantIDs
        self.nonceRequired = nonceRequired
        self.displayName = displayName
    }

    /// The settings of a stored configuration; nil when they are not an OIDC provider's.
    public init?(_ configuration: ProviderConfiguration) {
        guard let issuer = configuration.string("issuer") else { return nil }
        self.init(
            issuer: issuer, jwksURL: configuration.string("jwks_url"), discoveredJWKSURI: configuration.string("discovered_jwks_uri"),
            discoveredAlgorithms: configuration.settings["discovered_algorithms"] == nil
                ? nil : configuration.strings("discovered_algorithms"),
            algorithms: configuration.settings["algorithms"] == nil ? nil : configuration.strings("algorithms"),
            emailTrust: configuration.string("email_trust").flatMap(EmailTrust.init(rawValue:)) ?? .never,
            allowedTenantIDs: configuration.strings("allowed_tids"), nonceRequired: configuration.settings["nonce_required"] == .bool(true),
            displayName: configuration.displayName)
    }

    /// The JSON stored for these settings.
    public var json: [String: JSONValue] {
        var settings: [String: JSONValue] = [
            "issuer": .string(issuer), "email_trust": .string(emailTrust.rawValue), "nonce_required": .bool(nonceRequired),
        ]
        settings["jwks_url"] = jwksURL.map(JSONValue.string)
        settings["discovered_jwks_uri"] = discoveredJWKSURI.map(JSONValue.string)
        settings["discovered_algorithms"] = discoveredAlgorithms.map { .array($0.map(JSONValue.string)) }
        settings["algorithms"] = algorithms.map { .array($0.map(JSONValue.string)) }
        if !allowedTenantIDs.isEmpty { settings["allowed_tids"] = .array(allowedTenantIDs.map(JSONValue.string)) }
        settings["display_name"] = displayName.map(JSONValue.string)
        return settings
    }

    /// The algorithms accepted: the supported ones, narrowed by discovery and by the operator.
    public var acceptedAlgorithms: Set<String> {
        var accepted = Set(Self.supportedAlgorithms)
        if let discoveredAlgorithms { accepted.formIntersection(discoveredAlgorithms) }
        if let algorithms { accepted.formIntersection(algorithms) }
        return accepted
    }

    /// Where the keys are: the operator's URL, else discovery's.
    public var keysURL: String? { jwksURL ?? discoveredJWKSURI }

    public var isMultiTenant: Bool { IssuerTemplate.isTemplate(issuer) }

    /// The verification policy of this issuer for these options.
    public func policy(_ options: TokenCheckOptions) -> (VerificationPolicy, NonceExpectation) {
        var policy = VerificationPolicy(issuers: [issuer], algorithms: acceptedAlgorithms, audiences: options.audiences)
        if isMultiTenant { policy.issuerTemplate = IssuerTemplate(issuer, allowedTenants: Set(allowedTenantIDs)) }
        policy.claimChecks = [.authorizedParty(options.authorizedParties ?? options.audiences)]
        return (policy, options.rawNonce.map { NonceExpectation(rawNonce: $0, mode: .raw) } ?? .none)
    }

    /// A provider URL: `https://`, or `http://` on a loopback address (tests and demos).
    public static func isAcceptableURL(_ text: String) -> Bool {
        guard text.utf8.count <= 2_048, let url = URL(string: text.replacingOccurrences(of: IssuerTemplate.placeholder, with: "common")),
            let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty, url.user == nil
        else { return false }
        if scheme == "https" { return true }
        return scheme == "http" && ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
    }
}
