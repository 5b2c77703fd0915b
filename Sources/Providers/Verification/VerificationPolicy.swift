import BrokerCore
import Foundation

/// What a provider's identity tokens must satisfy (decision 0008).
public struct VerificationPolicy: Sendable {
    /// `iss` must be one of these exactly.
    public var issuers: Set<String>
    /// Allowed `alg` values; anything else (`none`, HS256, …) is refused before any key is used.
    public var algorithms: Set<String>
    /// `aud` must name one of these; an `aud` array must contain one and nothing untrusted.
    /// nil skips the audience check: only `broker token verify` without `--audience` does that.
    public var audiences: Set<String>?
    /// Allowed clock difference for `iat`, `nbf` and `exp`.
    public var clockSkew: TimeInterval
    /// Tokens longer than this are refused unread.
    public var maxTokenBytes: Int
    /// A multi-tenant issuer (`{tid}` in the issuer URL, Microsoft Entra ID): when set, `iss`
    /// must equal it with the token's own `tid` put in, and ``issuers`` is not used.
    public var issuerTemplate: IssuerTemplate?
    /// The provider's own claim rules (Google's `azp` and `hd`), run after the common ones and
    /// reported like them.
    public var claimChecks: [ClaimCheck] = []
    /// Whether `sub` must be present. Apple's server-to-server notifications carry the person in
    /// their `events` claim and have no `sub`; every identity token must have one.
    public var subjectRequired = true

    public init(
        issuers: Set<String>, algorithms: Set<String> = ["RS256"], audiences: Set<String>?,
        clockSkew: TimeInterval = 60, maxTokenBytes: Int = 16_384
    ) {
        self.issuers = issuers
        self.algorithms = algorithms
        self.audiences = audiences
        self.clockSkew = clockSkew
        self.maxTokenBytes = maxTokenBytes
    }
}

/// The nonce a verification expects.
public struct NonceExpectation: Sendable {
    public var rawNonce: String?
    public var mode: NonceMode
    /// Skip the nonce check: only for tokens the broker received from the provider itself
    /// over TLS (the token endpoint's answer), never for tokens a client posted.
    public var skip = false

    public init(rawNonce: String?, mode: NonceMode) {
        self.rawNonce = rawNonce
        self.mode = mode
    }

    public static let none = NonceExpectation(rawNonce: nil, mode: .sha256)

    public static var notChecked: NonceExpectation {
        var expectation = NonceExpectation.none
        expectation.skip = true
        return expectation
    }
}

/// A provider's own rule for one claim: the detail to report when it holds, the failure when not.
public struct ClaimCheck: Sendable {
    public let name: String
    public let evaluate: @Sendable ([String: JSONValue]) -> Result<String, TokenVerificationError>

    public init(_ name: String, _ evaluate: @escaping @Sendable ([String: JSONValue]) -> Result<String, TokenVerificationError>) {
        self.name = name
        self.evaluate = evaluate
    }
}

extension ClaimCheck {
    /// OpenID Core §3.1.3.7: `azp`, when present, must be a trusted client (every provider).
    public static func authorizedParty(_ trusted: Set<String>?) -> ClaimCheck {
        ClaimCheck("azp") { payload in
            guard let value = payload["azp"] else { return .success("absent") }
            guard let party = value.string else { return .failure(.init("audience_mismatch", "The token's azp is not a string.")) }
            guard let trusted else { return .success("\(party) (not compared: no audience given)") }
            return trusted.containsExactly(party)
                ? .success(party)
                : .failure(
                    .init("audience_mismatch", "The token's authorized party (azp) '\(party.prefix(120))' is not a client of this tenant."))
        }
    }
}

/// An issuer URL with `{tid}` in place of the issuing tenant (Microsoft Entra ID's
/// `https://login.microsoftonline.com/{tid}/v2.0`): a token's `iss` must equal the template with
/// its own `tid` claim put in, and `tid` one of `allowedTenants` when any are given.
public struct IssuerTemplate: Sendable, Equatable {
    public static let placeholder = "{tid}"

    public let template: String
    public let allowedTenants: Set<String>

    public init(_ template: String, allowedTenants: Set<String> = []) {
        self.template = template
        self.allowedTenants = allowedTenants
    }

    /// Whether an issuer URL is a template.
    public static func isTemplate(_ issuer: String) -> Bool { issuer.contains(placeholder) }

    /// The issuer a token with this payload must carry.
    public func expectedIssuer(for payload: [String: JSONValue]) -> Result<String, TokenVerificationError> {
        guard let tid = payload["tid"]?.string, Self.isTenantID(tid) else {
            return .failure(.init("issuer_mismatch", "The token has no usable tenant id (tid) for the issuer \(template.prefix(120))."))
        }
        guard allowedTenants.isEmpty || allowedTenants.contains(tid) else {
            return .failure(.init("tenant_not_allowed", "The token's tenant id (tid) '\(tid)' is not one this provider allows."))
        }
        return .success(template.replacingOccurrences(of: Self.placeholder, with: tid))
    }

    /// A tenant id is letters, digits, dashes, dots and underscores (a GUID in practice): never
    /// a character that could move the issuer to another path or host.
    public static func isTenantID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.unicodeScalars.allSatisfy {
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-._".unicodeScalars.contains($0))
            }
    }
}
