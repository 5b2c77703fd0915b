import BrokerCore
import Foundation
import Logging
import Providers
import Storage

/// Makes the queued Apple revocations (issue 23 §2; decision 0040): for each due row, the client
/// secret of the client that obtained the token and a call to Apple's `/auth/revoke`
/// (`token_type_hint=refresh_token`). A failure is retried with exponential backoff for about a
/// day, then the row is `failed` (`broker apple revocations retry` queues it again). Rows are
/// taken with `FOR UPDATE SKIP LOCKED` and a 15-minute lease, so workers of several instances
/// share the queue, one takes each row, and no lock is held while Apple answers; a worker that
/// dies mid-call leaves its row to be taken again when the lease runs out, and one stopped
/// gracefully finishes its call or gives the lease back (issue 39 D11).
package struct AppleRevocationWorker: Sendable {
    /// When a failed call is tried again (about a day of retries by default).
    package typealias RetryPolicy = RetryBackoff

    let database: Database
    let store: ProviderSettingsStore
    let secrets: SecretBox
    let tokenClient: AppleTokenClient
    let clientSecrets: AppleClientSecrets
    let policy: RetryPolicy
    let logger: Logger

    package init(
        database: Database, store: ProviderSettingsStore, secrets: SecretBox, tokenClient: AppleTokenClient,
        clientSecrets: AppleClientSecrets, policy: RetryPolicy = RetryPolicy(), logger: Logger
    ) {
        self.database = database
        self.store = store
        self.secrets = secrets
        self.tokenClient = tokenClient
        self.clientSecrets = clientSecrets
        self.policy = policy
        self.logger = logger
    }

    /// Makes every revocation due at `now` (at most `limit`); returns how many were tried.
    /// Takes nothing new once `stop` is requested.
    @discardableResult
    package func runDue(now: @Sendable () -> Date = { Date() }, limit: Int = 100, stop: GracefulStop? = nil) async throws -> Int {
        try await TenantScope.acrossTenants(because: "the queue holds every tenant's revocations") {
            var tried = 0
            while tried < limit, stop?.isRequested != true {
                let at = now()
                guard try await database.appleRevocations.processNext(now: at, { due in await attempt(due, now: at) }) else { break }
                tried += 1
            }
            return tried
        }
    }

    /// Runs until cancelled or `stop` is requested: the due work each time `wake` delivers (a
    /// deletion on this instance yields to `signal`) and every `pollInterval` (deletions on other
    /// instances, retries coming due). `wake` should buffer one element: wake-ups while a run is
    /// under way fold into one more run. At a stop the call in flight finishes and is recorded;
    /// cancelled, it gives its lease back.
    package func run(
        wake: AsyncStream<Void>, signal: AsyncStream<Void>.Continuation, pollInterval: Duration = .seconds(5),
        stop: GracefulStop = GracefulStop()
    ) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                signal.yield()
                while await stop.sleep(for: pollInterval) { signal.yield() }
                // Wakes the loop below to see the stop.
                signal.yield()
            }
            for await _ in wake {
                if stop.isRequested { break }
                do {
                    try await runDue(stop: stop)
                } catch is CancellationError {
                    break
                } catch {
                    logger.debug(
                        "Apple revocation queue unavailable; trying again", metadata: ["error": "\(String(describing: type(of: error)))"])
                }
            }
            group.cancelAll()
        }
    }

    /// One call to Apple for `due`.
    func attempt(_ due: AppleRevocationRepository.Due, now: Date) async -> AppleRevocationRepository.Result {
        let revocation = due.revocation
        let attempts = revocation.attempts + 1
        func failed(_ error: String) -> AppleRevocationRepository.Result {
            let retryAt = policy.nextAttempt(after: attempts, now: now)
            logger.warning(
                "Apple revocation failed",
                metadata: [
                    "revocation_id": "\(revocation.id.lowercasedString)", "client_id": "\(revocation.clientID)", "error": "\(error)",
                    "attempts": "\(attempts)", "next": "\(retryAt.map { $0.iso8601String } ?? "given up")",
                ])
            return .failed(error: error, retryAt: retryAt)
        }
        let resolved: ResolvedAppleClient?
        do {
            resolved = try await store.appleClient(tenantID: revocation.tenantID, clientID: revocation.clientID)
        } catch {
            return Task.isCancelled ? interrupted(revocation) : failed("database_unavailable")
        }
        guard let resolved else { return failed("client_not_configured: \(revocation.clientID) is no longer a client of the tenant") }
        let token: Data
        do {
            token = try secrets.open(
                due.sealedToken, context: AppleRevocationRepository.sealingContext(tenantID: revocation.tenantID, id: revocation.id),
                what: "queued Apple refresh token")
        } catch {
            logger.warning(
                "a queued Apple refresh token does not open; the revocation is given up",
                metadata: ["revocation_id": "\(revocation.id.lowercasedString)", "error": "\(error.code)"])
            return .failed(error: "token_unreadable: \(error.code)", retryAt: nil)
        }
        do {
            let secret = try await clientSecrets.secret(team: resolved.team, clientID: revocation.clientID)
            try await tokenClient.revoke(
                refreshToken: String(decoding: token, as: UTF8.self), clientID: revocation.clientID, clientSecret: secret)
        } catch {
            // Cancelled by the broker's stop: not Apple's failure.
            if Task.isCancelled { return interrupted(revocation) }
            return failed((error as? ProviderFailure)?.code ?? "\(error)")
        }
        logger.notice(
            "Apple refresh token revoked",
            metadata: ["revocation_id": "\(revocation.id.lowercasedString)", "client_id": "\(revocation.clientID)"])
        return .revoked
    }

    private func interrupted(_ revocation: AppleRevocationRepository.Revocation) -> AppleRevocationRepository.Result {
        logger.notice(
            "Apple revocation interrupted by the broker's stop; its lease is given back",
            metadata: ["revocation_id": "\(revocation.id.lowercasedString)", "client_id": "\(revocation.clientID)"])
        return .interrupted
    }
}
