import Foundation

/// An error of the authorization endpoint (RFC 6749 §4.1.2.1, OpenID Connect Core §3.1.2.6):
/// sent back to the client's redirect URI with `error`, `error_description`, `state` and `iss`.
public struct AuthorizationError: Error, Sendable, Equatable {
    public let error: String
    public let description: String

    public init(_ error: String, _ description: String) {
        self.error = error
        self.description = description
    }

    public static func invalidRequest(_ description: String) -> AuthorizationError { .init("invalid_request", description) }
}

/// The scopes the broker's OpenID Provider knows (issue 42 §2); a request's other scopes are
/// ignored (OpenID Connect Core §3.1.2.1).
public enum OAuthScope: String, Sendable, CaseIterable {
    case openid
    case email
    case profile
    case offlineAccess = "offline_access"

    /// The known scopes of a space-separated `scope`, each once, in the order of `allCases`.
    public static func granted(_ scope: String) -> [OAuthScope] {
        let asked = Set(scope.split(separator: " ").map(String.init))
        return allCases.filter { asked.contains($0.rawValue) }
    }

    /// The space-separated form of `scopes`.
    public static func text(_ scopes: [OAuthScope]) -> String { scopes.map(\.rawValue).joined(separator: " ") }
}

/// What a relying party asked for at `/t/{tenant}/authorize` once its client and redirect URI
/// are known to be registered (issue 42 §2, decision 0082).
public struct ClientAuthorizationRequest: Sendable, Equatable {
    public var clientID: String
    public var redirectURI: String
    public var scopes: [OAuthScope]
    public var state: String?
    public var nonce: String?
    /// The PKCE `S256` challenge; required of a public client.
    public var codeChallenge: String?
    /// `prompt=login`: the person signs in again at the provider (always so: the broker keeps no
    /// browser session).
    public var promptLogin: Bool
    /// `prompt=none`: answered `login_required` (the broker keeps no browser session).
    public var promptNone: Bool
    /// The provider to go to straight away, skipping the sign-in page.
    public var provider: String?

    public static let maxState = 512
    public static let maxNonce = 255

    /// Reads the request's parameters (each given once) for a registered client and redirect
    /// URI; an error is the client's to receive at its redirect URI.
    public static func read(
        _ fields: [String: String], clientID: String, redirectURI: String, isPublic: Bool
    ) -> Result<ClientAuthorizationRequest, AuthorizationError> {
        if let state = fields["state"], let refusal = refusal(of: state, named: "state", max: maxState) {
            // The state cannot be echoed: the error goes back without it.
            return .failure(.invalidRequest(refusal))
        }
        if fields["request"] != nil { return .failure(.init("request_not_supported", "Request objects are not supported.")) }
        if fields["request_uri"] != nil {
            return .failure(.init("request_uri_not_supported", "request_uri is not supported."))
        }
        guard let responseType = fields["response_type"] else { return .failure(.invalidRequest("response_type is missing.")) }
        guard responseType == "code" else {
            return .failure(.init("unsupported_response_type", "Only response_type=code is supported."))
        }
        if let mode = fields["response_mode"], mode != "query" {
            return .failure(.invalidRequest("Only response_mode=query is supported."))
        }
        let scopes = OAuthScope.granted(fields["scope"] ?? "")
        guard scopes.contains(.openid) else { return .failure(.init("invalid_scope", "The scope must include openid.")) }
        if let nonce = fields["nonce"], let refusal = refusal(of: nonce, named: "nonce", max: maxNonce) {
            return .failure(.invalidRequest(refusal))
        }
        let challenge = fields["code_challenge"]
        switch (challenge, fields["code_challenge_method"]) {
        case (nil, nil):
            if isPublic { return .failure(.invalidRequest("A public client must send a PKCE code_challenge with S256.")) }
        case (nil, _?):
            return .failure(.invalidRequest("code_challenge_method was sent without code_challenge."))
        case (_?, "S256"?):
            guard let challenge, PKCE.isChallenge(challenge) else {
                return .failure(.invalidRequest("code_challenge must be the 43-character S256 transform of the verifier."))
            }
        case (_?, let method):
            // RFC 7636 §4.3: no method means plain.
            return .failure(
                .invalidRequest("code_challenge_method must be S256 (\(method == nil ? "none given means plain" : "plain is refused"))."))
        }
        let prompts = Set((fields["prompt"] ?? "").split(separator: " ").map(String.init))
        if prompts.contains("none") && prompts.count > 1 {
            return .failure(.invalidRequest("prompt=none cannot be combined with other values."))
        }
        if let provider = fields["provider"], provider.isEmpty || provider.utf8.count > 32 {
            return .failure(.invalidRequest("provider is not a provider id."))
        }
        return .success(
            ClientAuthorizationRequest(
                clientID: clientID, redirectURI: redirectURI, scopes: scopes, state: fields["state"], nonce: fields["nonce"],
                codeChallenge: challenge, promptLogin: prompts.contains("login"), promptNone: prompts.contains("none"),
                provider: fields["provider"]))
    }

    /// Why a free-text parameter is refused, or nil.
    public static func refusal(of value: String, named name: String, max: Int) -> String? {
        guard value.utf8.count <= max, !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            return "\(name) must be at most \(max) bytes without control characters."
        }
        return nil
    }

    /// What the state row keeps of the request for the callback and the token endpoint: the
    /// scope, nonce and challenge, and the issuer that answers (the client, its redirect URI and
    /// its state have columns of their own).
    public func kept(issuer: String) -> KeptClientRequest {
        KeptClientRequest(issuer: issuer, scopes: scopes, nonce: nonce, codeChallenge: codeChallenge)
    }
}

/// The part of a client's request that travels from the authorization endpoint to the token
/// endpoint inside the broker: in the state row, then in the sealed grant of the code.
public struct KeptClientRequest: Sendable, Equatable {
    /// The tenant's issuer, sent back as `iss` with the code or the error (RFC 9207).
    public var issuer: String
    public var scopes: [OAuthScope]
    public var nonce: String?
    public var codeChallenge: String?

    public init(issuer: String, scopes: [OAuthScope], nonce: String?, codeChallenge: String?) {
        self.issuer = issuer
        self.scopes = scopes
        self.nonce = nonce
        self.codeChallenge = codeChallenge
    }

    public var json: String {
        var object: [String: JSONValue] = ["iss": .string(issuer), "scope": .string(OAuthScope.text(scopes))]
        object["nonce"] = nonce.map(JSONValue.string)
        object["code_challenge"] = codeChallenge.map(JSONValue.string)
        var writer = JSONWriter(capacity: 256)
        writer.value(.object(object))
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    public init?(json: String) {
        guard let object = (try? JSONValue.parse(Array(json.utf8), maxDepth: 2))?.object, let issuer = object["iss"]?.string,
            let scope = object["scope"]?.string
        else { return nil }
        self.issuer = issuer
        scopes = OAuthScope.granted(scope)
        nonce = object["nonce"]?.string
        codeChallenge = object["code_challenge"]?.string
    }
}
