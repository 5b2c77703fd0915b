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
    /// Hashes of well-formed keys the database does not know, so that junk traffic repeating
    /// them does not reach it (decision 0048). Entries live 5 s; a key created meanwhile cannot
    /// be among them (keys are 256 random bits).
    package let unknownKeys: ExpiringCache<Data, Bool>?
    /// Each key's rate and each address's budget of refusals (decision 0048); nil: no limits.
    package let limiter: RequestLimiter?
    /// Keys whose `last_used_at` this instance stamped within the minute; nil: never stamped.
    package let recentlyUsed: ExpiringCache<UUID, Bool>?
    /// Hashes of keys this instance found valid lately: looked up again without meeting the
    /// address's refused-key budget (issue 39 B6).
    package let seenValid: ExpiringCache<Data, Bool>?

    package init(
        database: Database, cache: ExpiringCache<Data, AuthenticatedCaller>, events: SecurityEventRecorder? = nil,
        unknownKeys: ExpiringCache<Data, Bool>? = nil, limiter: RequestLimiter? = nil,
        recentlyUsed: ExpiringCache<UUID, Bool>? = nil, seenValid: ExpiringCache<Data, Bool>? = nil
    ) {
        self.recentlyUsed = recentlyUsed
        self.seenValid = seenValid
        self.database = database
        self.cache = cache
        self.events = events
        self.unknownKeys = unknownKeys
        self.limiter = limiter
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
        let caller: AuthenticatedCaller
        do {
            caller = try await authenticate(authorization, requiring: scope, refusal: &refusal, client: context.remoteAddress)
        } catch let error as BrokerError where error.kind != .rateLimited {
            events?.apiKeyRefused(
                refusal.reason, code: error.code, keyPrefix: refusal.token?.prefix, keyID: refusal.key?.id,
                tenantID: refusal.key?.tenantID, remoteAddress: context.remoteAddress)
            // Refusals spend the address's budget; the one that runs it out is already a 429.
            if error.kind == .unauthenticated, let limited = limiter?.authenticationRefused(client: context.remoteAddress) {
                throw limited
            }
            throw error
        }
        try limiter?.admit(apiKey: caller.apiKey, tenant: caller.tenant)
        // The rest of the request sees its tenant's rows only (decision 0055).
        RequestTenantScope.settle(caller.tenant.id)
        stampUse(of: caller.apiKey)
        return caller
    }

    /// `last_used_at`, coarse: at most once a minute per key from this instance, off the
    /// request's path (a stamp that fails is dropped; the next minute tries again).
    private func stampUse(of key: APIKeyRecord) {
        guard let recentlyUsed, recentlyUsed.value(for: key.id) == nil else { return }
        recentlyUsed.set(true, for: key.id)
        let database = database
        Task.detached(priority: .background) {
            try? await TenantScope.tenant(key.tenantID) { try await database.apiKeys.touch(id: key.id, tenantID: key.tenantID) }
        }
    }

    private func authenticate(_ header: String?, requiring scope: APIKeyScope, refusal: inout Refusal, client: String?)
        async throws -> AuthenticatedCaller
    {
        let token = header.flatMap { Self.bearerToken($0).flatMap(APIKeyToken.init(parsing:)) }
        let hash = token?.hash
        let cached = hash.flatMap { cache.value(for: $0) }
        // An address that ran out of refusals may still use a key this instance knows or has
        // found valid (its cache entry may have expired meanwhile: a backend behind the same
        // address as a junk-key sender is not locked out); anything else waits, without a
        // lookup: guessing keys from one address is slowed to the budget.
        let known = cached != nil || hash.flatMap { seenValid?.value(for: $0) } != nil
        if !known, let limiter, !limiter.mayTryUnknownKeys(client: client) {
            throw limiter.authenticationRefused(client: client) ?? BrokerError.rateLimited(retryAfter: 1, limit: "failed_authentication")
        }
        guard header != nil else { throw BrokerError.missingAPIKey }
        refusal.reason = .malformed
        guard let token, let hash else { throw BrokerError.malformedAPIKey }
        refusal.token = token
        refusal.reason = .unknown
        let key: APIKeyRecord
        let tenant: Tenant
        if let cached {
            (key, tenant) = (cached.apiKey, cached.tenant)
        } else {
            if unknownKeys?.value(for: hash) != nil { throw BrokerError.invalidAPIKey }
            let generation = cache.generation
            guard let (found, owner) = try await database.apiKeys.lookup(hash: hash) else {
                unknownKeys?.set(true, for: hash)
                throw BrokerError.invalidAPIKey
            }
            // Not stored when a revocation or tenant change arrived during the lookup.
            cache.set(AuthenticatedCaller(tenant: owner, apiKey: found), for: hash, unlessClearedSince: generation)
            (key, tenant) = (found, owner)
        }
        refusal.key = key
        refusal.reason = .revoked
        // A revoked key answers as an unknown one; only the audit log tells them apart.
        guard key.revokedAt == nil else { throw BrokerError.invalidAPIKey }
        if cached == nil { seenValid?.set(true, for: hash) }
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
