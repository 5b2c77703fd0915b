import AsyncHTTPClient
import BrokerCore
import Foundation
import Logging
import Providers
import Storage

/// Sends each tenant's events to its webhook (issue 23 §5; decision 0044): it dispatches the
/// events committed since the webhook's cursor into deliveries, then sends the due ones, signed
/// as Standard Webhooks has it, each account's in order, several accounts at once. Anything but
/// a 2xx answer within ``timeout`` is retried with backoff for about a day (30 s doubling to
/// 1 h, 30 attempts); then the delivery is `failed` until an operator redelivers it. At least
/// once: a worker that dies after the backend took a delivery but before recording it sends it
/// again when its lease runs out (the `webhook-id` stays the same, for the backend to dedupe).
package struct WebhookDeliveryWorker: Sendable {
    let database: Database
    let secrets: SecretBox
    let addresses: WebhookAddressPolicy
    let timeout: Duration
    let policy: RetryBackoff
    let logger: Logger
    /// Deliveries sent at once (of different accounts).
    let lanes: Int

    package init(
        database: Database, secrets: SecretBox, allowInsecure: Bool, addresses: WebhookAddressPolicy? = nil,
        timeout: Duration = .seconds(10), policy: RetryBackoff = RetryBackoff(), lanes: Int = 4, logger: Logger
    ) {
        self.database = database
        self.secrets = secrets
        self.addresses = addresses ?? .of(allowInsecure: allowInsecure)
        self.timeout = timeout
        self.policy = policy
        self.lanes = max(1, lanes)
        self.logger = logger
    }

    /// Dispatches what was committed, then sends every delivery due at `now()` (at most
    /// `limit`); returns how many events were dispatched and deliveries sent.
    @discardableResult
    package func runDue(now: @escaping @Sendable () -> Date = { Date() }, limit: Int = 1_000) async throws -> Int {
        var dispatched = 0
        while true {
            let read = try await database.webhooks.dispatch()
            guard read > 0 else { break }
            dispatched += read
        }
        // One delivery first: the lanes start only when there is work (an idle poll is two
        // statements, not one per lane).
        let first = now()
        guard try await database.webhooks.processNext(now: first, { due in await send(due, now: first) }) else { return dispatched }
        let sent = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<lanes {
                group.addTask {
                    var sent = 0
                    while sent < limit / lanes + 1 {
                        let at = now()
                        guard try await database.webhooks.processNext(now: at, { due in await send(due, now: at) }) else { break }
                        sent += 1
                    }
                    return sent
                }
            }
            return try await group.reduce(0, +)
        }
        return dispatched + 1 + sent
    }

    /// Runs until cancelled: every `pollInterval` while there is work, backing off to
    /// `idleInterval` while there is none (a webhook set, or an event committed, waits at most
    /// that long).
    package func run(pollInterval: Duration = .seconds(1), idleInterval: Duration = .seconds(5)) async {
        var wait = pollInterval
        while !Task.isCancelled {
            do {
                let done = try await runDue()
                wait = done > 0 ? pollInterval : min(wait * 2, idleInterval)
                try await Task.sleep(for: wait)
            } catch is CancellationError {
                return
            } catch {
                logger.debug("webhook deliveries unavailable; trying again", metadata: ["error": "\(String(describing: type(of: error)))"])
                try? await Task.sleep(for: idleInterval)
            }
        }
    }

    /// Whether sending ended because time ran out: the worker's own deadline or the client's,
    /// whichever came first (issue 39 F20: a backend answering after the timeout was recorded
    /// as unreachable when the client's deadline fired first).
    package static func isTimeout(_ error: any Error) -> Bool {
        if error is DeadlineExceeded { return true }
        guard let error = error as? HTTPClientError else { return false }
        return error == .deadlineExceeded || error == .readTimeout || error == .writeTimeout
    }

    /// One signed POST of `due` to its webhook.
    func send(_ due: WebhookRepository.Due, now: Date) async -> WebhookRepository.Result {
        let attempts = due.attempts + 1
        let id = EventJSON.id(due.event)
        func failed(_ status: Int?, _ error: String) -> WebhookRepository.Result {
            let retryAt = policy.nextAttempt(after: attempts, now: now)
            logger.warning(
                "webhook delivery failed",
                metadata: [
                    "tenant_id": "\(due.tenantID.lowercasedString)", "webhook_id": "\(id)", "error": "\(error)", "attempts": "\(attempts)",
                    "next": "\(retryAt.map { $0.iso8601String } ?? "given up")",
                ])
            return .failed(status: status, error: error, retryAt: retryAt)
        }
        let destination: WebhookDestination
        let address: String
        do {
            destination = try WebhookDestination(due.url, policy: addresses)
            address = try await destination.checkedAddress(addresses)
        } catch let error as BrokerError {
            return failed(nil, "\(error.code): \(error.detail)")
        } catch {
            return failed(nil, "address_lookup_failed")
        }
        let signer: WebhookSignature
        do {
            let secret = try secrets.open(
                due.sealedSecret, context: WebhookRepository.sealingContext(tenantID: due.tenantID), what: "webhook signing secret")
            guard let parsed = WebhookSignature(secret: String(decoding: secret, as: UTF8.self)) else {
                return .failed(status: nil, error: "secret_unreadable", retryAt: nil)
            }
            signer = parsed
        } catch {
            return .failed(status: nil, error: "secret_unreadable: \(error.code)", retryAt: nil)
        }
        let body = EventJSON.webhookBody(due.event)
        let timestamp = Int(now.timeIntervalSince1970)
        let headers = [
            ("Content-Type", "application/json"), ("User-Agent", "IdentityBroker-Webhooks/1"), ("webhook-id", id),
            ("webhook-timestamp", String(timestamp)), ("webhook-signature", signer.signature(id: id, timestamp: timestamp, body: body)),
        ]
        let status: Int
        // A client of its own that connects to the checked address (TLS still names and
        // verifies the host): the shared client would look the name up again.
        let client = HTTPClient.webhook(pinning: destination.host, to: address)
        let sent: Swift.Result<Int, any Error>
        do {
            sent = .success(
                try await OutboundPost.send(url: destination.url.absoluteString, headers: headers, body: body, with: client, timeout: timeout))
        } catch {
            sent = .failure(error)
        }
        try? await client.shutdown()
        switch sent {
        case .success(let code): status = code
        case .failure(let error) where Self.isTimeout(error): return failed(nil, "timeout: no answer within \(timeout)")
        case .failure: return failed(nil, "unreachable: no connection to the webhook host")
        }
        guard (200..<300).contains(status) else { return failed(status, "http_\(status)") }
        logger.info("webhook delivered", metadata: ["tenant_id": "\(due.tenantID.lowercasedString)", "webhook_id": "\(id)"])
        return .delivered(status: status)
    }
}
