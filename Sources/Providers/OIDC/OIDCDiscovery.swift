import AsyncHTTPClient
import BrokerCore
import Foundation
import NIOCore
import NIOHTTP1

/// An issuer's discovery document (OpenID Connect Discovery 1.0), read with its members' types
/// checked.
public struct OIDCDiscovery: Sendable, Equatable {
    public let issuer: String
    public let jwksURI: String
    public let algorithms: [String]?
    /// The web flow's endpoints and the token endpoint's client authentication methods
    /// (absent members: nil; the methods default to `client_secret_basic`, §3).
    public var authorizationEndpoint: String? = nil
    public var tokenEndpoint: String? = nil
    public var tokenEndpointAuthMethods: [String]? = nil

    /// Where the document of `issuer` is: `{issuer}/.well-known/openid-configuration`; a
    /// `{tid}` issuer's is read with `common` in its place (Microsoft's document for every tenant).
    public static func documentURL(issuer: String) -> String {
        let base = issuer.replacingOccurrences(of: IssuerTemplate.placeholder, with: "common")
        return (base.hasSuffix("/") ? String(base.dropLast()) : base) + "/.well-known/openid-configuration"
    }

    /// Fetches and checks the document of `issuer` within `timeout`: its `issuer` must equal
    /// the configured one exactly (§4.3), or, for a `{tid}` issuer, Microsoft's template with
    /// `{tenantid}` must be the same template.
    public static func fetch(issuer: String, httpClient: HTTPClient, timeout: Duration) async throws(OIDCDiscoveryFailure) -> OIDCDiscovery
    {
        try await fetch(documentURL(issuer: issuer), issuer: issuer, httpClient: httpClient, timeout: timeout)
    }

    /// Fetches the document at `url` and checks that it names `issuer` (Google's document,
    /// whose URL is configured on its own).
    public static func fetch(_ url: String, issuer: String, httpClient: HTTPClient, timeout: Duration) async throws(OIDCDiscoveryFailure)
        -> OIDCDiscovery
    {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        let answer: ProviderAnswer
        do {
            answer = try await ProviderAnswer.fetch(request, with: httpClient, timeout: timeout, maxBytes: 262_144)
        } catch {
            throw .unreachable(url: url, reason: error is DeadlineExceeded ? "no answer within \(timeout)" : "\(error)")
        }
        guard answer.status == 200 else { throw .unreachable(url: url, reason: "it answered HTTP \(answer.status)") }
        guard let document = (try? JSONValue.parse(answer.body.readableBytesView, maxDepth: 8))?.object,
            let found = document["issuer"]?.string(maxBytes: 2_048), let jwksURI = document["jwks_uri"]?.string(maxBytes: 2_048)
        else { throw .malformed(url: url) }
        var algorithms: [String]?
        if let listed = document["id_token_signing_alg_values_supported"] {
            guard let values = listed.array, values.count <= 32 else { throw .malformed(url: url) }
            algorithms = values.compactMap { $0.string(maxBytes: 16) }
        }
        let expected = issuer
        let comparable =
            IssuerTemplate.isTemplate(issuer) ? found.replacingOccurrences(of: "{tenantid}", with: IssuerTemplate.placeholder) : found
        guard comparable == expected else { throw .issuerMismatch(expected: expected, found: String(found.prefix(200))) }
        guard OIDCSettings.isAcceptableURL(jwksURI) else { throw .insecureKeysURL(String(jwksURI.prefix(200))) }
        var discovery = OIDCDiscovery(issuer: found, jwksURI: jwksURI, algorithms: algorithms)
        for (name, value) in [
            ("authorization_endpoint", document["authorization_endpoint"]), ("token_endpoint", document["token_endpoint"]),
        ] {
            guard let value else { continue }
            guard let text = value.string(maxBytes: 2_048), OIDCSettings.isAcceptableURL(text) else {
                throw .insecureEndpoint(name: name, url: value.string(maxBytes: 2_048).map { String($0.prefix(200)) } ?? "(not a string)")
            }
            if name == "token_endpoint" { discovery.tokenEndpoint = text } else { discovery.authorizationEndpoint = text }
        }
        if let methods = document["token_endpoint_auth_methods_supported"] {
            guard let values = methods.array, values.count <= 32 else { throw .malformed(url: url) }
            discovery.tokenEndpointAuthMethods = values.compactMap { $0.string(maxBytes: 64) }
        }
        return discovery
    }
}

/// Why discovery did not give a usable document.
public enum OIDCDiscoveryFailure: Error, Sendable, Equatable {
    case unreachable(url: String, reason: String)
    case malformed(url: String)
    case issuerMismatch(expected: String, found: String)
    case insecureKeysURL(String)
    /// `authorization_endpoint` or `token_endpoint` is not an https:// URL.
    case insecureEndpoint(name: String, url: String)
}
