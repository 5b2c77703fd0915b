import BrokerCore
import Foundation

/// The web flow of an OpenID Connect provider (issue 22 §3; types `oidc` and `google`), stored
/// as `settings.web` of its configuration: the client it starts with (the first `--client-id`),
/// its sealed secret (`provider_configs.sealed_secret`), the redirect URI, the return URLs the
/// broker may send the person on to, the scopes, and the endpoints discovery named.
public struct OIDCWebSettings: Sendable, Equatable {
    public var clientID: String
    /// `--redirect-uri`; nil: `{BROKER_PUBLIC_URL}/oidc/callback`.
    public var redirectURI: String?
    public var returnURLs: [String]
    public var scopes: String
    public var authorizationEndpoint: String
    public var tokenEndpoint: String
    /// `client_secret_basic` or `client_secret_post`, as the token endpoint takes it.
    public var tokenAuthMethod: String
    /// Discovery lists HS256: the token endpoint's id token may be signed with the client
    /// secret (LINE's web login). Accepted only in that answer, never on `POST /v1/sign-in/{id}`.
    public var acceptsHS256: Bool

    public static let defaultScopes = "openid email profile"
    public static let authMethods = ["client_secret_basic", "client_secret_post"]

    /// The `broker provider enable` flags of the web flow.
    public static let flags: [ProviderSettingFlag] = [
        ProviderSettingFlag(
            "client-secret", value: "SECRET", help: "Web flow: the first client's secret, read from the file; kept encrypted."),
        ProviderSettingFlag("return-url", value: "URL", repeatable: true, help: "Web flow: a URL the broker may send the person back to."),
        ProviderSettingFlag("redirect-uri", value: "URL", help: "Web flow: the redirect URI registered at the provider."),
        ProviderSettingFlag("scopes", value: "LIST", help: "Web flow: the scopes asked for (default \"openid email profile\")."),
    ]

    public init(
        clientID: String, redirectURI: String?, returnURLs: [String], scopes: String, authorizationEndpoint: String, tokenEndpoint: String,
        tokenAuthMethod: String, acceptsHS256: Bool
    ) {
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.returnURLs = returnURLs
        self.scopes = scopes
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.tokenAuthMethod = tokenAuthMethod
        self.acceptsHS256 = acceptsHS256
    }

    /// The web settings stored in a configuration; nil when the flow is off.
    public init?(_ configuration: ProviderConfiguration) {
        guard let web = configuration.settings["web"]?.object, let clientID = web["client_id"]?.string,
            let authorize = web["authorization_endpoint"]?.string, let token = web["token_endpoint"]?.string
        else { return nil }
        self.init(
            clientID: clientID, redirectURI: web["redirect_uri"]?.string,
            returnURLs: web["return_urls"]?.array?.compactMap(\.string) ?? [], scopes: web["scopes"]?.string ?? Self.defaultScopes,
            authorizationEndpoint: authorize, tokenEndpoint: token,
            tokenAuthMethod: web["token_auth_method"]?.string ?? "client_secret_basic", acceptsHS256: web["hs256"] == .bool(true))
    }

    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "client_id": .string(clientID), "return_urls": .array(returnURLs.map(JSONValue.string)), "scopes": .string(scopes),
            "authorization_endpoint": .string(authorizationEndpoint), "token_endpoint": .string(tokenEndpoint),
            "token_auth_method": .string(tokenAuthMethod), "hs256": .bool(acceptsHS256),
        ]
        object["redirect_uri"] = redirectURI.map(JSONValue.string)
        return .object(object)
    }

    /// What `broker provider show` prints of it.
    public var described: [(name: String, value: JSONValue)] {
        [
            ("web_client_id", .string(clientID)), ("redirect_uri", redirectURI.map(JSONValue.string) ?? .null),
            ("return_urls", .array(returnURLs.map(JSONValue.string))), ("scopes", .string(scopes)),
            ("authorization_endpoint", .string(authorizationEndpoint)), ("token_endpoint", .string(tokenEndpoint)),
            ("token_auth_method", .string(tokenAuthMethod)), ("hs256_in_token_answer", .bool(acceptsHS256)),
        ]
    }

    /// Whether the operator asked for the web flow (any of its flags given).
    public static func requested(_ input: ProviderSettingsInput) -> Bool {
        flags.contains { input.isSet($0.name) }
    }

    /// Checks the web flags and seals the secret; nil when none is given. `discovery` names the
    /// endpoints (nil: refused, the endpoints are not known).
    public static func configure(
        _ input: ProviderSettingsInput, clientID: String, discovery: OIDCDiscovery?, secrets: SecretBox
    ) throws -> (settings: OIDCWebSettings, sealedSecret: Data)? {
        guard requested(input) else { return nil }
        guard let secret = try input.value("client-secret") else {
            throw BrokerError.invalidArgument(
                "The web flow needs --client-secret-file.",
                hint: "Put the client secret alone in a file and pass --client-secret-file FILE.")
        }
        guard !secret.isEmpty, secret.utf8.count <= 512, !secret.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw BrokerError.invalidArgument(
                "The client secret file holds no usable secret (empty, too long, or whitespace inside).",
                hint: "Put the client secret from the provider's console alone in the file.")
        }
        let returnURLs = input.list("return-url")
        guard !returnURLs.isEmpty else {
            throw BrokerError.invalidArgument(
                "The web flow needs at least one --return-url.",
                hint: "Repeat --return-url for each page of the product that finishes a sign-in.")
        }
        for url in returnURLs { try requireURL(url, flag: "--return-url") }
        let redirectURI = try input.value("redirect-uri")
        if let redirectURI { try requireURL(redirectURI, flag: "--redirect-uri") }
        let scopes = (try input.value("scopes") ?? defaultScopes).split(separator: " ").map(String.init)
        guard scopes.contains("openid"), scopes.count <= 20,
            scopes.allSatisfy({
                $0.count <= 64 && $0.unicodeScalars.allSatisfy { (0x21...0x7E).contains($0.value) && $0 != "\"" && $0 != "\\" }
            })
        else {
            throw BrokerError.invalidArgument(
                "--scopes must be space-separated scope names including openid.", hint: "e.g. --scopes \"openid email profile\"")
        }
        guard let discovery, let authorize = discovery.authorizationEndpoint, let token = discovery.tokenEndpoint else {
            throw BrokerError.invalidArgument(
                "The provider's discovery document names no authorization_endpoint and token_endpoint, so the web flow cannot start.",
                hint: "Check the issuer; the web flow reads its endpoints from discovery.")
        }
        let offered = discovery.tokenEndpointAuthMethods ?? ["client_secret_basic"]
        guard let method = authMethods.first(where: offered.contains) else {
            throw BrokerError.invalidArgument(
                "The token endpoint takes none of client_secret_basic and client_secret_post (it lists \(offered.joined(separator: ", ").prefix(200)))."
            )
        }
        let sealed = try secrets.seal(
            Data(secret.utf8),
            context: ProviderConfiguration.secretContext(tenantID: input.tenantID, provider: input.provider, clientID: clientID))
        let settings = OIDCWebSettings(
            clientID: clientID, redirectURI: redirectURI,
            returnURLs: returnURLs.enumerated().filter { returnURLs.firstIndex(of: $0.element) == $0.offset }.map(\.element),
            scopes: scopes.joined(separator: " "), authorizationEndpoint: authorize, tokenEndpoint: token, tokenAuthMethod: method,
            acceptsHS256: discovery.algorithms?.contains("HS256") ?? false)
        return (settings, sealed)
    }

    /// An https:// URL (http:// on loopback), without a fragment or user info.
    static func requireURL(_ text: String, flag: String) throws {
        try FreeText.require(text, option: flag)
        guard OIDCSettings.isAcceptableURL(text), !text.contains("#") else {
            throw BrokerError.invalidArgument(
                "\(flag) '\(text.prefix(120))' is not an https:// URL without a fragment (http:// only on a loopback address).")
        }
    }
}
