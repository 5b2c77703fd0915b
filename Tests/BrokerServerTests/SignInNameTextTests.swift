import BrokerCore
import Foundation
import Storage
import Testing

/// A person's name sent by the app at sign-in (Apple's `user.name`) is not refused for control
/// characters, line breaks or bidirectional overrides, which would lock the person out for what
/// their device sent: they are dropped before the name is stored (issue 20 §8).
@Suite struct SignInNameTextTests {
    @Test func controlCharactersInAnAppSentNameAreDroppedNotRefused() async throws {
        try await AppleTestSetup.run { setup in
            let body = try await setup.signIn([
                "client_id": "com.acme.app", "identity_token": try setup.token(subject: "named"),
                "user": ["name": ["firstName": "Ada\u{1B}[2J\u{202E}", "lastName": "Love\nlace\u{7}"]],
            ])
            #expect(body[path: "account.name.given_name"] as? String == "Ada[2J")
            #expect(body[path: "account.name.family_name"] as? String == "Love lace")
            let id = try #require((body[path: "account.id"] as? String).flatMap(UUID.init(uuidString:)))
            let (stored, identities) = try #require(try await setup.app.database.accounts.find(tenantID: setup.tenant.id, accountID: id))
            #expect(stored.name == PersonName(givenName: "Ada[2J", familyName: "Love lace"))
            #expect(identities.first?.name == PersonName(givenName: "Ada[2J", familyName: "Love lace"))
        }
    }
}
