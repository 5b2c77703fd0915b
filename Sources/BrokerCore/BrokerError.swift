/// Errors of the domain with a stable machine-readable `code`. The server turns them into
/// RFC 9457 problem details; the CLI prints `detail` and the `hint` that says what to do next.
public struct BrokerError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case badRequest, unauthorized, forbidden, notFound, conflict, unavailable, internalError
    }

    public let code: String
    public let kind: Kind
    public let title: String
    public let detail: String
    public let hint: String?
    /// Members the problem carries beside the standard ones (RFC 9457 §3.2), e.g. the
    /// `account_id` of `identity_already_linked`.
    public let extensions: [String: String]

    public init(code: String, kind: Kind, title: String, detail: String, hint: String? = nil, extensions: [String: String] = [:]) {
        self.code = code
        self.kind = kind
        self.title = title
        self.detail = detail
        self.hint = hint
        self.extensions = extensions
    }

    public var description: String { detail }
}

extension BrokerError {
    public static func invalidSlug(_ value: String, reason: String) -> BrokerError {
        BrokerError(
            code: "invalid_slug", kind: .badRequest, title: "Invalid tenant slug",
            detail: "'\(value.prefix(60))' is not a valid tenant slug: \(reason).",
            hint: "Use 3-40 lowercase letters, digits and dashes, e.g. 'acme-prod'."
        )
    }

    public static func tenantNotFound(_ slug: String) -> BrokerError {
        BrokerError(
            code: "tenant_not_found", kind: .notFound, title: "Tenant not found",
            detail: "There is no tenant '\(slug.prefix(60))'.",
            hint: "List tenants with 'broker tenant list'."
        )
    }

    public static func tenantExists(_ slug: TenantSlug) -> BrokerError {
        BrokerError(
            code: "tenant_exists", kind: .conflict, title: "Tenant already exists",
            detail: "A tenant with slug '\(slug)' already exists.",
            hint: "Pick another slug, or inspect it with 'broker tenant show \(slug)'."
        )
    }

    public static let tenantDisabled = BrokerError(
        code: "tenant_disabled", kind: .forbidden, title: "Tenant disabled",
        detail: "This tenant is disabled.",
        hint: "An operator can re-enable it with 'broker tenant enable <slug>'."
    )

    public static let missingAPIKey = BrokerError(
        code: "missing_api_key", kind: .unauthorized, title: "API key required",
        detail: "Send the tenant's API key as 'Authorization: Bearer <key>'."
    )

    public static let malformedAPIKey = BrokerError(
        code: "malformed_api_key", kind: .unauthorized, title: "Malformed API key",
        detail: "The Authorization header does not carry a well-formed broker API key."
    )

    public static let invalidAPIKey = BrokerError(
        code: "invalid_api_key", kind: .unauthorized, title: "Invalid API key",
        detail: "The API key is unknown or has been revoked."
    )

    public static func insufficientScope(_ scope: APIKeyScope) -> BrokerError {
        BrokerError(
            code: "insufficient_scope", kind: .forbidden, title: "API key lacks a scope",
            detail: "This API key does not carry the '\(scope.rawValue)' scope this operation needs.",
            hint: "Create a key with it: broker api-key create --tenant <slug> --scopes \(scope.rawValue)")
    }

    public static func apiKeyNotFound(_ id: String) -> BrokerError {
        BrokerError(
            code: "api_key_not_found", kind: .notFound, title: "API key not found",
            detail: "This tenant has no API key with id '\(id.prefix(60))'.",
            hint: "List the tenant's keys with 'broker api-key list --tenant <slug>'."
        )
    }

    public static func invalidArgument(_ detail: String, hint: String? = nil) -> BrokerError {
        BrokerError(code: "invalid_argument", kind: .badRequest, title: "Invalid argument", detail: detail, hint: hint)
    }

    public static func signingKeyNotFound(_ kid: String) -> BrokerError {
        BrokerError(
            code: "signing_key_not_found", kind: .notFound, title: "Signing key not found",
            detail: "This tenant has no signing key with kid '\(kid.prefix(80))'.",
            hint: "List the tenant's keys with 'broker keys list --tenant <slug>'."
        )
    }

    public static func noActiveSigningKey(_ slug: TenantSlug) -> BrokerError {
        BrokerError(
            code: "no_active_signing_key", kind: .unavailable, title: "No active signing key",
            detail: "Tenant '\(slug)' has no active signing key.",
            hint: "Create one with 'broker keys rotate --tenant \(slug)'."
        )
    }

    public static func secretUnreadable(_ what: String) -> BrokerError {
        BrokerError(
            code: "secret_unreadable", kind: .internalError, title: "Secret cannot be decrypted",
            detail: "The stored \(what) cannot be decrypted with the configured master key.",
            hint: "Check that BROKER_MASTER_KEY is the key this database was written with."
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
