import Foundation

/// An error of the token and userinfo endpoints in OAuth's own form (RFC 6749 §5.2, RFC 6750
/// §3.1): `error` and `error_description` as JSON, which is what OAuth client libraries read,
/// not problem+json (decision 0082).
package struct TokenEndpointError: Error, Sendable, Equatable {
    package let error: String
    package let description: String
    /// 400, or 401 for a client that failed to authenticate (and an invalid bearer token).
    package let status: Int

    package init(_ error: String, _ description: String, status: Int = 400) {
        self.error = error
        self.description = description
        self.status = status
    }

    package static func invalidRequest(_ description: String) -> TokenEndpointError { .init("invalid_request", description) }
    package static func invalidGrant(_ description: String) -> TokenEndpointError { .init("invalid_grant", description) }
    package static func invalidClient(_ description: String) -> TokenEndpointError {
        .init("invalid_client", description, status: 401)
    }
    package static func unauthorizedClient(_ description: String) -> TokenEndpointError { .init("unauthorized_client", description) }
    package static func unsupportedGrantType(_ description: String) -> TokenEndpointError {
        .init("unsupported_grant_type", description)
    }
    /// The database or a provider did not answer in time: RFC 6749 has no code for it at the
    /// token endpoint; 503 with `temporarily_unavailable` is what clients retry on.
    package static let temporarilyUnavailable = TokenEndpointError(
        "temporarily_unavailable", "The broker could not finish the request for a moment; try again.", status: 503)
    /// Over the public rate limit (sent as 429 with `Retry-After`): RFC 6749 has no code for it
    /// either; `temporarily_unavailable` is the one clients already treat as "try later".
    package static let rateLimited = TokenEndpointError(
        "temporarily_unavailable", "Too many requests from this address; retry after the Retry-After seconds.", status: 429)
    package static let serverError = TokenEndpointError("server_error", "The broker failed to answer the request.", status: 500)
}
