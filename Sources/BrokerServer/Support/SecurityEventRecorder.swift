import BrokerCore
import Foundation
import Logging
import Storage
import Synchronization

/// Writes the security events that no other row records (decision 0020): a replayed identity
/// token, and refused API keys, sampled. Writes happen off the request path (the answer does
/// not wait for them); a failed write is logged, never surfaced.
final class SecurityEventRecorder: Sendable {
    let database: Database
    /// At most one API-key failure row per this interval per process; the row counts the
    /// failures it stands for. A flood of bad keys costs the database one insert per interval.
    let apiKeyFailureInterval: Duration

    private struct Sample {
        var lastWritten: ContinuousClock.Instant?
        var suppressed = 0
    }
    private let apiKeyFailures = Mutex(Sample())

    init(database: Database, apiKeyFailureInterval: Duration = .seconds(10)) {
        self.database = database
        self.apiKeyFailureInterval = apiKeyFailureInterval
    }

    /// An identity token that opened a session before was presented again (401 token_replayed).
    func tokenReplayed(tenantID: UUID, provider: String, clientID: String, subject: String, remoteAddress: String?) {
        var details = JSONWriter(capacity: 256)
        details.beginObject()
        details.member("provider", provider)
        details.member("subject", subject)
        details.memberIfPresent("remote_address", remoteAddress)
        details.endObject()
        write(
            tenantID: tenantID, actor: remoteAddress ?? "unknown", action: "sign_in.token_replayed", target: clientID,
            details: details)
    }

    /// A request's API key was missing, malformed, unknown, revoked, of a disabled tenant or
    /// short of the scope. Sampled: the first failure of an interval is written with the count
    /// of those left out since the last row.
    func apiKeyRefused(code: String, keyPrefix: String?, tenantID: UUID?, remoteAddress: String?) {
        let now = ContinuousClock.now
        let suppressed: Int? = apiKeyFailures.withLock { sample in
            if let last = sample.lastWritten, now - last < apiKeyFailureInterval {
                sample.suppressed += 1
                return nil
            }
            defer { sample = Sample(lastWritten: now, suppressed: 0) }
            return sample.suppressed
        }
        guard let suppressed else { return }
        var details = JSONWriter(capacity: 256)
        details.beginObject()
        details.member("reason", code)
        details.memberIfPresent("key_prefix", keyPrefix)
        details.memberIfPresent("remote_address", remoteAddress)
        details.member("failures_not_recorded_before", suppressed)
        details.endObject()
        write(tenantID: tenantID, actor: remoteAddress ?? "unknown", action: "api_key.refused", target: keyPrefix, details: details)
    }

    private func write(tenantID: UUID?, actor: String, action: String, target: String?, details: JSONWriter) {
        let text = String(decoding: details.bytes, as: UTF8.self)
        let (database, logger) = (database, database.logger)
        Task {
            do {
                try await database.auditLog.record(tenantID: tenantID, actor: actor, action: action, target: target, details: text)
            } catch {
                logger.warning("could not record a security event", metadata: ["action": "\(action)", "error": "\(String(describing: type(of: error)))"])
            }
        }
    }
}
