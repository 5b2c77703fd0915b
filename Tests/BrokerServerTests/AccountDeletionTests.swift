import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import PostgresNIO
import Providers
import Storage
import Testing

/// `DELETE /v1/accounts/{id}` and the Apple revocation queue (issue 23 §2) against MockIdP's
/// `/auth/revoke`: what a deletion removes and keeps, Apple down then up, two workers sharing
/// the queue, and the retry policy.
@Suite struct AccountDeletionTests {
    @Test func aDeletionEndsSessionsDropsPersonalDataAndRevokesApplesTokenOnce() async throws {
        try await AppleTestSetup.run { setup in
            let person = try await AccountDeletion.signInWithCode(setup, subject: "leaver")
            // A second session through another client of the group, without a code.
            _ = try await setup.signIn([
                "client_id": "com.acme.app.widget", "identity_token": try setup.token(subject: "leaver", clientID: "com.acme.app.widget"),
            ])
            #expect(try await setup.liveSessionCount() == 2)

            let deleted = try await AccountDeletion.delete(setup, person.account)
            #expect(deleted.status == .ok)
            let body = try deleted.json()
            #expect(body["deleted"] as? Bool == true)
            #expect(body["apple_revocations_queued"] as? Int == 1)
            #expect(try await setup.liveSessionCount() == 0)

            // The worker of this instance is woken by the deletion and calls Apple once, with
            // the client that obtained the token and its client secret.
            #expect(try await eventually { setup.apple.revocations.count == 1 })
            let revocation = try #require(setup.apple.revocations.first)
            #expect(revocation == .init(token: person.apple, clientID: "com.acme.app", tokenTypeHint: "refresh_token"))
            #expect(
                try await eventually {
                    try await setup.app.database.appleRevocations.list(tenantID: setup.tenant.id).first?.status == .done
                })
            let queued = try await setup.app.database.appleRevocations.list(tenantID: setup.tenant.id)
            #expect(queued.count == 1)
            #expect(queued.first?.attempts == 1)
            #expect(queued.first?.accountID.lowercasedString == person.account)
            #expect(
                try await AccountDeletion.scalar(
                    setup, "SELECT count(*)::int8 FROM apple_revocations WHERE token_sealed IS NOT NULL", as: Int.self)
                    == 0,
                "the token is dropped once Apple took it")

            // The tombstone: status, when and why; nothing personal, no identity.
            let shown = try await setup.client.execute(uri: "/v1/accounts/\(person.account)", method: .get, headers: bearer(setup.apiKey))
            let account = try shown.json()
            #expect(account[path: "account.status"] as? String == "deleted")
            #expect(account[path: "account.email"] == nil, "no email (the member is left out when unknown)")
            #expect(account[path: "account.name"] is NSNull)
            #expect((account["identities"] as? [Any])?.isEmpty == true)
            #expect(try await AccountDeletion.scalar(setup, "SELECT count(*)::int8 FROM identities", as: Int.self) == 0)
            let reason = try await AccountDeletion.scalar(
                setup, "SELECT deleted_reason FROM accounts WHERE deleted_at IS NOT NULL AND given_name IS NULL", as: String.self)
            #expect(reason == "requested")

            // Its refresh token is dead; a second deletion is a 404 and calls Apple no more.
            let refresh = try await setup.post("/v1/sessions/refresh", json: ["refresh_token": person.refresh])
            #expect(refresh.status == .badRequest)
            let again = try await AccountDeletion.delete(setup, person.account)
            #expect(again.status == .notFound)
            #expect(again.problemCode == "account_not_found")
            #expect(setup.apple.revokeCalls == 1)

            // Audited, and an event for product backends, written with the change.
            let actions = try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).map(\.action)
            #expect(actions.contains("account.deleted"))
            #expect(actions.contains("apple.revocation_done"))
            #expect(
                try await AccountDeletion.scalar(
                    setup, "SELECT account_id FROM events_outbox WHERE event_type = 'account.deleted'", as: UUID.self)?.lowercasedString
                    == person.account)

            // The same person signing in again is a new account.
            let back = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "leaver")])
            #expect(back[path: "account.id"] as? String != person.account)
        }
    }

    @Test func anAccountWithoutApplesTokenQueuesNothingAndAnotherTenantCannotDeleteIt() async throws {
        try await AppleTestSetup.run { setup in
            let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "plain")])
            let account = try #require(body[path: "account.id"] as? String)
            _ = try await setup.app.createTenant("globex")
            let globexKey = try await setup.app.createKey("globex")
            let stranger = try await AccountDeletion.delete(setup, account, key: globexKey)
            #expect(stranger.status == .notFound, "another tenant's key finds no such account")
            #expect(try await AccountDeletion.scalar(setup, "SELECT count(*)::int8 FROM identities", as: Int.self) == 1, "nothing changed")
            let malformed = try await AccountDeletion.delete(setup, "not-a-uuid")
            #expect(malformed.status == .notFound)

            let deleted = try await AccountDeletion.delete(setup, account)
            #expect(try deleted.json()["apple_revocations_queued"] as? Int == 0)
            #expect(try await setup.app.database.appleRevocations.list(tenantID: setup.tenant.id).isEmpty)
            #expect(setup.apple.revokeCalls == 0)
        }
    }

    @Test func appleDownThenUpIsRetriedAndRevokedOnce() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.revokeFault = 503
            let person = try await AccountDeletion.signInWithCode(setup, subject: "patient")
            let deleted = try await AccountDeletion.delete(setup, person.account)
            #expect(deleted.status == .ok, "the deletion does not wait for Apple")
            #expect(try deleted.json()["apple_revocations_queued"] as? Int == 1)

            // The worker's first call fails: the row stays pending, due again after the backoff.
            #expect(
                try await eventually {
                    (try await setup.app.database.appleRevocations.list(tenantID: setup.tenant.id).first?.attempts ?? 0) >= 1
                })
            let waiting = try #require(try await setup.app.database.appleRevocations.list(tenantID: setup.tenant.id).first)
            #expect(waiting.status == .pending)
            #expect(waiting.lastError == "apple_unavailable")
            #expect(waiting.nextAttemptAt > Date().addingTimeInterval(20))
            #expect(setup.apple.revocations.isEmpty)

            // Apple is back; an hour later (the worker's clock) the retry is made, once.
            setup.apple.revokeFault = nil
            let worker = setup.app.services.appleRevocationWorker
            #expect(try await worker.runDue(now: { Date().addingTimeInterval(3_600) }) == 1)
            #expect(setup.apple.revocations.map(\.token) == [person.apple])
            #expect(try await worker.runDue(now: { Date().addingTimeInterval(7_200) }) == 0, "nothing left to do")
            let done = try #require(try await setup.app.database.appleRevocations.list(tenantID: setup.tenant.id).first)
            #expect(done.status == .done)
            #expect(done.lastError == nil)
        }
    }

    @Test func aRevocationAppleKeepsRefusingIsFailedAfterItsAttemptsAndCanBeRetried() async throws {
        try await AppleTestSetup.run { setup in
            setup.apple.revokeFault = 400
            let person = try await AccountDeletion.signInWithCode(setup, subject: "stubborn")
            _ = try await AccountDeletion.delete(setup, person.account)
            var policy = AppleRevocationWorker.RetryPolicy()
            policy.maxAttempts = 2
            let services = setup.app.services
            let worker = AppleRevocationWorker(
                database: services.database, store: services.providerSettings, secrets: services.secrets,
                tokenClient: AppleTokenClient(baseURL: services.endpoints.appleBaseURL, timeout: .seconds(5)),
                clientSecrets: services.appleClientSecrets, policy: policy, logger: services.database.logger)
            // However many attempts the background worker made, two more give it up.
            var later = 3_600.0
            while try await setup.app.database.appleRevocations.list(tenantID: setup.tenant.id, status: .failed).isEmpty {
                let at = later
                try await worker.runDue(now: { Date().addingTimeInterval(at) })
                later += 3_600
                #expect(later < 20_000, "given up after two attempts")
                if later >= 20_000 { break }
            }
            let failed = try #require(try await setup.app.database.appleRevocations.list(tenantID: setup.tenant.id).first)
            #expect(failed.status == .failed)
            #expect(try await worker.runDue(now: { Date().addingTimeInterval(100_000) }) == 0, "a failed revocation is not tried")
            #expect(
                try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).map(\.action).contains("apple.revocation_failed"))

            // The operator retries it once Apple takes it again.
            setup.apple.revokeFault = nil
            let requeued = try await setup.app.database.appleRevocations.retry(tenantID: setup.tenant.id, id: nil, actor: "test")
            #expect(requeued == [failed.id])
            #expect(try await worker.runDue() == 1)
            #expect(setup.apple.revocations.map(\.token) == [person.apple])
            #expect(
                try await setup.app.database.appleRevocations.retry(tenantID: setup.tenant.id, id: failed.id, actor: "test").isEmpty,
                "done stays done")
        }
    }

    @Test func twoWorkersSharingTheQueueRevokeEachTokenExactlyOnce() async throws {
        try await AppleTestSetup.run { setup in
            // Apple down while the accounts are deleted: every revocation waits in the queue.
            setup.apple.revokeFault = 503
            var tokens: Set<String> = []
            for index in 0..<12 {
                let person = try await AccountDeletion.signInWithCode(setup, subject: "many.\(index)")
                tokens.insert(person.apple)
                #expect(try await AccountDeletion.delete(setup, person.account).status == .ok)
            }
            setup.apple.revokeFault = nil
            // Two workers (as two instances would run them) on the one queue, at once.
            let (first, second) = (setup.app.services.appleRevocationWorker, setup.app.services.appleRevocationWorker)
            async let one = first.runDue(now: { Date().addingTimeInterval(86_400) })
            async let two = second.runDue(now: { Date().addingTimeInterval(86_400) })
            let tried = try await one + two
            #expect(tried >= 1)
            #expect(Set(setup.apple.revocations.map(\.token)) == tokens)
            #expect(setup.apple.revocations.count == 12, "each token once")
            #expect(try await setup.app.database.appleRevocations.list(tenantID: setup.tenant.id, status: .done).count == 12)
        }
    }

    @Test func theRetryPolicyDoublesFromThirtySecondsToAnHourAndGivesUp() {
        let policy = AppleRevocationWorker.RetryPolicy()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(policy.nextAttempt(after: 1, now: now) == now.addingTimeInterval(30))
        #expect(policy.nextAttempt(after: 2, now: now) == now.addingTimeInterval(60))
        #expect(policy.nextAttempt(after: 7, now: now) == now.addingTimeInterval(1_920))
        #expect(policy.nextAttempt(after: 8, now: now) == now.addingTimeInterval(3_600))
        #expect(policy.nextAttempt(after: 29, now: now) == now.addingTimeInterval(3_600))
        #expect(policy.nextAttempt(after: 30, now: now) == nil)
        // 30 s … 32 min, then hourly: the last attempt falls about a day after the first.
        let total = (1..<30).compactMap { policy.nextAttempt(after: $0, now: now)?.timeIntervalSince(now) }.reduce(0, +)
        #expect(total > 20 * 3_600 && total < 26 * 3_600)
    }
}
