import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import Logging
import PostgresNIO
import ServiceLifecycle
import Storage
import TestSupport
import Testing

/// A graceful stop in the middle of a call (issue 39 D11: a `SIGTERM` while a revocation call
/// to Apple was in flight cancelled it, its outcome was never written and the row stayed leased
/// for 15 minutes; webhook deliveries and credential checks did the same). The background
/// workers, run as `broker serve` runs them: at the stop the call in flight finishes and is
/// recorded, nothing new is taken; when the stop's drain runs out first, the call is cancelled
/// and its lease given back, due at once, with no attempt counted.
@Suite(.timeLimit(.minutes(5))) struct GracefulStopTests {
    static func row<T: PostgresDecodable & Sendable, U: PostgresDecodable & Sendable>(
        _ setup: AppleTestSetup, _ query: PostgresQuery, as: (String, T, U).Type
    ) async throws -> (String, T, U)? {
        for try await row in try await setup.app.database.client.query(query).decode((String, T, U).self) { return row }
        return nil
    }

    /// The revocation's status, attempts, and whether it is due now.
    static func revocation(_ setup: AppleTestSetup) async throws -> (String, Int, Bool)? {
        try await row(
            setup, "SELECT status, attempts, next_attempt_at <= now() FROM apple_revocations WHERE tenant_id = \(setup.tenant.id)",
            as: (String, Int, Bool).self)
    }

    /// The only delivery's status, attempts, and whether it is due now.
    static func delivery(_ setup: AppleTestSetup) async throws -> (String, Int, Bool)? {
        try await row(
            setup, "SELECT status, attempts, next_attempt_at <= now() FROM webhook_deliveries WHERE tenant_id = \(setup.tenant.id)",
            as: (String, Int, Bool).self)
    }

    /// A person who signed in with a code is deleted; the revocation of Apple's token is held
    /// at Apple, in flight.
    static func revocationInFlight(_ setup: AppleTestSetup, subject: String) async throws -> (
        account: String, refresh: String, apple: String
    ) {
        let person = try await AccountDeletion.signInWithCode(setup, subject: subject)
        setup.apple.hold(.revoke)
        #expect(try await AccountDeletion.delete(setup, person.account).status == .ok)
        await setup.apple.waitForArrivals(.revoke, count: 1)
        return person
    }

    @Test func aRevocationInFlightAtTheStopIsFinishedAndRecorded() async throws {
        try await AppleTestSetup.run { setup in
            let person = try await Self.revocationInFlight(setup, subject: "stop.finish")
            setup.app.workers.stop.request()
            setup.apple.release(.revoke)
            await setup.app.workers.finished()
            let row = try #require(try await Self.revocation(setup))
            #expect(row.0 == "done" && row.1 == 1, "\(row)")
            #expect(setup.apple.arrivals(.revoke) == 1)
            #expect(setup.apple.revocations.map(\.token) == [person.apple])
        }
    }

    @Test func aRevocationStillInFlightWhenTheDrainRunsOutGivesItsLeaseBack() async throws {
        try await AppleTestSetup.run { setup in
            _ = try await Self.revocationInFlight(setup, subject: "stop.cancel")
            setup.app.workers.stop.request()
            setup.app.workers.cancel()
            await setup.app.workers.finished()
            let row = try #require(try await Self.revocation(setup))
            #expect(row.0 == "pending" && row.1 == 0 && row.2, "given back, due now, no attempt counted: \(row)")
            setup.apple.release(.revoke)
            // The next worker (a restarted instance) revokes it at once, not 15 minutes later.
            #expect(try await setup.app.services.appleRevocationWorker.runDue() == 1)
            #expect(try await Self.revocation(setup)?.0 == "done")
        }
    }

    /// The service `broker serve` runs beside the HTTP server: its graceful shutdown (the
    /// signal, as ServiceLifecycle delivers it) stops the workers, waits for the call in flight
    /// within the drain, and cancels what is left when the drain runs out.
    @Test func serveGracefulShutdownWaitsForTheCallInFlightWithinTheDrain() async throws {
        for drain in [Duration.seconds(60), .zero] {
            try await AppleTestSetup.run { setup in
                // The test app's own workers stand down: the service's take the revocation.
                setup.app.workers.stop.request()
                await setup.app.workers.finished()
                let person = try await AccountDeletion.signInWithCode(setup, subject: "stop.serve")
                setup.apple.hold(.revoke)
                #expect(try await AccountDeletion.delete(setup, person.account).status == .ok)
                let group = ServiceGroup(
                    services: [BackgroundTasks(services: setup.app.services, drain: drain)], gracefulShutdownSignals: [],
                    logger: Logger(label: "test"))
                let running = Task { try await group.run() }
                await setup.apple.waitForArrivals(.revoke, count: 1)
                await group.triggerGracefulShutdown()
                if drain == .zero {
                    try await running.value
                    let row = try #require(try await Self.revocation(setup))
                    #expect(row.0 == "pending" && row.1 == 0 && row.2, "given back at once: \(row)")
                    setup.apple.release(.revoke)
                } else {
                    setup.apple.release(.revoke)
                    try await running.value
                    let row = try #require(try await Self.revocation(setup))
                    #expect(row.0 == "done" && row.1 == 1, "\(row)")
                }
            }
        }
    }

    @Test func aWebhookDeliveryInFlightAtTheStopIsRecordedOrGivenBack() async throws {
        for drainRunsOut in [false, true] {
            try await AppleTestSetup.run { setup in
                try await WebhookSink.with { sink in
                    _ = try await WebhookFixtures.setWebhook(setup, sink)
                    sink.answer(.held(then: 204))
                    _ = try await WebhookFixtures.signIn(setup, "stop.hook")
                    await sink.waitForDeliveries(1)
                    setup.app.workers.stop.request()
                    if drainRunsOut {
                        setup.app.workers.cancel()
                        await setup.app.workers.finished()
                        let row = try #require(try await Self.delivery(setup))
                        #expect(row.0 == "pending" && row.1 == 0 && row.2, "given back, due now, no attempt counted: \(row)")
                        sink.releaseHeld()
                        sink.answer(.status(204))
                        #expect(try await WebhookFixtures.worker(setup).runDue() >= 1)
                        #expect(try await Self.delivery(setup)?.0 == "delivered")
                        #expect(Set(sink.deliveries.map(\.id)).count == 1, "sent again with the same webhook-id")
                    } else {
                        sink.releaseHeld()
                        await setup.app.workers.finished()
                        let row = try #require(try await Self.delivery(setup))
                        #expect(row.0 == "delivered" && row.1 == 1, "\(row)")
                        #expect(sink.deliveries.count == 1)
                    }
                }
            }
        }
    }

    @Test func aCredentialCheckInFlightAtTheStopIsRecordedOrGivenBack() async throws {
        try await AppleTestSetup.run { setup in
            for subject in ["stop.check.1", "stop.check.2"] { _ = try await AccountDeletion.signInWithCode(setup, subject: subject) }
            let checker = CredentialChecks.checker(setup)
            _ = try await setup.app.database.appleCredentials.schedule(tenantID: setup.tenant.id, interval: 86_400)
            _ = try await setup.app.database.appleCredentials.makeDue(tenantID: setup.tenant.id, at: Date())
            let due = "SELECT count(*)::int8 FROM identities WHERE credential_check_due_at <= now()"

            // Finished and recorded; the second token is not taken after the stop.
            setup.apple.hold(.refreshGrant)
            let stop = GracefulStop()
            let tenant = setup.tenant.id
            let run = Task { try await TenantScope.tenant(tenant) { try await checker.checkDue(tenantID: tenant, stop: stop) } }
            await setup.apple.waitForArrivals(.refreshGrant, count: 1)
            stop.request()
            setup.apple.release(.refreshGrant)
            #expect(try await run.value == .init(checked: 1, valid: 1, revoked: 0, failed: 0))
            #expect(try await CredentialChecks.count(setup, due) == 1)

            // Cancelled mid-call: due again at once.
            setup.apple.hold(.refreshGrant)
            let cancelled = Task {
                try await TenantScope.tenant(tenant) { try await checker.checkDue(tenantID: tenant, stop: GracefulStop()) }
            }
            await setup.apple.waitForArrivals(.refreshGrant, count: 2)
            cancelled.cancel()
            _ = try? await cancelled.value
            setup.apple.release(.refreshGrant)
            #expect(try await CredentialChecks.count(setup, due) == 1, "given back")
        }
    }
}
