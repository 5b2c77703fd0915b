import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import Storage
import TestSupport
import Testing

/// After an import (issue 24): imported people sign in to their accounts, product backends find
/// them by external id, and a person imported with Facebook who later signs in with Apple joins
/// by verified email when the tenant auto-links, and is flagged as a possible duplicate when not.
@Suite struct ImportSignInTests {
    typealias L = LinkingRequests
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
                [
                    #"{"external_id":"kim","email":"kim@example.com","email_verified":true,"identities":[{"provider":"facebook","subject":"20002"}]}"#
                ])
            let imported =
                try #require(
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

    static func postImport(_ setup: S, _ body: Any) async throws -> TestResponse {
        try await setup.client.execute(
            uri: "/v1/accounts/import", method: .post,
            headers: [.authorization: "Bearer \(setup.keys["acme"] ?? "")", .contentType: "application/json"],
            body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
    }

    @Test func theImportRouteAnswersOneResultPerRecordAndWritesWholeRecordsOnly() async throws {
        try await L.run { setup in
            let native = try await L.signInWithApple(setup, subject: "001.taken")
            let records: [[String: Any]] = [
                ["external_id": "api-1", "email": "api1@example.com", "identities": [["provider": "google", "subject": "g-api-1"]]],
                [
                    "external_id": "api-2",
                    "identities": [["provider": "google", "subject": "g-api-2"], ["provider": "apple", "subject": "001.taken"]],
                ],
                ["external_id": "api-3", "email": "no-at-sign", "identities": [["provider": "google", "subject": "g-api-3"]]],
                ["external_id": "api-4", "identities": [["provider": "line", "subject": "U4"]]],
            ]
            let response = try await Self.postImport(setup, ["records": records])
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let results = try #require(try response.json()["results"] as? [[String: Any]])
            #expect(results.map { $0["status"] as? String } == ["created", "conflict", "error", "error"])
            #expect(results.map { $0["external_id"] as? String } == ["api-1", "api-2", "api-3", "api-4"])
            #expect(results[0]["reason"] is NSNull && results[0]["account_id"] as? String != nil)
            #expect((results[1]["reason"] as? String)?.contains(native.accountID) == true, "\(results[1])")
            #expect(try await setup.count("identities WHERE subject = 'g-api-2'") == 0, "a conflict writes nothing of its record")
            // The same record again changes nothing.
            let again = try await Self.postImport(setup, ["records": [records[0]]])
            let second = try #require(try again.json()["results"] as? [[String: Any]])
            #expect(
                second.first?["status"] as? String == "unchanged"
                    && second.first?["account_id"] as? String == results[0]["account_id"] as? String)
            let found = try await Self.find(setup, "?external_id=api-1")
            #expect((try found.json()["accounts"] as? [Any])?.count == 1)

            for bad: Any in [["records": []], ["records": Array(repeating: records[0], count: 1_001)], ["people": records], [1, 2]] {
                let refused = try await Self.postImport(setup, bad)
                #expect(
                    refused.status == .badRequest && refused.problemCode == "invalid_request",
                    "\(refused.status) \(String(buffer: refused.body).prefix(300))")
            }
        }
    }

    /// `josé` written composed (NFC) and decomposed (NFD) are two external ids to the database,
    /// which compares bytes; Swift's `String` equality takes them as one. The import keeps them
    /// two people, each found by its own id and each signing in to its own account (issue 39 A2:
    /// the second was "updated" into the first account). The same holds for two subjects of one
    /// record, which are not a repeated identity.
    @Test func externalIDsAndSubjectsInTwoNormalizationFormsAreTwo() async throws {
        try await L.run { setup in
            let composed = "jos\u{E9}", decomposed = "jose\u{301}"
            #expect(composed == decomposed, "Swift's equality is canonical equivalence")
            let response = try await Self.postImport(
                setup,
                [
                    "records": [
                        ["external_id": composed, "identities": [["provider": "google", "subject": "g-nfc"]]],
                        ["external_id": decomposed, "identities": [["provider": "google", "subject": "g-nfd"]]],
                        [
                            "external_id": "two-forms",
                            "identities": [
                                ["provider": "google", "subject": "s-\(composed)"], ["provider": "google", "subject": "s-\(decomposed)"],
                            ],
                        ],
                    ]
                ])
            let results = try #require(try response.json()["results"] as? [[String: Any]])
            #expect(results.map { $0["status"] as? String } == ["created", "created", "created"], "\(results)")
            let ids = results.compactMap { $0["account_id"] as? String }
            #expect(Set(ids).count == 3)
            for (externalID, expected) in [(composed, ids.first), (decomposed, ids.dropFirst().first)] {
                let query = "?external_id=" + (externalID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
                let found = try #require(try await Self.find(setup, query).json()["accounts"] as? [[String: Any]])
                #expect(found.count == 1 && found.first?[path: "account.id"] as? String == expected, "\(Array(externalID.unicodeScalars))")
            }
            let second = try await L.signIn(setup, "google", L.google(setup, subject: "g-nfd"))
            #expect(second.accountID == ids.dropFirst().first)
            #expect(try await setup.count("identities WHERE subject LIKE 's-jos%'") == 2)
            // The same records again are unchanged, each in its own account.
            let again = try #require(
                try await Self.postImport(
                    setup,
                    [
                        "records": [
                            ["external_id": decomposed, "identities": [["provider": "google", "subject": "g-nfd"]]],
                            ["external_id": composed, "identities": [["provider": "google", "subject": "g-nfc"]]],
                        ]
                    ]
                ).json()["results"] as? [[String: Any]])
            #expect(again.map { $0["status"] as? String } == ["unchanged", "unchanged"])
            #expect(again.compactMap { $0["account_id"] as? String } == [ids[1], ids[0]])
        }
    }

    /// An imported address on either relay domain is private, on the account and the
    /// identity, whatever the file says (issue 39 A3).
    @Test(arguments: ProviderIdentity.builtInAppleRelayDomains)
    func importedRelayAddressesArePrivate(domain: String) async throws {
        try await L.run { setup in
            let response = try await Self.postImport(
                setup,
                [
                    "records": [
                        [
                            "external_id": "relay-1", "email": "r1@\(domain)", "email_verified": true,
                            "identities": [["provider": "apple", "subject": "001.relay-import", "email": "r1@\(domain.uppercased())"]],
                        ]
                    ]
                ])
            #expect(try response.json()["results"].map { "\($0)" }?.contains("created") == true, "\(String(buffer: response.body))")
            #expect(try await setup.count("accounts WHERE is_private_email") == 1)
            #expect(try await setup.count("identities WHERE is_private_email") == 1)
        }
    }
}
