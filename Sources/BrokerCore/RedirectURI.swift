import Foundation

/// The redirect URIs of a relying party (issue 42 §1, decision 0081): what may be registered,
/// and how a request's URI is compared with the registered ones.
///
/// Registered: an absolute URI without fragment or user information, at most 2,000 bytes of
/// printable ASCII, and one of
/// - `https` with a host;
/// - `http` on a loopback address (`127.0.0.1`, `[::1]`; not the name `localhost`, RFC 8252
///   §8.3), only for a client registered with `--allow-loopback`;
/// - a private-use scheme of a public client, named in reverse domain order
///   (`com.example.app:/callback`, RFC 8252 §7.1).
///
/// Compared: byte for byte, no normalisation, no prefix, no wildcard, with one exception: a
/// public client's loopback URI matches whatever port the request names (RFC 8252 §7.3: the
/// app listens on a port the system gives it), with the rest still exact.
public enum RedirectURI {
    public static let maximumLength = 2_000

    /// Why `uri` cannot be registered for such a client, or nil when it can.
    public static func refusal(_ uri: String, isPublic: Bool, allowLoopback: Bool) -> String? {
        guard !uri.isEmpty, uri.utf8.count <= maximumLength else { return "it must be 1 to \(maximumLength) characters" }
        guard uri.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else { return "it must be printable ASCII without spaces" }
        guard let parts = Parts(uri) else { return "it is not an absolute URI" }
        guard !uri.contains("#") else { return "it must not have a fragment (RFC 6749 §3.1.2)" }
        guard !parts.hasUserInfo else { return "it must not carry a user name or password" }
        switch parts.scheme {
        case "https":
            return parts.host?.isEmpty == false ? nil : "an https URI needs a host"
        case "http":
            guard parts.isLoopback else {
                return "http is allowed only on a loopback address (127.0.0.1 or [::1]); use https"
            }
            return allowLoopback ? nil : "an http loopback URI needs --allow-loopback"
        default:
            guard isPublic else { return "a confidential client's redirect URI is https (or http on loopback)" }
            guard parts.scheme.contains("."), parts.host == nil || parts.host?.isEmpty == true else {
                return "a private-use scheme is named in reverse domain order, as com.example.app:/callback (RFC 8252 §7.1)"
            }
            return nil
        }
    }

    /// Whether the request's `given` URI is one of `registered`.
    public static func matches(_ given: String, registered: [String], isPublic: Bool) -> Bool {
        if registered.contains(given) { return true }
        // The port aside, the request's URI must be one that could be registered: no user
        // information (`http://@[::1]/cb`), no fragment, nothing the exact comparison would refuse.
        guard isPublic, refusal(given, isPublic: true, allowLoopback: true) == nil, let request = Parts(given), request.isLoopback,
            request.scheme == "http"
        else { return false }
        return registered.contains { candidate in
            guard let stored = Parts(candidate), stored.isLoopback, stored.scheme == "http" else { return false }
            return stored.host == request.host && stored.rest == request.rest
        }
    }

    /// The pieces the rules look at, split by Foundation's URL parser (RFC 3986).
    struct Parts {
        let scheme: String
        let host: String?
        let hasUserInfo: Bool
        /// Everything after the authority (path and query), as written.
        let rest: String

        init?(_ text: String) {
            guard let components = URLComponents(string: text), let scheme = components.scheme, !scheme.isEmpty,
                scheme == scheme.lowercased()
            else { return nil }
            self.scheme = scheme
            self.host = components.host
            self.hasUserInfo = components.user != nil || components.password != nil
            let query = components.percentEncodedQuery.map { "?" + $0 } ?? ""
            self.rest = components.percentEncodedPath + query
        }

        var isLoopback: Bool { host == "127.0.0.1" || host == "[::1]" || host == "::1" }
    }
}
