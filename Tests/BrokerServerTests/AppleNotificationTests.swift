import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import NIOCore
import PostgresNIO
import Storage
import Testing

/// `POST /apple/notifications` (issue 23 §1) with notifications signed by MockIdP's Apple key:
/// each event type, duplicates, forged and misaddressed payloads, unknown types and subjects,
/// and the re-link of a later Sign in with Apple after a consent revocation.
@Suite struct AppleNotificationTests {
    @Test func emailDisabledAndEnabledFlipTheRelayFlagOncePerDelivery() async throws {
        try await AppleTestSetup.run { setup in
            let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "relay")])
            let id = try #require(body[path: "account.id"] as? String)
            let jti = UUID().uuidString
            #expect(try await AppleNotifications.notify(setup, "email-disabled", subject: "relay", jti: jti).status == .ok)
            let identities = { (account: [String: Any]) in account["identities"] as? [[String: Any]] ?? [] }
            #expect(identities(try await AppleNotifications.account(setup, id)).first?["relay_email_deliverable"] as? Bool == false)
            // Apple delivers again: nothing changes, no second event.
            #expect(try await AppleNotifications.notify(setup, "email-disabled", subject: "relay", jti: jti).status == .ok)
            #expect(try await AppleNotifications.events(setup) == ["apple.email_disabled"])
            #expect(try await AppleNotifications.notify(setup, "email-enabled", subject: "relay").status == .ok)
            #expect(identities(try await AppleNotifications.account(setup, id)).first?["relay_email_deliverable"] as? Bool == true)
            #expect(try await AppleNotifications.events(setup) == ["apple.email_disabled", "apple.email_enabled"])
            let actions = try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).map(\.action)
            #expect(actions.filter { $0.hasPrefix("apple.email") } == ["apple.email_disabled", "apple.email_enabled"])
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM notification_receipts") == 2)
            #expect(
                try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM notification_receipts WHERE outcome = 'applied'") == 2
            )
            // The event names the account and the identity, as every Apple event does.
            let data = try await AppleNotifications.count(
                setup,
                "SELECT count(*)::int8 FROM events_outbox WHERE payload->>'account_id' = '\(id)' AND payload ? 'identity_id' AND payload ? 'event_time'"
            )
            #expect(data == 2)
        }
    }

    @Test func consentRevokedUnlinksDisablesAndANewSignInWithAppleRelinksAndEnables() async throws {
        try await AppleTestSetup.run { setup in
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "revoker")
            let body = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "revoker"), "authorization_code": code,
            ])
            let id = try #require(body[path: "account.id"] as? String)
            let refresh = try #require(body[path: "session.refresh_token"] as? String)
            #expect(try await setup.liveSessionCount() == 1)

            #expect(try await AppleNotifications.notify(setup, "consent-revoked", subject: "revoker").status == .ok)
            #expect(try await setup.liveSessionCount() == 0)
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM identities") == 0, "unlinked, with Apple's token")
            #expect(
                try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM sessions WHERE identity_id IS NOT NULL") == 0,
                "its sessions no longer name it (through the account's reference, migration 0020)")
            let disabled = try await AppleNotifications.account(setup, id)
            #expect(disabled[path: "account.status"] as? String == "disabled")
            #expect(try await setup.post("/v1/sessions/refresh", json: ["refresh_token": refresh]).status == .badRequest)
            #expect(try await AppleNotifications.events(setup) == ["apple.consent_revoked", "identity.unlinked"])

            // A later Sign in with Apple is a new consent: the same account, enabled again (also
            // with intent sign_in: the person has an account).
            let back = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "revoker"), "intent": "sign_in",
            ])
            #expect(back[path: "account.id"] as? String == id)
            #expect(back["is_new_account"] as? Bool != true)
            #expect(try await AppleNotifications.account(setup, id)[path: "account.status"] as? String == "active")
            let actions = try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).map(\.action)
            #expect(actions.contains("apple.consent_revoked"))
            #expect(actions.contains("identity.relinked"))
            #expect(try await AppleNotifications.events(setup) == ["apple.consent_revoked", "identity.unlinked", "identity.linked"])
            #expect(
                try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM consent_revocations") == 0, "forgotten once relinked")
            #expect(!actions.contains("identity.linked"), "not a link by email")
        }
    }

    @Test func anOperatorDisablingOutranksAConsentRevocation() async throws {
        try await AppleTestSetup.run { setup in
            let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "banned")])
            let id = try #require(body[path: "account.id"] as? String)
            #expect(try await AppleNotifications.notify(setup, "consent-revoked", subject: "banned").status == .ok)
            _ = try await AccountService(database: setup.app.database).disable(tenantID: setup.tenant.id, accountID: id, actor: "test")
            let refused = try await setup.post(
                "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "banned")])
            #expect(refused.status == .forbidden)
            #expect(refused.problemCode == "account_disabled")
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM identities") == 0, "nothing written onto it")
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM accounts") == 1, "and no new account beside it")
        }
    }

    @Test func accountDeleteDeletesTheIdentityAndTheAccountItLeavesEmpty() async throws {
        try await AppleTestSetup.run { setup in
            let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "gone")])
            let id = try #require(body[path: "account.id"] as? String)
            #expect(try await AppleNotifications.notify(setup, "account-delete", subject: "gone").status == .ok)
            let tombstone = try await AppleNotifications.account(setup, id)
            #expect(tombstone[path: "account.status"] as? String == "deleted")
            #expect(tombstone[path: "account.email"] == nil)
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM identities") == 0)
            #expect(try await setup.liveSessionCount() == 0)
            #expect(try await AppleNotifications.events(setup) == ["account.deleted", "apple.account_deleted", "identity.unlinked"])
            #expect(
                try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM apple_revocations") == 0,
                "Apple deleted it: nothing to revoke")
            // Signing in again is a new person.
            let again = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "gone")])
            #expect(again[path: "account.id"] as? String != id)
        }
    }

    @Test func unknownTypesAndSubjectsAreAnswered200AndRecorded() async throws {
        try await AppleTestSetup.run { setup in
            #expect(try await AppleNotifications.notify(setup, "something-new", subject: "anyone").status == .ok)
            #expect(try await AppleNotifications.notify(setup, "consent-revoked", subject: "nobody-we-know").status == .ok)
            #expect(try await AppleNotifications.notify(setup, "email-disabled", subject: "nobody-we-know").status == .ok)
            let actions = try await setup.app.database.auditLog.entries(tenantID: setup.tenant.id).map(\.action)
            #expect(actions.contains("apple.notification_ignored"))
            #expect(actions.filter { $0 == "apple.notification_unmatched" }.count == 2, "consent-revoked and email-disabled")
            #expect(try await AppleNotifications.events(setup).isEmpty)
            #expect(
                try await AppleNotifications.count(
                    setup, "SELECT count(*)::int8 FROM notification_receipts WHERE outcome = 'unknown_subject'") == 2)
        }
    }

    @Test(arguments: [TokenForgery.algNone, .hs256WithPublicKey, .unpublishedKey, .badSignature])
    func forgedPayloadsAre400AndChangeNothing(_ forgery: TokenForgery) async throws {
        try await AppleTestSetup.run { setup in
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "target")])
            let forged = try await AppleNotifications.notify(setup, "account-delete", subject: "target", forgery: forgery)
            #expect(forged.status == .badRequest)
            #expect(forged.problemCode == "invalid_notification")
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM identities") == 1)
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM notification_receipts") == 0)
        }
    }

    @Test func misaddressedExpiredAndMalformedBodiesAre400() async throws {
        try await AppleTestSetup.run { setup in
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "target")])
            // Not a primary App ID (a grouped client), and an App ID nobody registered.
            for audience in ["com.acme.app.widget", "com.other.app"] {
                let response = try await AppleNotifications.notify(setup, "account-delete", subject: "target", audience: audience)
                #expect(response.status == .badRequest, "\(audience)")
                #expect(response.problemCode == "invalid_notification")
            }
            let expired = try setup.apple.mint(
                try setup.apple.notificationClaims(
                    audience: AppleNotifications.primaryAppID, type: "account-delete", subject: "target",
                    issuedAt: Date().addingTimeInterval(-7_200)))
            let late = try await AppleNotifications.post(setup, try JSONSerialization.data(withJSONObject: ["payload": expired]))
            #expect(late.status == .badRequest)
            for body in ["{}", "{\"payload\": 1}", "{\"payload\": \"a.b.c\"}", "[]", "not json", "{\"payload\":\"x\",\"payload\":\"y\"}"] {
                let response = try await AppleNotifications.post(setup, Data(body.utf8))
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.headers[.contentType]?.hasPrefix("application/problem+json") == true)
            }
            let plain = try await AppleNotifications.post(setup, Data("{}".utf8), contentType: "text/plain")
            #expect(plain.status == .badRequest)
            #expect(plain.problemCode == "invalid_request")
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM identities") == 1)
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM notification_receipts") == 0)
        }
    }

    @Test func theDatabaseDownIs503AndADeliveryAfterwardsApplies() async throws {
        try await AppleTestSetup.run { setup in
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "later")])
            let body = try setup.apple.notificationBody(audience: AppleNotifications.primaryAppID, type: "email-disabled", subject: "later")
            // A warm route cache does not hide the outage: the receipt is written in the database.
            try await setup.app.database.client.query("ALTER TABLE notification_receipts RENAME TO notification_receipts_away")
            let refused = try await AppleNotifications.post(setup, body)
            #expect(refused.status.code >= 500)
            try await setup.app.database.client.query("ALTER TABLE notification_receipts_away RENAME TO notification_receipts")
            #expect(
                try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM identities WHERE NOT relay_email_deliverable") == 0)
            #expect(try await AppleNotifications.post(setup, body).status == .ok, "Apple's next delivery applies it")
            #expect(
                try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM identities WHERE NOT relay_email_deliverable") == 1)
        }
    }

    /// An `event_time` no instant can be (nanoseconds instead of milliseconds, 1e300, a
    /// negative 1e300) is answered 200 and applied with no time, on every batched type, and the
    /// process goes on (issue 39 C9: `Int(Double)` trapped and stopped `serve`). A fraction of a
    /// millisecond is a time.
    @Test(arguments: ["email-disabled", "consent-revoked", "account-delete"])
    func anEventTimeNoInstantCanBeIsAppliedWithoutATime(type: String) async throws {
        try await AppleTestSetup.run { setup in
            let times = ["1800000000000000000", "1e300", "-1e300", "253402300800000", "1764633600000.5"]
            for (n, time) in times.enumerated() {
                _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "odd-\(n)")])
                let response = try await AppleNotifications.notify(
                    setup, type, subject: "odd-\(n)", eventTimeText: time, jti: "odd-time-\(n)")
                #expect(response.status == .ok, "\(time): \(String(buffer: response.body))")
            }
            #expect(
                try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM notification_receipts WHERE outcome = 'applied'")
                    == times.count)
            let timed = try await setup.app.database.client.query(
                "SELECT jti, coalesce(event_time::text, 'none') FROM notification_receipts ORDER BY jti"
            ).collect()
            let stored: [(String, String)] = try timed.map { try $0.decode((String, String).self) }
            let untimed: [String] = stored.filter { $0.1 == "none" }.map(\.0)
            let expected: [String] = (0..<4).map { "odd-time-\($0)" }
            #expect(untimed == expected, "\(stored)")
            // Still serving.
            _ = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "after")])
        }
    }

    /// Two `jti`s longer than 128 bytes that share their first 128 are two deliveries, not one
    /// (issue 39 F20: the id was cut to a prefix).
    @Test func longJTIsSharingAPrefixAreTwoDeliveries() async throws {
        try await AppleTestSetup.run { setup in
            let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: "long")])
            let id = try #require(body[path: "account.id"] as? String)
            let prefix = String(repeating: "j", count: 128)
            #expect(try await AppleNotifications.notify(setup, "email-disabled", subject: "long", jti: prefix + "-one").status == .ok)
            #expect(try await AppleNotifications.notify(setup, "email-enabled", subject: "long", jti: prefix + "-two").status == .ok)
            #expect(try await AppleNotifications.events(setup) == ["apple.email_disabled", "apple.email_enabled"])
            let identities = try await AppleNotifications.account(setup, id)["identities"] as? [[String: Any]] ?? []
            #expect(identities.first?["relay_email_deliverable"] as? Bool == true)
            // The same long id again is the same delivery.
            #expect(try await AppleNotifications.notify(setup, "email-disabled", subject: "long", jti: prefix + "-one").status == .ok)
            #expect(try await AppleNotifications.events(setup) == ["apple.email_disabled", "apple.email_enabled"])
        }
    }

    /// `account-delete` on an account that keeps another identity takes away what came only
    /// from Apple: the relay email and the name Apple gave (issue 39 A4). What the identity it
    /// keeps also has stays.
    @Test(arguments: [false, true])
    func accountDeleteTakesAppleDataFromAnAccountThatStays(otherHasTheSame: Bool) async throws {
        try await AppleTestSetup.run { setup in
            let relay = "kept-\(otherHasTheSame)@privaterelay.appleid.com"
            let body = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "stays", email: relay, isPrivateEmail: true),
                "user": ["name": ["firstName": "Ada", "lastName": "Lovelace"]],
            ])
            let id = try #require(body[path: "account.id"] as? String)
            #expect(body[path: "account.email"] as? String == relay)
            // Another identity of the account (LINE's, as an operator's OpenID Connect provider).
            try await setup.app.database.client.query(
                """
                INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject, email, email_verified, given_name, family_name)
                VALUES (gen_random_uuid(), \(setup.tenant.id), \(UUID(uuidString: id)), 'line', '', 'U-stays',
                    \(otherHasTheSame ? relay.uppercased() : nil), false, \(otherHasTheSame ? "Ada" : nil), NULL)
                """)
            #expect(try await AppleNotifications.notify(setup, "account-delete", subject: "stays").status == .ok)
            let details = try await AppleNotifications.account(setup, id)
            let account = try #require(details["account"] as? [String: Any])
            #expect(account["status"] as? String == "active")
            #expect((details["identities"] as? [[String: Any]])?.map { $0["provider"] as? String } == ["line"])
            if otherHasTheSame {
                #expect(account["email"] as? String == relay, "LINE's identity has the same address")
                #expect(account[path: "name.given_name"] as? String == "Ada")
            } else {
                #expect(account["email"] == nil || account["email"] is NSNull, "\(account)")
                #expect(account["email_verified"] as? Bool == false && account["is_private_email"] as? Bool == false)
                #expect(account[path: "name.given_name"] == nil || account[path: "name.given_name"] is NSNull)
            }
            #expect(account[path: "name.family_name"] == nil || account[path: "name.family_name"] is NSNull, "\(account)")
            #expect(try await AppleNotifications.count(setup, "SELECT count(*)::int8 FROM accounts WHERE display_name IS NOT NULL") == 0)
        }
    }
}
