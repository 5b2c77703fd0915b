import BrokerCore
import Foundation
import Logging
import Storage
import Synchronization

/// Why an API key was refused, as the audit log records it. The answer's code does not tell a
/// revoked key from an unknown one (`invalid_api_key`, on purpose); the audit log does.
package enum APIKeyRefusalReason: String, Sendable {
    case missing = "missing_api_key"
    case malformed = "malformed_api_key"
    case unknown = "invalid_api_key"
    case revoked = "api_key_revoked"
    case tenantDisabled = "tenant_disabled"
    case insufficientScope = "insufficient_scope"
}

/// Writes the security events that no other row records: a replayed identity token, and refused
/// API keys. Both are sampled (decision 0020, issue 20 §6): one row per window per tenant and
/// reason, counting those left out; the use of a revoked key or of a disabled tenant's key gets
/// a bucket per key, so it is recorded at least once per key per window whatever else floods in;
/// junk keys (missing, malformed, unknown) share one bucket per reason and name no tenant, so
/// they can neither hide those nor grow the sampler's memory. Writes happen off the request
/// path (the answer does not wait for them); a failed write is logged, never surfaced.
package final class SecurityEventRecorder: Sendable {
    package let database: Database
    package let sampling: SecurityEventSampling
    private let sampler: Mutex<SecurityEventSampler>

    private struct Writes {
        package var pending = 0
        package var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let writes = Mutex(Writes())

    package init(database: Database, sampling: SecurityEventSampling = SecurityEventSampling()) {
        self.database = database
        self.sampling = sampling
        self.sampler = Mutex(SecurityEventSampler(window: sampling.window, maxBuckets: sampling.maxBuckets))
    }

    package static let tokenReplayed = "sign_in.token_replayed"
    package static let apiKeyRefused = "api_key.refused"
    package static let webCodeRefused = "web_sign_in.code_refused"

    /// An identity token that opened a session before was presented again (401 token_replayed).
    /// Sampled per tenant.
    package func tokenReplayed(tenantID: UUID, provider: String, clientID: String, subject: String, remoteAddress: String?) {
        let key = SecurityEventSampler.Key(action: Self.tokenReplayed, reason: "token_replayed", scope: .tenant(tenantID))
        guard let row = admit(key, subject: .init(tenantID: tenantID, target: clientID)) else { return }
        var details = JSONWriter(capacity: 256)
        details.beginObject()
        details.member("provider", provider)
        details.member("subject", subject)
        details.memberIfPresent("remote_address", remoteAddress)
        details.member(Self.countMember(Self.tokenReplayed), row.notRecordedBefore)
        details.endObject()
        write(tenantID: tenantID, actor: remoteAddress ?? "unknown", action: Self.tokenReplayed, target: clientID, details: details)
    }

    /// A request's API key was refused. `code` is what the answer said; `keyID` and `tenantID`
    /// are known when the key exists in the database.
    package func apiKeyRefused(
        _ reason: APIKeyRefusalReason, code: String, keyPrefix: String?, keyID: UUID?, tenantID: UUID?, remoteAddress: String?
    ) {
        let scope: SecurityEventSampler.Scope
        switch reason {
        case .missing, .malformed, .unknown: scope = .anonymous
        case .revoked, .tenantDisabled: scope = keyID.map { .key($0) } ?? tenantID.map { .tenant($0) } ?? .anonymous
        case .insufficientScope: scope = tenantID.map { .tenant($0) } ?? .anonymous
        }
        // Junk names no tenant: a key that does not exist belongs to nobody.
        let tenantID = scope == .anonymous ? nil : tenantID
        let key = SecurityEventSampler.Key(action: Self.apiKeyRefused, reason: reason.rawValue, scope: scope)
        guard let row = admit(key, subject: .init(tenantID: tenantID, target: keyPrefix)) else { return }
        var details = JSONWriter(capacity: 256)
        details.beginObject()
        details.member("reason", reason.rawValue)
        details.member("code", code)
        details.memberIfPresent("key_prefix", keyPrefix)
        details.memberIfPresent("key_id", keyID?.lowercasedString)
        details.memberIfPresent("remote_address", remoteAddress)
        details.member(Self.countMember(Self.apiKeyRefused), row.notRecordedBefore)
        if row.key.scope == .overflow { details.member("sampled_with_others", true) }
        details.endObject()
        write(tenantID: tenantID, actor: remoteAddress ?? "unknown", action: Self.apiKeyRefused, target: keyPrefix, details: details)
    }

    /// A provider refused the web flow's code exchange (Apple's `invalid_client` or
    /// `invalid_grant`, a token endpoint's error) or the broker could not make its request (no
    /// Apple key): what the operator must fix. Sampled per tenant and reason.
    package func webCodeRefused(
        tenantID: UUID, provider: String, clientID: String, reason: String, fix: String, remoteAddress: String?
    ) {
        let key = SecurityEventSampler.Key(action: Self.webCodeRefused, reason: reason, scope: .tenant(tenantID))
        guard let row = admit(key, subject: .init(tenantID: tenantID, target: clientID)) else { return }
        var details = JSONWriter(capacity: 512)
        details.beginObject()
        details.member("provider", provider)
        details.member("reason", reason)
        details.member("fix", fix)
        details.memberIfPresent("remote_address", remoteAddress)
        details.member(Self.countMember(Self.webCodeRefused), row.notRecordedBefore)
        details.endObject()
        write(tenantID: tenantID, actor: "broker", action: Self.webCodeRefused, target: clientID, details: details)
    }

    /// Returns once every row scheduled so far has been written (or its failure logged): for
    /// tests, and for a shutdown that wants the last events on disk.
    package func settled() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = writes.withLock { state in
                guard state.pending > 0 else { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    package static func countMember(_ action: String) -> String {
        action == tokenReplayed ? "replays_not_recorded_before" : "failures_not_recorded_before"
    }

    /// Counts the event; its row when it is the first of its bucket's window. Pruned buckets that
    /// left events out are written here, each with its count.
    private func admit(_ key: SecurityEventSampler.Key, subject: SecurityEventSampler.Subject) -> SecurityEventSampler.Row? {
        let now = sampling.now()
        let (row, pruned) = sampler.withLock { $0.admit(key, subject: subject, at: now) }
        for trailing in pruned { writeTrailing(trailing) }
        return row
    }

    /// The count of a bucket whose window ended with events left out and none after them.
    private func writeTrailing(_ row: SecurityEventSampler.Row) {
        var details = JSONWriter(capacity: 192)
        details.beginObject()
        details.member("reason", row.key.reason)
        var target: String?
        if case .key(let keyID) = row.key.scope {
            target = row.subject.target
            details.memberIfPresent("key_prefix", target)
            details.member("key_id", keyID.lowercasedString)
        }
        details.member(Self.countMember(row.key.action), row.notRecordedBefore)
        details.member("window_closed", true)
        details.endObject()
        write(tenantID: row.subject.tenantID, actor: "broker", action: row.key.action, target: target, details: details)
    }

    private func write(tenantID: UUID?, actor: String, action: String, target: String?, details: JSONWriter) {
        let text = String(decoding: details.bytes, as: UTF8.self)
        let (database, logger) = (database, database.logger)
        writes.withLock { $0.pending += 1 }
        Task {
            do {
                // In the event's tenant's scope (a refusal of no known tenant is the broker's own).
                try await TenantScope.with(tenantID.map { .tenant($0) } ?? .allTenants) {
                    try await database.auditLog.record(tenantID: tenantID, actor: actor, action: action, target: target, details: text)
                }
            } catch {
                logger.warning(
                    "could not record a security event",
                    metadata: ["action": "\(action)", "error": "\(String(describing: type(of: error)))"])
            }
            let waiters = writes.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.pending -= 1
                guard state.pending == 0 else { return [] }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }
}
