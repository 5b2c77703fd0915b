import BrokerCore
import Foundation
import Storage

/// The tenant and key behind a request's `Authorization: Bearer <api key>`.
public struct AuthenticatedCaller: Sendable {
    public let tenant: Tenant
    public let apiKey: APIKeyRecord
}

/// Checks API keys: shape first (junk never reaches the database), then one lookup by hash
/// that also loads the tenant. The lookup finds revoked keys too, so that their use is recorded
/// as such (issue 20 §6); they are refused as unknown keys are (`invalid_api_key`).
package struct APIKeyAuthenticator: Sendable {
    package let database: Database
    /// Key hash → key and tenant (revoked keys too: they stay refused). Revocations and tenant
    /// changes clear it through LISTEN/NOTIFY on every instance; entries live at most 5 s regardless.
    package let cache: ExpiringCache<Data, AuthenticatedCaller>
    /// Refused keys reach the audit log, sampled (decision 0020).
    package let events: SecurityEventRecorder?

    package init(database: Database, cache: ExpiringCache<Data, AuthenticatedCaller>, events: SecurityEventRecorder? = nil) {
        self.database = database
        self.cache = cache
        self.events = events
    }

    /// What a refusal knew of the key, for its audit row.
    private struct Refusal {
        package var reason: APIKeyRefusalReason = .missing
        package var token: APIKeyToken?
        package var key: APIKeyRecord?
    }

    /// Authenticates the value of a request's `Authorization` header (nil when it had none);
    /// the key must carry `scope`. Refusals are recorded with the context's remote address.
    package func authenticate(authorization: String?, requiring scope: APIKeyScope, context: OperationContext) async throws
        -> AuthenticatedCaller
    {
        var refusal = Refusal()
        do {
            return try await authenticate(authorization, requiring: scope, refusal: &refusal)
        } catch let error as BrokerError {
            events?.apiKeyRefused(
                refusal.reason, code: error.code, keyPrefix: refusal.token?.prefix, keyID: refusal.key?.id,
                tenantID: refusal.key?.tenantID, remoteAddress: context.remoteAddress)
            throw error
        }
    }

    private func authenticate(_ header: String?, requiring scope: APIKeyScope, refusal: inout Refusal) async throws
        -> AuthenticatedCaller
    {
        guard let header else { throw BrokerError.missingAPIKey }
        refusal.reason = .malformed
        guard let token = Self.bearerToken(header).flatMap(APIKeyToken.init(parsing:)) else { throw BrokerError.malformedAPIKey }
        refusal.token = token
        refusal.reason = .unknown
        let hash = token.hash
        let key: APIKeyRecord
        let tenant: Tenant
        if let cached = cache.value(for: hash) {
            (key, tenant) = (cached.apiKey, cached.tenant)
        } else {
            guard let (found, owner) = try await database.apiKeys.lookup(hash: hash) else {
                throw BrokerError.invalidAPIKey
            }
            cache.set(AuthenticatedCaller(tenant: owner, apiKey: found), for: hash)
            (key, tenant) = (found, owner)
        }
        refusal.key = key
        refusal.reason = .revoked
        // A revoked key answers as an unknown one; only the audit log tells them apart.
        guard key.revokedAt == nil else { throw BrokerError.invalidAPIKey }
        refusal.reason = .tenantDisabled
        guard tenant.status == .active else { throw BrokerError.tenantDisabled }
        refusal.reason = .insufficientScope
        guard key.scopes.contains(scope) else { throw BrokerError.insufficientScope(scope) }
        return AuthenticatedCaller(tenant: tenant, apiKey: key)
    }

    /// The credentials of `Bearer <credentials>` (scheme case-insensitive, RFC 9110), else nil.
    package static func bearerToken(_ header: String) -> String? {
        let bytes = header.utf8
        guard bytes.count > 7 else { return nil }
        let scheme = bytes.prefix(6)
        guard String(decoding: scheme, as: UTF8.self).lowercased() == "bearer", bytes.dropFirst(6).first == UInt8(ascii: " ")
        else { return nil }
        let credentials = bytes.dropFirst(7).drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        let trimmed = credentials.reversed().drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }.count
        guard trimmed > 0 else { return nil }
        return String(decoding: credentials.prefix(trimmed), as: UTF8.self)
    }
}
