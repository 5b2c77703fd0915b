import Crypto
import Foundation
import JWTKit
import Synchronization

/// A generic OpenID Connect issuer for tests, the demo and benchmarks, shaped like LINE,
/// Yahoo! JAPAN ID or (multi-tenant) Microsoft Entra ID: a discovery document, a key set with
/// RSA (RS256, PS256) and P-256 (ES256) keys, key rotation, id tokens with any claims (also
/// wrong ones), and faults (``DiscoveryFault``, ``KeysFault``). ``MockIdPServer`` serves it
/// under `/oidc/<name>`; never point a production broker at it.
///
/// Single-tenant (`multiTenant` false), for an issuer named `line` served at `base`:
/// - issuer `<base>/oidc/line`
/// - discovery `<base>/oidc/line/.well-known/openid-configuration`
/// - key set `<base>/oidc/line/keys`
///
/// Multi-tenant (Entra's shape), for an issuer named `entra`:
/// - issuer template `<base>/oidc/entra/{tid}/v2.0`; a token of tenant T has `tid` T and `iss`
///   `<base>/oidc/entra/T/v2.0`
/// - discovery `<base>/oidc/entra/common/v2.0/.well-known/openid-configuration`, whose `issuer`
///   is `<base>/oidc/entra/{tenantid}/v2.0` (Microsoft's placeholder, literally)
/// - key set `<base>/oidc/entra/common/discovery/v2.0/keys`
/// - per tenant T also `<base>/oidc/entra/T/v2.0/.well-known/openid-configuration` (issuer
///   `<base>/oidc/entra/T/v2.0`) and `<base>/oidc/entra/T/discovery/v2.0/keys`
///
/// Single-tenant issuers also serve the web flow (``MockOIDCIssuer+Web``): `<issuer>/authorize`
/// and `<issuer>/token` with PKCE, for clients registered with ``registerWebClient(_:secret:)``.
public final class MockOIDCIssuer: Sendable {
    /// Where ``MockIdPServer`` serves issuers: `/oidc/<name>`.
    public static let pathPrefix = "/oidc"
    /// The tenant placeholder of ``issuer(base:)`` for a multi-tenant issuer.
    public static let tenantPlaceholder = "{tid}"
    /// The placeholder the `common` discovery document's `issuer` holds (Microsoft's).
    public static let discoveryTenantPlaceholder = "{tenantid}"
    /// The tenant a multi-tenant issuer's tokens are for when none is given.
    public static let defaultTenant = "9e2c6a1f-4b7d-4c3e-8a5f-0d1b2c3e4f5a"
    /// The tenant segments whose discovery document names ``discoveryTenantPlaceholder``.
    public static let placeholderTenants: Set<String> = ["common", "organizations"]

    /// The path segment after `/oidc/`, e.g. `line`.
    public let name: String
    /// Entra's shape: tenant-bound issuers (`{tid}`) and a `common` discovery document.
    public let isMultiTenant: Bool

    struct State {
        /// Every key held, oldest first.
        var keys: [MockOIDCKey]
        /// kids served in the key set, oldest first.
        var published: [String]
        var strangers: [Algorithm: MockOIDCKey] = [:]
        var discoveryFault = DiscoveryFault.none
        var keysFault = KeysFault.none
        var discoveryFetches = 0
        var keyFetches = 0
        /// Bumped by every fault change: a request that chose to hang under an older one re-checks.
        var faultGeneration = 0
        var hangs: [UUID: HangRelease] = [:]
        var hangsStarted = 0
        var hangWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    let state: Mutex<State>
    /// The web flow's clients, codes, person and faults (``MockOIDCIssuer+Web``).
    public let web = MockCodeFlow()

    /// An issuer named `name` (letters, digits, `-`, `_`, `.`) holding one published key for
    /// each of `algorithms` (RS256 and ES256 unless told otherwise; RSA keys take a moment to
    /// generate). `keyFile` (PEM; created when missing): the RS256 key (the first, should
    /// `algorithms` name RS256 twice) is the RSA key in that file, with a kid derived from the
    /// key alone (`mock-oidc-` and its RFC 7638 thumbprint), so tokens minted offline with the
    /// same file verify against the served key set; the other keys are fresh. Without RS256 in
    /// `algorithms` the file is not read.
    public init(name: String, multiTenant: Bool = false, algorithms: [Algorithm] = [.rs256, .es256], keyFile: URL? = nil) throws {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        guard !name.isEmpty, name != ".", name != "..", name.unicodeScalars.allSatisfy({ allowed.contains($0) }) else {
            throw MockOIDCError.invalidName(name)
        }
        self.name = name
        isMultiTenant = multiTenant
        let fileKeyAt = keyFile == nil ? nil : algorithms.firstIndex(of: .rs256)
        let keys = try algorithms.enumerated().map { index, algorithm in
            if index == fileKeyAt, let keyFile { return try MockOIDCKey.load(keyFile) }
            return try MockOIDCKey.generate(algorithm, kid: MockOIDCKey.randomKid(issuer: name, algorithm))
        }
        state = Mutex(State(keys: keys, published: keys.map(\.kid)))
    }

    // MARK: URLs

    /// `/oidc/<name>`: every route of this issuer is under it.
    public var path: String { "\(Self.pathPrefix)/\(name)" }

    /// The issuer URL for a mock served at `base` (e.g. `http://127.0.0.1:9100`): `<base>/oidc/<name>`;
    /// multi-tenant, the template `<base>/oidc/<name>/{tid}/v2.0`.
    public func issuer(base: String) -> String {
        isMultiTenant ? issuer(base: base, tenant: Self.tenantPlaceholder) : trimmedBase(base) + path
    }

    /// The `iss` of tenant `tenant`'s tokens: `<base>/oidc/<name>/<tenant>/v2.0` (multi-tenant;
    /// single-tenant, ``issuer(base:)`` whatever the tenant).
    public func issuer(base: String, tenant: String) -> String {
        isMultiTenant ? "\(trimmedBase(base))\(path)/\(tenant)/v2.0" : trimmedBase(base) + path
    }

    /// The discovery document's URL: `<issuer>/.well-known/openid-configuration`; multi-tenant,
    /// the `common` one.
    public func discoveryURL(base: String) -> String {
        isMultiTenant ? discoveryURL(base: base, tenant: "common") : issuer(base: base) + Self.discoverySuffix
    }

    /// Multi-tenant: tenant `tenant`'s discovery document (`common` and `organizations` name
    /// ``discoveryTenantPlaceholder`` as issuer). Single-tenant: ``discoveryURL(base:)``.
    public func discoveryURL(base: String, tenant: String) -> String {
        issuer(base: base, tenant: tenant) + Self.discoverySuffix
    }

    /// The key set's URL (discovery's `jwks_uri`): `<issuer>/keys`; multi-tenant
    /// `<base>/oidc/<name>/common/discovery/v2.0/keys`.
    public func jwksURL(base: String) -> String {
        isMultiTenant ? jwksURL(base: base, tenant: "common") : issuer(base: base) + "/keys"
    }

    /// Multi-tenant: `<base>/oidc/<name>/<tenant>/discovery/v2.0/keys` (the same keys for every
    /// tenant). Single-tenant: ``jwksURL(base:)``.
    public func jwksURL(base: String, tenant: String) -> String {
        isMultiTenant ? "\(trimmedBase(base))\(path)/\(tenant)/discovery/v2.0/keys" : jwksURL(base: base)
    }

    static let discoverySuffix = "/.well-known/openid-configuration"

    /// The discovery document served at `base` for `tenant` (multi-tenant only; nil: single-tenant
    /// or `common`); `wrongIssuer`: its `issuer` is ``wrongIssuerBase`` followed by ``path``.
    func discoveryDocument(base: String, tenant: String?, wrongIssuer: Bool = false) throws -> Data {
        let issuer: String
        let endpoints: String
        if isMultiTenant {
            let segment = tenant ?? "common"
            issuer =
                Self.placeholderTenants.contains(segment)
                ? self.issuer(base: base, tenant: Self.discoveryTenantPlaceholder) : self.issuer(base: base, tenant: segment)
            endpoints = "\(trimmedBase(base))\(path)/\(segment)/oauth2/v2.0"
        } else {
            issuer = self.issuer(base: base)
            endpoints = issuer
        }
        let document: [String: Any] = [
            "issuer": wrongIssuer ? "\(Self.wrongIssuerBase)\(path)" : issuer,
            "jwks_uri": isMultiTenant ? jwksURL(base: base, tenant: tenant ?? "common") : jwksURL(base: base),
            "authorization_endpoint": endpoints + "/authorize",
            "token_endpoint": endpoints + "/token",
            "token_endpoint_auth_methods_supported": web.state.withLock { $0.authMethods },
            "id_token_signing_alg_values_supported": algorithms.map(\.rawValue) + (web.state.withLock { $0.hs256 } ? ["HS256"] : []),
            "response_types_supported": ["code", "id_token", "code id_token"],
            "subject_types_supported": [isMultiTenant ? "pairwise" : "public"],
        ]
        return try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    // MARK: Tokens

    /// Claims of an id token issued at `base`: `iss` (``issuer(base:)``; multi-tenant, the
    /// tenant's issuer, `tid` and `ver` 2.0), `sub`, `aud`, `iat` `now`, `exp` `now + lifetime`
    /// (negative: already expired), and the optional ones given (`email_verified` only with an
    /// email; nil leaves it out; `name` alone, as LINE sends it). `issuer` replaces `iss`; `extra`
    /// replaces or adds any claim (e.g. `"aud": .array([...])`, or `"exp"`).
    public func claims(
        base: String, subject: String, audience: String, tenant: String? = nil, nonce: String? = nil,
        email: String? = nil, emailVerified: Bool? = true, name: String? = nil, issuer: String? = nil, now: Date = Date(),
        lifetime: TimeInterval = 3600, extra: [String: JWTHeaderField] = [:]
    ) -> [String: JWTHeaderField] {
        let iat = Int(now.timeIntervalSince1970)
        var claims: [String: JWTHeaderField] = [
            "sub": .string(subject), "aud": .string(audience), "iat": .int(iat), "exp": .int(iat + Int(lifetime)),
        ]
        if isMultiTenant {
            let tenant = tenant ?? Self.defaultTenant
            claims["iss"] = .string(self.issuer(base: base, tenant: tenant))
            claims["tid"] = .string(tenant)
            claims["ver"] = .string("2.0")
        } else {
            claims["iss"] = .string(self.issuer(base: base))
            if let tenant { claims["tid"] = .string(tenant) }
        }
        if let issuer { claims["iss"] = .string(issuer) }
        if let nonce { claims["nonce"] = .string(nonce) }
        if let email {
            claims["email"] = .string(email)
            if let emailVerified { claims["email_verified"] = .bool(emailVerified) }
        }
        if let name { claims["name"] = .string(name) }
        return claims.merging(extra) { $1 }
    }

    /// An id token with ``claims(base:subject:audience:tenant:nonce:email:emailVerified:name:issuer:now:lifetime:extra:)``,
    /// signed as ``mint(_:algorithm:kid:header:forgery:)`` signs.
    public func mintIDToken(
        base: String, subject: String, audience: String, tenant: String? = nil, nonce: String? = nil,
        email: String? = nil, emailVerified: Bool? = true, name: String? = nil, issuer: String? = nil, now: Date = Date(),
        lifetime: TimeInterval = 3600, extraClaims: [String: JWTHeaderField] = [:], algorithm: Algorithm? = nil,
        kid: String? = nil, header: [String: JWTHeaderField] = [:], forgery: TokenForgery = .valid
    ) throws -> String {
        try mint(
            claims(
                base: base, subject: subject, audience: audience, tenant: tenant, nonce: nonce, email: email,
                emailVerified: emailVerified, name: name, issuer: issuer, now: now, lifetime: lifetime, extra: extraClaims),
            algorithm: algorithm, kid: kid, header: header, forgery: forgery)
    }

    /// A JWT with exactly these claims, signed with the key named `kid` (default: the newest
    /// key of `algorithm`, itself defaulting to RS256 or, failing that, the newest key's) with
    /// `algorithm` (default: the key's). The header is `alg`, `kid`, `typ` JWT, and then
    /// `header`'s members, which replace those (so a header `alg` or `kid` can lie about the key
    /// that signed). `forgery` breaks the token as ``TokenForgery`` says (`unpublishedKey`: a
    /// never-published key of the same kind, kid `not-published`).
    public func mint(
        _ claims: [String: JWTHeaderField], algorithm: Algorithm? = nil, kid: String? = nil,
        header extraHeader: [String: JWTHeaderField] = [:], forgery: TokenForgery = .valid
    ) throws -> String {
        var (key, algorithm) = try signingKey(kid: kid, algorithm: algorithm)
        if forgery == .unpublishedKey { key = try strangerKey(algorithm) }
        var header: [String: JWTHeaderField] = [
            "alg": .string(algorithm.rawValue), "kid": .string(key.kid), "typ": .string("JWT"),
        ]
        switch forgery {
        case .algNone: header["alg"] = .string("none")
        case .hs256WithPublicKey: header["alg"] = .string("HS256")
        default: break
        }
        header.merge(extraHeader) { $1 }
        return try Self.sign(
            rawHeader: MockKeyRing.json(header), rawPayload: MockKeyRing.json(claims), key: key, algorithm: algorithm,
            forgery: forgery)
    }

    /// From raw JSON texts (duplicate members and other malformed JSON), signed like
    /// ``mint(_:algorithm:kid:header:forgery:)`` signs; the header is sent as given.
    public func mint(
        rawHeader: Data, rawPayload: Data, algorithm: Algorithm? = nil, kid: String? = nil, forgery: TokenForgery = .valid
    ) throws -> String {
        let (key, algorithm) = try signingKey(kid: kid, algorithm: algorithm)
        return try Self.sign(rawHeader: rawHeader, rawPayload: rawPayload, key: key, algorithm: algorithm, forgery: forgery)
    }

    static func sign(
        rawHeader: Data, rawPayload: Data, key: MockOIDCKey, algorithm: Algorithm, forgery: TokenForgery
    ) throws -> String {
        let signingInput = "\(base64URL(rawHeader)).\(base64URL(rawPayload))"
        let signature: Data
        switch forgery {
        case .valid, .unpublishedKey:
            signature = try key.sign(Data(signingInput.utf8), algorithm: algorithm)
        case .badSignature:
            var bytes = try key.sign(Data(signingInput.utf8), algorithm: algorithm)
            bytes[bytes.startIndex + bytes.count / 2] ^= 0xFF
            signature = bytes
        case .algNone:
            signature = Data()
        case .hs256WithPublicKey:
            let secret = SymmetricKey(data: Data(key.publicKeyPEM.utf8))
            signature = Data(HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: secret))
        }
        return "\(signingInput).\(base64URL(signature))"
    }
}
