/// A failure of the domain, as a meaning: a stable machine-readable `code`, what kind of failure
/// it is, and the facts (`detail`, `arguments`). It holds no HTTP status and no CLI wording: the
/// HTTP edge maps ``Kind`` to a status and a code to a problem's hint, the CLI maps a code to the
/// hint that says what to run next (``arguments`` carries the names those hints fill in).
public struct BrokerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure, independent of how it is reported.
    public enum Kind: Sendable, Equatable {
        /// The input breaks a rule; the same input will always fail.
        case invalidInput
        /// The caller's credentials are missing, malformed or unknown.
        case unauthenticated
        /// The caller is known but may not do this.
        case notPermitted
        /// What was named does not exist (for this tenant).
        case notFound
        /// It contradicts what is stored (it exists already, or a rule of the stored state).
        case conflict
        /// Something this operation needs is not available now; a retry may succeed.
        case unavailable
        /// The caller sent more than its limit allows; `arguments["retry_after"]` says after how
        /// many seconds a retry may succeed.
        case rateLimited
        /// The broker's own state is broken (a secret it cannot read, an invariant).
        case internalFailure
    }

    public let code: String
    public let kind: Kind
    public let title: String
    public let detail: String
    /// What to do next, when the layer that raised the failure is the one that knows: an edge
    /// (the CLI, the HTTP problem mapping) or a provider type's own settings. Domain failures
    /// leave it nil; the edges find theirs by `code` and ``arguments``.
    public let hint: String?
    /// Members the problem carries beside the standard ones (RFC 9457 §3.2), e.g. the
    /// `account_id` of `identity_already_linked`.
    public let extensions: [String: String]
    /// Named facts of the failure the edges' wording may use (`tenant`, `scope`, `rule`, ...);
    /// never shown as they are.
    public let arguments: [String: String]

    public init(
        code: String, kind: Kind, title: String, detail: String, hint: String? = nil, extensions: [String: String] = [:],
        arguments: [String: String] = [:]
    ) {
        self.code = code
        self.kind = kind
        self.title = title
        self.detail = detail
        self.hint = hint
        self.extensions = extensions
        self.arguments = arguments
    }

    public var description: String { detail }

    /// The same failure with a hint (an edge's wording).
    public func hinted(_ hint: String?) -> BrokerError {
        BrokerError(code: code, kind: kind, title: title, detail: detail, hint: hint, extensions: extensions, arguments: arguments)
    }
}

extension BrokerError {
    public static func invalidSlug(_ value: String, reason: String) -> BrokerError {
        BrokerError(
            code: "invalid_slug", kind: .invalidInput, title: "Invalid tenant slug",
            detail: "'\(value.prefix(60))' is not a valid tenant slug: \(reason). A slug is 3-40 lowercase letters, digits and dashes."
        )
    }

    public static func tenantNotFound(_ slug: String) -> BrokerError {
        BrokerError(
            code: "tenant_not_found", kind: .notFound, title: "Tenant not found",
            detail: "There is no tenant '\(slug.prefix(60))'.", arguments: ["tenant": String(slug.prefix(60))]
        )
    }

    public static func tenantExists(_ slug: TenantSlug) -> BrokerError {
        BrokerError(
            code: "tenant_exists", kind: .conflict, title: "Tenant already exists",
            detail: "A tenant with slug '\(slug)' already exists.", arguments: ["tenant": slug.rawValue]
        )
    }

    public static let tenantDisabled = BrokerError(
        code: "tenant_disabled", kind: .notPermitted, title: "Tenant disabled",
        detail: "This tenant is disabled."
    )

    public static let missingAPIKey = BrokerError(
        code: "missing_api_key", kind: .unauthenticated, title: "API key required",
        detail: "Send the tenant's API key as 'Authorization: Bearer <key>'."
    )

    public static let malformedAPIKey = BrokerError(
        code: "malformed_api_key", kind: .unauthenticated, title: "Malformed API key",
        detail: "The Authorization header does not carry a well-formed broker API key."
    )

    /// A request over a rate limit: `limit` names which (`api_key`, `public_ip`,
    /// `failed_authentication`); a retry after `retryAfter` seconds may succeed.
    public static func rateLimited(retryAfter: Int, limit: String) -> BrokerError {
        BrokerError(
            code: "rate_limited", kind: .rateLimited, title: "Too many requests",
            detail: "Too many requests; retry after \(retryAfter) second\(retryAfter == 1 ? "" : "s").",
            arguments: ["retry_after": String(retryAfter), "limit": limit])
    }

    public static let invalidAPIKey = BrokerError(
        code: "invalid_api_key", kind: .unauthenticated, title: "Invalid API key",
        detail: "The API key is unknown or has been revoked."
    )

    public static func insufficientScope(_ scope: APIKeyScope) -> BrokerError {
        BrokerError(
            code: "insufficient_scope", kind: .notPermitted, title: "API key lacks a scope",
            detail: "This API key does not carry the '\(scope.rawValue)' scope this operation needs.",
            arguments: ["scope": scope.rawValue])
    }

    public static func apiKeyNotFound(_ id: String) -> BrokerError {
        BrokerError(
            code: "api_key_not_found", kind: .notFound, title: "API key not found",
            detail: "This tenant has no API key with id '\(id.prefix(60))'."
        )
    }

    /// Input that breaks a rule. `hint` is for the edges and provider types that word their own
    /// (the CLI, a type's settings); the domain names the `rule` instead, for the edges to word.
    public static func invalidArgument(
        _ detail: String, hint: String? = nil, rule: String? = nil, arguments: [String: String] = [:]
    ) -> BrokerError {
        var arguments = arguments
        if let rule { arguments["rule"] = rule }
        return BrokerError(
            code: "invalid_argument", kind: .invalidInput, title: "Invalid argument", detail: detail, hint: hint,
            arguments: arguments)
    }

    public static func signingKeyNotFound(_ kid: String) -> BrokerError {
        BrokerError(
            code: "signing_key_not_found", kind: .notFound, title: "Signing key not found",
            detail: "This tenant has no signing key with kid '\(kid.prefix(80))'."
        )
    }

    public static func noActiveSigningKey(_ slug: TenantSlug) -> BrokerError {
        BrokerError(
            code: "no_active_signing_key", kind: .unavailable, title: "No active signing key",
            detail: "Tenant '\(slug)' has no active signing key.", arguments: ["tenant": slug.rawValue]
        )
    }

    public static func secretUnreadable(_ what: String) -> BrokerError {
        BrokerError(
            code: "secret_unreadable", kind: .internalFailure, title: "Secret cannot be decrypted",
            detail: "The stored \(what) cannot be decrypted with the configured master key."
        )
    }
}

extension BrokerError {
    /// A change refused because it breaks App Store Review Guideline 4.8 for a tenant
    /// (decision 0026). `detail` says what breaks where, `hint` what makes it compliant.
    public static func loginPolicyViolation(_ detail: String, hint: String) -> BrokerError {
        BrokerError(
            code: "login_policy_violation", kind: .conflict, title: "Breaks App Store Review Guideline 4.8", detail: detail,
            hint: hint)
    }
}
