import AsyncHTTPClient
import BrokerCore
import Foundation
import Logging
import Providers
import Storage
import Synchronization

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
    /// The leases of takes whose answer the database did not give (it went away): given back
    /// at the start of the next round, so that such a delivery does not wait out its lease.
    let lostTakes = LostTakes()

    final class LostTakes: Sendable {
        private let leases = Mutex<[Date]>([])
        func add(_ more: [Date]) { leases.withLock { $0 += more } }
        func drain() -> [Date] {
            leases.withLock { leases in
                defer { leases = [] }; return leases
            }
        }
    }

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
    /// Takes nothing new once `stop` is requested.
    @discardableResult
    package func runDue(now: @escaping @Sendable () -> Date = { Date() }, limit: Int = 1_000, stop: GracefulStop? = nil) async throws -> Int
    {
        let lost = lostTakes.drain()
        do {
            try await database.webhooks.releaseLeases(lost)
        } catch {
            lostTakes.add(lost)
            throw error
        }
        var dispatched = 0
        while true {
            let read = try await database.webhooks.dispatch()
            guard read > 0 else { break }
            dispatched += read
        }
        // Tenants whose deliveries are being sent: each lane takes another tenant's first
        // (issue 39 E12: one tenant's receiver taking 11 s a delivery held another tenant's
        // next delivery for 78 s).
        let sending = Mutex<[UUID: Int]>([:])
        // Once no other tenant had a delivery due, this round stops looking (one statement a
        // delivery again); the next round looks anew.
        let othersIdle = Mutex(false)
        let busy: @Sendable () -> [UUID] = { othersIdle.withLock { $0 } ? [] : sending.withLock { Array($0.keys) } }
        let takeNext: @Sendable (Date, @escaping @Sendable (WebhookRepository.Due) async -> WebhookRepository.Result) async throws -> Bool =
            {
                at, work in
                let avoid = busy()
                if !avoid.isEmpty {
                    if try await database.webhooks.processNext(now: at, excluding: avoid, work) { return true }
                    othersIdle.withLock { $0 = true }
                }
                return try await database.webhooks.processNext(now: at, work)
            }
        let sendTracked: @Sendable (WebhookRepository.Due, Date) async -> WebhookRepository.Result = { due, at in
            sending.withLock { $0[due.tenantID, default: 0] += 1 }
            defer {
                sending.withLock { counts in
                    let left = counts[due.tenantID, default: 1] - 1
                    counts[due.tenantID] = left > 0 ? left : nil
                }
            }
            return await send(due, now: at)
        }
        // One lane first: the others start once it has taken a delivery (an idle poll is two
        // statements, not one per lane), not once it has sent it.
        let (taken, tell) = AsyncStream.makeStream(of: Void.self)
        // A lane that fails (the database went away) stops taking deliveries but does not end
        // the round: its siblings finish the deliveries they are sending and record them.
        // Thrown out of the group, the failure cancelled them mid-delivery, and their outcomes
        // were lost until their leases ran out (a delivery sent twice).
        let failure = Mutex<(any Error)?>(nil)
        let sent = await withTaskGroup(of: Int.self) { group in
            func lane(first: Bool) -> @Sendable () async -> Int {
                {
                    var sent = 0
                    defer { if first { tell.finish() } }
                    do {
                        while sent < limit / lanes + 1, stop?.isRequested != true {
                            let at = now()
                            let tellOthers = first && sent == 0
                            let took = try await takeNext(at) { due in
                                if tellOthers { tell.yield() }
                                return await sendTracked(due, at)
                            }
                            guard took else { break }
                            sent += 1
                        }
                    } catch {
                        if let interrupted = error as? WebhookRepository.TakeInterrupted { lostTakes.add([interrupted.leaseUntil]) }
                        failure.withLock { if $0 == nil { $0 = error } }
                    }
                    return sent
                }
            }
            group.addTask(operation: lane(first: true))
            var started = false
            for await _ in taken {
                started = true
                break
            }
            if started { for _ in 1..<lanes { group.addTask(operation: lane(first: false)) } }
            return await group.reduce(0, +)
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return dispatched + sent
    }

    /// Runs until cancelled or `stop` is requested: every `pollInterval` while there is work,
    /// backing off to `idleInterval` while there is none (a webhook set, or an event committed,
    /// waits at most that long). At a stop the deliveries in flight finish and are recorded;
    /// cancelled, they give their leases back.
    package func run(pollInterval: Duration = .seconds(1), idleInterval: Duration = .seconds(5), stop: GracefulStop = GracefulStop()) async
    {
        var wait = pollInterval
        while !Task.isCancelled, !stop.isRequested {
            do {
                let done = try await runDue(stop: stop)
                wait = done > 0 ? pollInterval : min(wait * 2, idleInterval)
            } catch is CancellationError {
                return
            } catch {
                logger.debug("webhook deliveries unavailable; trying again", metadata: ["error": "\(String(describing: type(of: error)))"])
                wait = idleInterval
            }
            guard await stop.sleep(for: wait) else { return }
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
                try await OutboundPost.send(
                    url: destination.url.absoluteString, headers: headers, body: body, with: client, timeout: timeout))
        } catch {
            sent = .failure(error)
        }
        try? await client.shutdown()
        if case .failure = sent, Task.isCancelled {
            // The broker's stop cancelled the send: not the backend's failure.
            logger.notice(
                "webhook delivery interrupted by the broker's stop; its lease is given back",
                metadata: ["tenant_id": "\(due.tenantID.lowercasedString)", "webhook_id": "\(id)"])
            return .interrupted
        }
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
