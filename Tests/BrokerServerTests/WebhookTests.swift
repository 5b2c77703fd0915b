import AsyncHTTPClient
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Synchronization
import Providers
import Storage
import TestSupport
import Testing

/// Webhooks (issue 23 §5): each tenant's events posted to its backend, signed as Standard
/// Webhooks has it, at least once, in order per account, retried, then failed until redelivered.
/// The test app runs `broker serve`'s background tasks, so its own worker delivers too (on the
/// real clock); tests that move the clock run a worker of their own beside it.
@Suite struct WebhookTests {
    @Test func deliveriesAreSignedAndVerifyWithAStockStandardWebhooksLibrary() async throws {
        try await AppleTestSetup.run { setup in
            try await WebhookSink.with { sink in
                let secret = try #require(try await WebhookFixtures.setWebhook(setup, sink))
                #expect(secret.hasPrefix("whsec_"))
                let account = try await WebhookFixtures.signIn(setup, "hooked")
                try await WebhookFixtures.delete(setup, account)

                // broker serve's worker (the test app's) delivers both on its own.
                let received = try await eventuallyValue(timeout: .seconds(20)) {
                    sink.deliveries
                } until: {
                    $0.count >= 2
                }
                #expect(received.map { $0.json["type"] as? String } == ["account.created", "account.deleted"])
                for delivery in received {
                    #expect(delivery.contentType == "application/json")
                    #expect(delivery.signature.hasPrefix("v1,"))
                    #expect(delivery.json["id"] as? String == delivery.id, "webhook-id is the event's id")
                    #expect(delivery.json["account_id"] as? String == account)
                    #expect(delivery.json["timestamp"] is String && delivery.json["data"] is [String: Any])
                    let verified = try await WebhookFixtures.verify(delivery, secret: secret)
                    #expect(verified.status == 0, "\(verified.output)")
                    #expect(verified.output.contains("\"id\": \"\(delivery.id)\""), "\(verified.output)")
                }
                // Tampered with, or checked with another secret, it does not verify.
                let tampered = WebhookSink.Delivery(
                    id: received[0].id, timestamp: received[0].timestamp, signature: received[0].signature,
                    contentType: received[0].contentType,
                    body: received[0].body.replacingOccurrences(of: "account.created", with: "account.deleted"),
                    status: 204)
                #expect(try await WebhookFixtures.verify(tampered, secret: secret).status != 0)
                #expect(try await WebhookFixtures.verify(received[0], secret: WebhookSignature.newSecret()).status != 0)

                // The pull API hands out the same events with the same ids.
                let pulled = try await setup.client.execute(uri: "/v1/events", method: .get, headers: bearer(setup.apiKey)).json()
                let ids = (pulled["events"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
                #expect(ids == received.map(\.id))
                let delivered = try await eventuallyValue {
                    try await setup.app.database.webhooks.deliveries(tenantID: setup.tenant.id)
                } until: {
                    $0.count == 2 && $0.allSatisfy { $0.status == .delivered }
                }
                #expect(delivered.allSatisfy { $0.status == .delivered && $0.lastStatus == 204 && $0.deliveredAt != nil })
            }
        }
    }

    @Test func aFailingBackendIsRetriedWithBackoffAndEachAccountsEventsStayInOrder() async throws {
        try await AppleTestSetup.run { setup in
            try await WebhookSink.with { sink in
                sink.answer(.status(503))
                _ = try await WebhookFixtures.setWebhook(setup, sink)
                let first = try await WebhookFixtures.signIn(setup, "first")
                try await WebhookFixtures.delete(setup, first)
                let second = try await WebhookFixtures.signIn(setup, "second")

                // Each account's first event is tried and refused; the first account's deletion
                // waits behind its creation and is never sent meanwhile.
                let tried = try await eventuallyValue(timeout: .seconds(20)) {
                    sink.deliveries
                } until: {
                    Set($0.compactMap { $0.json["account_id"] as? String }) == [first, second]
                }
                #expect(!tried.contains { $0.json["type"] as? String == "account.deleted" })
                // Once the refusals are recorded (the sink answers before the worker writes):
                let waiting = try await eventuallyValue(timeout: .seconds(20)) {
                    try await setup.app.database.webhooks.deliveries(tenantID: setup.tenant.id)
                } until: {
                    $0.count == 3 && $0.filter { $0.attempts > 0 }.count == 2
                }
                #expect(waiting.count == 3 && waiting.allSatisfy { $0.status == .pending })
                let refused = waiting.filter { $0.attempts > 0 }
                #expect(refused.allSatisfy { $0.lastStatus == 503 && $0.lastError == "http_503" })
                #expect(refused.allSatisfy { $0.nextAttemptAt > Date().addingTimeInterval(20) }, "backed off 30 s")
                let deletion = try #require(waiting.first { $0.eventType == "account.deleted" })
                #expect(deletion.attempts == 0)
                #expect(deletion.nextAttemptAt > Date().addingTimeInterval(20), "held back until its account's retry")

                // The backend recovers; two hours on, everything goes, the first account's in order.
                sink.answer(.status(200))
                try await WebhookFixtures.worker(setup).runDue(now: { Date().addingTimeInterval(7_200) })
                let all = try await setup.app.database.webhooks.deliveries(tenantID: setup.tenant.id)
                #expect(all.allSatisfy { $0.status == .delivered }, "\(all.map { ($0.eventType, $0.status, $0.lastError) })")
                let firstAccount = sink.deliveries.filter { $0.json["account_id"] as? String == first }
                let lastCreated = try #require(firstAccount.lastIndex { $0.json["type"] as? String == "account.created" })
                let deleted = try #require(firstAccount.firstIndex { $0.json["type"] as? String == "account.deleted" })
                #expect(firstAccount[lastCreated].status == 200)
                #expect(lastCreated < deleted, "account.deleted only after account.created was taken")
                #expect(firstAccount.filter { $0.json["type"] as? String == "account.deleted" }.count == 1)
            }
        }
    }

    @Test func aDeliveryThatKeepsFailingIsGivenUpThenRedeliveredOnRequest() async throws {
        try await AppleTestSetup.run { setup in
            try await WebhookSink.with { sink in
                sink.answer(.status(410))
                _ = try await WebhookFixtures.setWebhook(setup, sink, events: ["account.created"])
                let account = try await WebhookFixtures.signIn(setup, "unlucky")
                let worker = WebhookFixtures.worker(setup, maxAttempts: 2)
                // Each round runs the worker an hour later than the last, until the delivery is given
                // up. Bounded by time, not by rounds: the instance's own worker may hold the
                // delivery (FOR UPDATE SKIP LOCKED) while a round runs, and that round finds nothing.
                var later = 3_600.0
                let gaveUp = try await eventually(timeout: .seconds(30)) {
                    let at = later
                    later += 3_600
                    try await worker.runDue(now: { Date().addingTimeInterval(at) })
                    return try await !setup.app.database.webhooks.deliveries(tenantID: setup.tenant.id, status: .failed).isEmpty
                }
                #expect(gaveUp)
                let failed = try #require(try await setup.app.database.webhooks.deliveries(tenantID: setup.tenant.id).first)
                #expect(failed.status == .failed)
                #expect(failed.lastStatus == 410)
                #expect(failed.accountID?.lowercasedString == account)
                #expect(
                    try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).map(\.action).contains(
                        "webhook.delivery_failed"))
                let sent = sink.deliveries.count
                #expect(try await worker.runDue(now: { Date().addingTimeInterval(100_000) }) == 0, "a failed delivery is not sent")
                #expect(sink.deliveries.count == sent)

                sink.answer(.status(204))
                let admin = WebhookAdmin(database: setup.app.database, actor: "test")
                #expect(try await admin.redeliver(tenant: "acme", eventIDs: []) == [failed.eventID])
                _ = try await eventuallyValue(timeout: .seconds(20)) {
                    try await setup.app.database.webhooks.deliveries(tenantID: setup.tenant.id).first?.status
                } until: {
                    $0 == .delivered
                }
                #expect(sink.deliveries.last?.status == 204)
                #expect(sink.deliveries.last?.id == "evt_\(failed.eventID)", "the same webhook-id: the backend can dedupe")
                await #expect(throws: BrokerError.self) { try await admin.redeliver(tenant: "acme", eventIDs: [failed.eventID + 1_000]) }
            }
        }
    }

    @Test func onlyTheEventsAskedForAreDeliveredAndADisabledWebhookSendsNothing() async throws {
        try await AppleTestSetup.run { setup in
            try await WebhookSink.with { sink in
                _ = try await WebhookFixtures.setWebhook(setup, sink, events: ["account.deleted"])
                let account = try await WebhookFixtures.signIn(setup, "filtered")
                try await WebhookFixtures.delete(setup, account)
                let received = try await eventuallyValue(timeout: .seconds(20)) {
                    sink.deliveries
                } until: {
                    !$0.isEmpty
                }
                #expect(received.map { $0.json["type"] as? String } == ["account.deleted"])

                let admin = WebhookAdmin(database: setup.app.database, actor: "test")
                try await admin.disable(tenant: "acme")
                await #expect(throws: BrokerError.self) { try await admin.disable(tenant: "acme") }
                let later = try await WebhookFixtures.signIn(setup, "unheard")
                try await WebhookFixtures.delete(setup, later)
                // Both events are committed and readable; none is dispatched to a disabled webhook.
                _ = try await eventuallyValue {
                    try await setup.client.execute(uri: "/v1/events", method: .get, headers: bearer(setup.apiKey)).json()
                } until: {
                    ($0["events"] as? [Any])?.count == 4
                }
                try await WebhookFixtures.worker(setup).runDue()
                #expect(sink.deliveries.count == 1)
                #expect(try await setup.app.database.webhooks.deliveries(tenantID: setup.tenant.id).count == 1)

                // Set again: the secret stays, and only events from then on are delivered.
                #expect(try await WebhookFixtures.setWebhook(setup, sink) == nil, "the secret is kept")
                let status = try await admin.show(tenant: "acme")
                #expect(status.webhook?.enabled == true && status.webhook?.eventTypes == nil)
                #expect(status.deliveries[.delivered] == 1)
                let fresh = try await WebhookFixtures.signIn(setup, "heard")
                let after = try await eventuallyValue(timeout: .seconds(20)) {
                    sink.deliveries
                } until: {
                    $0.count >= 2
                }
                #expect(after.last?.json["account_id"] as? String == fresh)
                #expect(after.count == 2)
                #expect(try await WebhookFixtures.setWebhook(setup, sink, rotate: true)?.hasPrefix("whsec_") == true)
            }
        }
    }

    @Test func workersOfSeveralInstancesSendEachDeliveryOnce() async throws {
        try await AppleTestSetup.run { setup in
            try await WebhookSink.with { sink in
                _ = try await WebhookFixtures.setWebhook(setup, sink)
                // Three instances' workers on one clock: the test app's and two more, sending
                // while the events are being made.
                let database = setup.app.database
                let tenant = setup.tenant.id
                // Their own poll loops (as `broker serve` runs them), polling often.
                let workers = (0..<2).map { _ in
                    Task { await WebhookFixtures.worker(setup).run(pollInterval: .milliseconds(20), idleInterval: .milliseconds(20)) }
                }
                for index in 0..<10 { _ = try await WebhookFixtures.signIn(setup, "shared-\(index)") }
                _ = try await eventuallyValue(timeout: .seconds(20)) {
                    try await database.webhooks.deliveries(tenantID: tenant, status: .delivered).count
                } until: {
                    $0 == 10
                }
                for worker in workers { worker.cancel() }
                let accepted = sink.deliveries.filter { $0.status == 204 }
                #expect(accepted.count == 10, "each delivery sent once: \(accepted.map(\.id))")
                #expect(Set(accepted.map(\.id)).count == 10)
            }
        }
    }

    @Test func aBackendThatNeverAnswersIsCutOffAndRetried() async throws {
        try await AppleTestSetup.run { setup in
            try await WebhookSink.with { sink in
                sink.answer(.hang)
                // The test app's worker is cut off after 10 s; this one after 300 ms.
                _ = try await WebhookFixtures.setWebhook(setup, sink)
                var policy = RetryBackoff()
                policy.maxAttempts = 30
                let worker = WebhookDeliveryWorker(
                    database: setup.app.database, secrets: setup.app.secrets, allowInsecure: true, timeout: .milliseconds(300),
                    policy: policy, logger: setup.app.database.logger)
                _ = try await WebhookFixtures.signIn(setup, "patient")
                let failed = try await eventuallyValue(timeout: .seconds(20)) {
                    try await worker.runDue(now: { Date().addingTimeInterval(7_200) })
                    return try await setup.app.database.webhooks.deliveries(tenantID: setup.tenant.id).first
                } until: {
                    $0?.lastError?.hasPrefix("timeout") == true
                }
                #expect(failed?.status == .pending)
                #expect(failed?.lastStatus == nil)
            }
        }
    }

    /// The issue's literals are refused by `set` too, as written.
    @Test func theSpecialPurposeLiteralsAreRefused() async throws {
        try await AppleTestSetup.run { setup in
            let admin = WebhookAdmin(database: setup.app.database, actor: "test")
            for literal in ["[64:ff9b:1::7f00:1]", "[2002:7f00:1::1]", "[2001::7f00:1]", "[fec0::1]", "[::ffff:0:7f00:1]", "192.88.99.1"] {
                #expect(
                    await WebhookFixtures.refusal(admin, setup.app.secrets, "https://\(literal)/x", events: [])
                        == "webhook_address_not_public",
                    "\(literal)")
            }
        }
    }

    /// A delivery looks the host up once and connects to the address it checked (issue 39 B5:
    /// checked with one lookup and connected with another, a name answered first with a public
    /// address and then with 127.0.0.1 reached loopback). Here the policy's resolver is the only
    /// one that knows the name, and it permits only the first address it answers: the sink gets
    /// the delivery only if the connection went to that address, not to a second lookup's.
    @Test func aDeliveryConnectsToTheAddressItChecked() async throws {
        try await AppleTestSetup.run { setup in
            try await WebhookSink.with { sink in
                let port = try #require(URLComponents(string: sink.url)?.port)
                _ = try await WebhookAdmin(database: setup.app.database, actor: "test").set(
                    tenant: "acme", url: "http://Rebind.TEST:\(port)/hooks/identity", events: [], rotateSecret: false,
                    secrets: setup.app.secrets, allowInsecure: true)
                let lookups = Mutex<[String]>([])
                let addresses = WebhookAddressPolicy(
                    allowsHTTP: true,
                    resolve: { host in
                        let count = lookups.withLock {
                            $0.append(host); return $0.count
                        }
                        return count == 1 ? [[127, 0, 0, 1]] : [[127, 0, 0, 2]]
                    },
                    permits: { $0 == [127, 0, 0, 1] })
                let worker = WebhookDeliveryWorker(
                    database: setup.app.database, secrets: setup.app.secrets, allowInsecure: false, addresses: addresses,
                    timeout: .seconds(5), logger: setup.app.database.logger)
                _ = try await WebhookFixtures.signIn(setup, "rebound")
                let delivered = try await eventuallyValue(timeout: .seconds(20)) {
                    try await worker.runDue(now: { Date().addingTimeInterval(7_200) })
                    return try await setup.app.database.webhooks.deliveries(tenantID: setup.tenant.id).first
                } until: { (delivery: WebhookRepository.Delivery?) in
                    delivery?.status == .delivered || lookups.withLock { $0.count } > 0
                }
                #expect(delivered?.status == .delivered, "\(String(describing: delivered?.lastError))")
                #expect(sink.deliveries.count == 1)
                #expect(lookups.withLock { $0 } == ["Rebind.TEST"], "one lookup per delivery")
            }
        }
    }

    /// A receiver that answers after the timeout is recorded as a timeout, whichever deadline
    /// fires first (issue 39 F20: it was `unreachable`).
    @Test func aLateAnswerIsATimeout() {
        #expect(WebhookDeliveryWorker.isTimeout(DeadlineExceeded(timeout: .seconds(1))))
        #expect(WebhookDeliveryWorker.isTimeout(HTTPClientError.deadlineExceeded))
        #expect(WebhookDeliveryWorker.isTimeout(HTTPClientError.readTimeout))
        #expect(!WebhookDeliveryWorker.isTimeout(HTTPClientError.connectTimeout))
        #expect(!WebhookDeliveryWorker.isTimeout(CancellationError()))
    }

    /// One tenant's receiver that never answers holds back its own tenant only: another
    /// tenant's delivery goes out while the slow one's are still in flight (issue 39 E12: four
    /// lanes all took the slow tenant's older deliveries, and the other tenant waited 78 s).
    @Test func aSlowReceiverHoldsBackItsOwnTenantOnly() async throws {
        try await AppleTestSetup.run { setup in
            try await WebhookSink.with { slow in
                try await WebhookSink.with { quick in
                    let database = setup.app.database
                    let globex = try await setup.app.createTenant("globex")
                    let admin = WebhookAdmin(database: database, actor: "test")
                    for (tenant, sink) in [("acme", slow), ("globex", quick)] {
                        _ = try await admin.set(
                            tenant: tenant, url: sink.url, events: [], rotateSecret: false, secrets: setup.app.secrets, allowInsecure: true)
                    }
                    slow.answer(.hang)
                    // The slow tenant's deliveries are older: each a different account, so none
                    // waits for another of its account.
                    for n in 0..<6 {
                        try await database.client.query(
                            "INSERT INTO events_outbox (tenant_id, account_id, event_type, payload) VALUES (\(setup.tenant.id), \(UUID()), \("test.slow.\(n)"), '{}')"
                        )
                    }
                    try await database.client.query(
                        "INSERT INTO events_outbox (tenant_id, account_id, event_type, payload) VALUES (\(globex.id), \(UUID()), 'test.quick', '{}')"
                    )
                    let worker = WebhookDeliveryWorker(
                        database: database, secrets: setup.app.secrets, allowInsecure: true, timeout: .seconds(30), lanes: 4,
                        logger: database.logger)
                    // Both tenants' events visible to the dispatcher (every older transaction ended).
                    _ = try await eventuallyValue(timeout: .seconds(20)) {
                        try await database.webhooks.dispatch()
                        return try await database.webhooks.deliveries(tenantID: globex.id).count
                    } until: {
                        $0 == 1
                    }
                    let running = Task { try await worker.runDue(now: { Date().addingTimeInterval(7_200) }) }
                    await quick.waitForDeliveries(1)
                    let slowOnes = try await database.webhooks.deliveries(tenantID: setup.tenant.id)
                    #expect(slowOnes.allSatisfy { $0.lastError == nil && $0.status == .pending }, "the slow tenant's are still in flight")
                    running.cancel()
                    _ = try? await running.value
                }
            }
        }
    }

    @Test func setRefusesInsecureDestinationsAndUnknownEvents() async throws {
        try await AppleTestSetup.run { setup in
            let admin = WebhookAdmin(database: setup.app.database, actor: "test")
            func refusal(_ url: String, events: [String] = []) async -> String? {
                await WebhookFixtures.refusal(admin, setup.app.secrets, url, events: events)
            }
            #expect(await refusal("http://hooks.example.com/x") == "invalid_argument")
            #expect(await refusal("https://user:pw@hooks.example.com/x") == "invalid_argument")
            #expect(await refusal("hooks.example.com/x") == "invalid_argument")
            for inside in [
                "https://127.0.0.1/x", "https://localhost/x", "https://10.1.2.3/x", "https://192.168.0.10/x", "https://172.20.0.1/x",
                "https://169.254.169.254/latest", "https://[::1]/x", "https://[fd00::1]/x", "https://[::ffff:127.0.0.1]/x",
                "https://0.0.0.0/x",
            ] {
                #expect(await refusal(inside) == "webhook_address_not_public", "\(inside)")
            }
            #expect(await refusal("https://93.184.215.14/x", events: ["account.exploded"]) == "invalid_argument")
            #expect(try await setup.app.database.webhooks.find(tenantID: setup.tenant.id) == nil, "nothing was stored")

            // A public literal address is taken (nothing is sent until an event comes).
            let set = try await admin.set(
                tenant: "acme", url: "https://93.184.215.14/hooks", events: ["account.created,account.deleted"], rotateSecret: false,
                secrets: setup.app.secrets, allowInsecure: false)
            #expect(set.created && set.webhook.eventTypes == ["account.created", "account.deleted"])
        }
    }

    @Test func publicAddressesAreToldFromInsideOnes() {
        let inside: [[UInt8]] = [
            [10, 0, 0, 1], [127, 0, 0, 1], [0, 0, 0, 0], [100, 64, 0, 1], [169, 254, 169, 254], [172, 16, 0, 1], [172, 31, 255, 255],
            [192, 168, 1, 1], [192, 0, 2, 1], [198, 18, 0, 1], [224, 0, 0, 1], [255, 255, 255, 255],
            Array(repeating: 0, count: 15) + [1], [0xfd] + Array(repeating: 0, count: 14) + [1],
            [0xfe, 0x80] + Array(repeating: 0, count: 14),
            Array(repeating: 0, count: 10) + [0xff, 0xff, 10, 0, 0, 1], [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 12),
            Array(repeating: 0, count: 12) + [127, 0, 0, 1],
            // Issue 39 B5: the literals that were taken, after IANA's special-purpose registries.
            [0x00, 0x64, 0xff, 0x9b, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0x7f, 0, 0, 1],  // 64:ff9b:1::7f00:1, local-use NAT64
            [0x20, 0x02, 0x7f, 0x00, 0x00, 0x01] + Array(repeating: 0, count: 9) + [1],  // 2002:7f00:1::1, 6to4
            [0x20, 0x01, 0, 0] + Array(repeating: 0, count: 8) + [0x7f, 0, 0, 1],  // 2001::7f00:1, Teredo
            [0xfe, 0xc0] + Array(repeating: 0, count: 13) + [1],  // fec0::1, site-local
            Array(repeating: 0, count: 8) + [0xff, 0xff, 0, 0, 0x7f, 0, 0, 1],  // ::ffff:0:7f00:1, IPv4-translated
            [192, 88, 99, 1],  // 6to4 relay anycast
            [0x20, 0x01, 0x00, 0x02] + Array(repeating: 0, count: 12),  // 2001:2::, benchmarking
            [0x3f, 0xff] + Array(repeating: 0, count: 13) + [1],  // 3fff::1, documentation
            [0x01, 0x00] + Array(repeating: 0, count: 14),  // 100::, discard-only
            [0x5f, 0x00] + Array(repeating: 0, count: 14),  // 5f00::, SRv6
            [0x00, 0x64, 0xff, 0x9b] + Array(repeating: 0, count: 8) + [10, 0, 0, 1],  // 64:ff9b::10.0.0.1
            [240, 0, 0, 1], [198, 51, 100, 7], [203, 0, 113, 9], [192, 0, 0, 8],
        ]
        for address in inside { #expect(!WebhookDestination.isPublic(address), "\(address)") }
        let outside: [[UInt8]] = [
            [93, 184, 215, 14], [8, 8, 8, 8], [172, 32, 0, 1], [100, 128, 0, 1], [192, 169, 0, 1],
            [0x26, 0x06, 0x28, 0x00] + Array(repeating: 0, count: 11) + [1], Array(repeating: 0, count: 10) + [0xff, 0xff, 8, 8, 8, 8],
            [0x00, 0x64, 0xff, 0x9b] + Array(repeating: 0, count: 8) + [8, 8, 8, 8],  // 64:ff9b::8.8.8.8
            [0x2a, 0x00, 0x14, 0x50] + Array(repeating: 0, count: 11) + [1], [0x20, 0x01, 0x02, 0x00] + Array(repeating: 0, count: 12),
        ]
        for address in outside { #expect(WebhookDestination.isPublic(address), "\(address)") }
    }
}
