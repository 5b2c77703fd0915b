import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import Storage
import TestSupport
import Testing

/// After an import (issue 24): imported people sign in to their accounts, product backends find
/// them by external id, and a person imported with Facebook who later signs in with Apple joins
/// by verified email when the tenant auto-links, and is flagged as a possible duplicate when not.
@Suite struct ImportSignInTests {
    typealias L = IdentityLinkingTests
    typealias S = ProviderTestSetup

    static func importLines(_ setup: S, _ lines: [String]) async throws -> ImportRepository.Job {
        let file = NSTemporaryDirectory() + "import-\(UUID().uuidString.prefix(8)).jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer {
            try? FileManager.default.removeItem(atPath: file)
            try? FileManager.default.removeItem(atPath: file + ".errors.jsonl")
        }
        let service = ImportService(database: setup.app.database, secrets: setup.app.secrets, logger: Logger(label: "import-test"))
        return try await service.run(tenant: setup.tenant, options: .init(source: .jsonl, path: file)).job
    }

    static func find(_ setup: S, _ query: String) async throws -> TestResponse {
        try await setup.client.execute(uri: "/v1/accounts\(query)", method: .get, headers: bearer(setup.keys["acme"] ?? ""))
    }

    @Test func importedPeopleSignInToTheirAccountsAndAreFoundByExternalID() async throws {
        try await L.run { setup in
            let job = try await Self.importLines(
                setup,
                [
                    #"{"external_id":"fb-1","email":"ada@example.com","email_verified":true,"identities":[{"provider":"facebook","subject":"20001"}]}"#,
                    #"{"external_id":"ap-1","identities":[{"provider":"apple","subject":"001.imported"}]}"#,
                ])
            #expect(job.counts.created == 2)
            let facebook = try await L.signIn(setup, "facebook", L.facebook(setup, user: "20001"))
            #expect(facebook.body["is_new_account"] as? Bool == false)
            #expect(facebook.body[path: "account.external_id"] as? String == "fb-1")
            let apple = try await L.signInWithApple(setup, subject: "001.imported")
            #expect(apple.body["is_new_account"] as? Bool == false)
            #expect(apple.body[path: "account.external_id"] as? String == "ap-1")

            let found = try await Self.find(setup, "?external_id=fb-1")
            #expect(found.status == .ok)
            let accounts = try #require(try found.json()["accounts"] as? [[String: Any]])
            #expect(accounts.count == 1)
            #expect(accounts.first?[path: "account.id"] as? String == facebook.accountID)
            #expect((accounts.first?["identities"] as? [[String: Any]])?.first?["provider"] as? String == "facebook")
            let none = try await Self.find(setup, "?external_id=nobody")
            #expect(try none.status == .ok && (none.json()["accounts"] as? [Any])?.isEmpty == true)
            let missing = try await Self.find(setup, "")
            #expect(missing.status == .badRequest && missing.problemCode == "invalid_request")
            // Accounts that were not imported say so: the member is there, null.
            let native = try await L.signInWithApple(setup, subject: "001.native")
            let details = try await setup.client.execute(
                uri: "/v1/accounts/\(native.accountID)", method: .get, headers: bearer(setup.keys["acme"] ?? ""))
            let account = try #require(try details.json()["account"] as? [String: Any])
            #expect(account.keys.contains("external_id") && account["external_id"] is NSNull)
        }
    }

    @Test(arguments: [true, false])
    func facebookThenAppleJoinsByVerifiedEmailOnlyWithAutoLink(_ autoLink: Bool) async throws {
        try await L.run { setup in
            if autoLink { _ = try await TenantAdmin(database: setup.app.database, actor: "test").setAutoLinkVerifiedEmail("acme", true) }
            _ = try await Self.importLines(
                setup,
                [#"{"external_id":"kim","email":"kim@example.com","email_verified":true,"identities":[{"provider":"facebook","subject":"20002"}]}"#])
            let imported = try #require(
                try await Self.find(setup, "?external_id=kim").json()["accounts"] as? [[String: Any]]
            ).first?[path: "account.id"] as? String
            let apple = try await L.signInWithApple(setup, subject: "001.kim", email: "kim@example.com")
            if autoLink {
                #expect(apple.accountID == imported)
                #expect(apple.body["linked_by"] as? String == "verified_email")
                #expect(apple.body[path: "account.external_id"] as? String == "kim")
            } else {
                #expect(apple.accountID != imported)
                #expect(apple.body["possible_duplicate"] as? Bool == true)
            }
        }
    }
}
