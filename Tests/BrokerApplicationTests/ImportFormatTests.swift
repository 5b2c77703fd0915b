import BrokerApplication
import BrokerCore
import Foundation
import Testing

/// The four import formats (issue 24, docs/import.md): each example file of Tests/Fixtures/import
/// read into records, skips and errors, and the rules every format shares. No database.
@Suite struct ImportFormatTests {
    /// `<package root>/Tests/Fixtures/import`.
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/import", isDirectory: true)

    /// 2025-01-01T00:00:00Z: the clock of the Supabase bans.
    static let now = Date(timeIntervalSince1970: 1_735_689_600)

    /// A fixture's user objects: a Firebase document's `users`, else one per non-empty line.
    static func users(in name: String) throws -> [JSONValue] {
        let data = try Data(contentsOf: fixtures.appendingPathComponent(name))
        if name.hasSuffix(".json") {
            return try #require(try JSONValue.parse(data)["users"]?.array)
        }
        var users: [JSONValue] = []
        for line in data.split(separator: UInt8(ascii: "\n")) where !line.isEmpty {
            users.append(try JSONValue.parse(line))
        }
        return users
    }

    static func item(_ source: ImportSource, _ json: String, now: Date = ImportFormatTests.now) throws -> ImportItem {
        source.item(from: try JSONValue.parse(Array(json.utf8)), now: now)
    }

    static func record(_ source: ImportSource, _ json: String, now: Date = ImportFormatTests.now) throws -> ImportRecord {
        let item = try item(source, json, now: now)
        return try #require(item.importedRecord, "\(item)")
    }

    static let ada = PersonName(givenName: "Ada", familyName: "Lovelace")
    static let adaGoogle = "109876543210987654321"
    static let adaFacebook = "10223344556677889"
    static let adaApple = "001234.5f0e9c3a1b2d4e6f8a0b1c2d3e4f5a6b.0312"
    static let adaRelay = "x7q2mnp4rt@privaterelay.appleid.com"
    /// A jsonl identity that is fine.
    static let google = #"{"provider": "google", "subject": "1"}"#

    // MARK: Firebase

    @Test func firebaseExportFile() throws {
        let items = try Self.users(in: "firebase.json").map { ImportSource.firebase.item(from: $0) }
        try #require(items.count == 5)

        let ada = try #require(items[0].importedRecord)
        #expect(ada.externalID == "hV7tMZ1dJqS0fE5kq2yWbC3pX4a2")
        #expect(ada.email == "ada.lovelace@example.com")
        #expect(ada.emailVerified)
        #expect(ada.name == Self.ada)
        #expect(ada.status == .active)
        #expect(ada.createdAt?.timeIntervalSince1970 == 1_704_164_645)
        #expect(!ada.hadPasswordOrPhone)
        #expect(
            ada.identities == [
                ImportIdentity(provider: "google", subject: Self.adaGoogle, email: "ada.lovelace@example.com", emailVerified: true),
                ImportIdentity(provider: "facebook", subject: Self.adaFacebook, email: "ada.lovelace@example.com", emailVerified: true),
                // Another address than the user's: Firebase does not say it is verified.
                ImportIdentity(provider: "apple", subject: Self.adaApple, email: Self.adaRelay, emailVerified: false, isPrivateEmail: true),
            ])

        #expect(items[1] == .skipped(externalID: "Qm3kT9vLw2XbR8nYp5sJd1uFh6c1", reason: "no social identity (password login only)"))

        let alan = try #require(items[2].importedRecord)
        #expect(alan.hadPasswordOrPhone)
        #expect(alan.name == PersonName(givenName: "Alan", familyName: "Turing"))
        #expect(alan.createdAt?.timeIntervalSince1970 == 1_704_300_000)
        #expect(
            alan.identities == [
                ImportIdentity(provider: "google", subject: "118765432109876543210", email: "alan@example.org", emailVerified: true)
            ])

        let katherine = try #require(items[3].importedRecord)
        #expect(katherine.status == .disabled)
        #expect(katherine.email == nil)
        #expect(katherine.name == PersonName(givenName: "Katherine", familyName: nil))
        #expect(katherine.identities == [ImportIdentity(provider: "oidc.line", subject: "U4af4980629c3e4f5a6b7c8d9e0f1a2b3")])

        #expect(items[4] == .error("email \"…@example\" is not an email address"))
    }

    @Test func firebasePhoneAndPasswordOnlyUsersAreSkippedNamingWhatTheyHad() throws {
        let phone = #"""
            {"localId": "p1", "phoneNumber": "+15555550100", "providerUserInfo": [{"providerId": "phone", "rawId": "+15555550100"}]}
            """#
        #expect(try Self.item(.firebase, phone) == .skipped(externalID: "p1", reason: "no social identity (phone login only)"))
        let both = #"{"localId": "p2", "email": "p2@example.com", "passwordHash": "aGFzaA==", "phoneNumber": "+15555550101"}"#
        #expect(try Self.item(.firebase, both) == .skipped(externalID: "p2", reason: "no social identity (password and phone logins only)"))
        let nothing = #"{"localId": "p3", "createdAt": "1704164645000"}"#
        #expect(
            try Self.item(.firebase, nothing)
                == .skipped(externalID: "p3", reason: "no social identity (no sign-in method in the export)"))
    }

    @Test func firebaseBadRecordsAreErrors() throws {
        let google = #"{"providerId": "google.com", "rawId": "1"}"#
        #expect(try Self.item(.firebase, #"{"email": "a@example.com", "providerUserInfo": [\#(google)]}"#) == .error("localId is missing"))
        #expect(
            try Self.item(.firebase, #"{"localId": "f1", "createdAt": "2024-01-02", "providerUserInfo": [\#(google)]}"#)
                == .error("createdAt is not a time in epoch milliseconds"))
        #expect(
            try Self.item(.firebase, #"{"localId": "f1", "providerUserInfo": [\#(google), \#(google)]}"#)
                == .error("two identities have provider google and subject \"1\""))
        #expect(
            try Self.item(.firebase, #"{"localId": "f1", "providerUserInfo": [{"providerId": "google.com", "rawId": ""}]}"#)
                == .error("providerUserInfo[0].rawId is empty"))
        #expect(
            try Self.item(.firebase, #"{"localId": "f1", "providerUserInfo": [{"providerId": "Twitter.com", "rawId": "1"}]}"#)
                == .error(
                    "providerUserInfo[0].providerId \"Twitter.com\" is not a provider name (lowercase letters, digits, '.', '_' or '-')"))
        #expect(try Self.item(.firebase, "[1]") == .error("the user is not a JSON object"))
    }

    @Test func firebaseCreatedAtAsANumberAndWithMilliseconds() throws {
        let number = try Self.record(
            .firebase,
            #"""
            {"localId": "f1", "createdAt": 1704164645123, "providerUserInfo": [{"providerId": "google.com", "rawId": "1"}]}
            """#)
        #expect(number.createdAt?.timeIntervalSince1970 == 1_704_164_645.123)
    }

    // MARK: Auth0

    @Test func auth0ExportFile() throws {
        let items = try Self.users(in: "auth0.ndjson").map { ImportSource.auth0.item(from: $0) }
        try #require(items.count == 5)

        let ada = try #require(items[0].importedRecord)
        #expect(ada.externalID == "google-oauth2|109876543210987654321")
        #expect(ada.email == "ada.lovelace@example.com")
        #expect(ada.emailVerified)
        #expect(ada.name == Self.ada)
        #expect(ada.status == .active)
        let created = try #require(ada.createdAt?.timeIntervalSince1970)
        #expect((created * 1_000).rounded() == 1_704_164_645_678)
        #expect(!ada.hadPasswordOrPhone)
        #expect(
            ada.identities == [
                // The primary identity: the user's email and flag.
                ImportIdentity(provider: "google", subject: Self.adaGoogle, email: "ada.lovelace@example.com", emailVerified: true),
                // A linked identity: its own profile, which says nothing of verification.
                ImportIdentity(provider: "facebook", subject: Self.adaFacebook, email: "ada.lovelace@example.com", emailVerified: false),
                // Apple's `email_verified` is the string "true".
                ImportIdentity(provider: "apple", subject: Self.adaApple, email: Self.adaRelay, emailVerified: true, isPrivateEmail: true),
            ])

        #expect(items[1] == .skipped(externalID: "auth0|65a1b2c3d4e5f6a7b8c9d0e1", reason: "no social identity (password login only)"))

        let alan = try #require(items[2].importedRecord)
        #expect(alan.externalID == "auth0|65a1b2c3d4e5f6a7b8c9d0e2")
        #expect(alan.hadPasswordOrPhone)
        #expect(alan.name == PersonName(givenName: "Alan", familyName: "Turing"))
        #expect(
            alan.identities == [
                ImportIdentity(provider: "google", subject: "118765432109876543210", email: "alan@example.org", emailVerified: true)
            ])

        let katherine = try #require(items[3].importedRecord)
        #expect(katherine.status == .disabled)
        #expect(katherine.createdAt?.timeIntervalSince1970 == 1_706_745_600)
        #expect(katherine.identities == [ImportIdentity(provider: "line", subject: "U4af4980629c3e4f5a6b7c8d9e0f1a2b3")])

        #expect(items[4] == .error("created_at is not an ISO 8601 date and time with a zone"))
    }

    @Test func auth0NonSocialConnectionsAreSkippedAndEnterpriseOIDCIsKeptVerbatim() throws {
        let sms = #"{"user_id": "sms|5f1", "identities": [{"provider": "sms", "user_id": "5f1", "isSocial": false}]}"#
        #expect(try Self.item(.auth0, sms) == .skipped(externalID: "sms|5f1", reason: "no social identity (phone login only)"))
        let email = #"{"user_id": "email|5f2", "identities": [{"provider": "email", "user_id": "5f2", "isSocial": false}]}"#
        #expect(try Self.item(.auth0, email) == .skipped(externalID: "email|5f2", reason: "no social identity (email code login only)"))

        let oidc = try Self.record(
            .auth0,
            #"""
            {"user_id": "oidc|acme-okta|00u1", "email": "eve@example.com", "email_verified": true,
             "identities": [{"provider": "oidc", "user_id": "acme-okta|00u1", "connection": "acme-okta", "isSocial": false}]}
            """#)
        #expect(
            oidc.identities == [
                ImportIdentity(provider: "oidc", subject: "acme-okta|00u1", email: "eve@example.com", emailVerified: true)
            ])
        #expect(!oidc.hadPasswordOrPhone)
    }

    @Test func auth0NumericUserIDsAndExportsWithoutIdentities() throws {
        let github = try Self.record(
            .auth0,
            #"""
            {"user_id": "github|583231", "identities": [{"provider": "github", "user_id": 583231, "isSocial": true}]}
            """#)
        #expect(github.identities == [ImportIdentity(provider: "github", subject: "583231")])
        // Past 2^53 a JSON number has lost digits: refused rather than imported wrong.
        #expect(
            try Self.item(.auth0, #"{"user_id": "facebook|1", "identities": [{"provider": "facebook", "user_id": 10223344556677889}]}"#)
                == .error("identities[0].user_id is a number JSON cannot carry exactly; write it as a string"))

        let bare = try Self.record(.auth0, #"{"user_id": "apple|001234.abc.0312", "email": "a@example.com", "email_verified": true}"#)
        #expect(
            bare.identities == [
                ImportIdentity(provider: "apple", subject: "001234.abc.0312", email: "a@example.com", emailVerified: true)
            ])
        #expect(
            try Self.item(.auth0, #"{"user_id": "auth0|77"}"#)
                == .skipped(externalID: "auth0|77", reason: "no social identity (password login only)"))
    }

    @Test func auth0BadRecordsAreErrors() throws {
        let google = #"{"provider": "google-oauth2", "user_id": "1"}"#
        #expect(try Self.item(.auth0, #"{"identities": [\#(google)]}"#) == .error("user_id is missing"))
        #expect(
            try Self.item(.auth0, #"{"user_id": "g|1", "email": "ada at example.com", "identities": [\#(google)]}"#)
                == .error("email (no @) is not an email address"))
        #expect(
            try Self.item(.auth0, #"{"user_id": "g|1", "identities": [\#(google), \#(google)]}"#)
                == .error("two identities have provider google and subject \"1\""))
        #expect(
            try Self.item(.auth0, #"{"user_id": "g|1", "blocked": "yes", "identities": [\#(google)]}"#)
                == .error("blocked is not true or false"))
        #expect(
            try Self.item(.auth0, #"{"user_id": "g|1", "identities": [{"provider": "google-oauth2"}]}"#)
                == .error("identities[0].user_id is missing"))
    }

    // MARK: Supabase

    @Test func supabaseExportFile() throws {
        let items = try Self.users(in: "supabase.jsonl").map { ImportSource.supabase.item(from: $0, now: Self.now) }
        try #require(items.count == 5)

        let ada = try #require(items[0].importedRecord)
        #expect(ada.externalID == "8f14e45f-ceea-467f-a8f0-5c7d1a2b3c4d")
        #expect(ada.email == "ada.lovelace@example.com")
        #expect(ada.emailVerified)
        #expect(ada.name == Self.ada)
        #expect(ada.status == .active)
        let created = try #require(ada.createdAt?.timeIntervalSince1970)
        #expect(created.rounded(.down) == 1_704_164_645)
        #expect(abs(created - 1_704_164_645.123456) < 0.000_001)
        #expect(!ada.hadPasswordOrPhone)
        #expect(
            ada.identities == [
                ImportIdentity(provider: "google", subject: Self.adaGoogle, email: "ada.lovelace@example.com", emailVerified: true),
                ImportIdentity(provider: "facebook", subject: Self.adaFacebook, email: "ada.lovelace@example.com", emailVerified: true),
                ImportIdentity(
                    provider: "apple", subject: Self.adaApple, email: Self.adaRelay, emailVerified: true, isPrivateEmail: true,
                    providerRefreshToken: "r1a2b3c4d5e6f7.0.nxyz.Apple-refresh-token-example"),
            ])

        #expect(
            items[1]
                == .skipped(externalID: "c9f0f895-fb98-4b91-9c3f-2e1d0a9b8c7d", reason: "no social identity (password login only)"))

        let alan = try #require(items[2].importedRecord)
        #expect(alan.hadPasswordOrPhone)
        #expect(alan.emailVerified)
        #expect(alan.createdAt?.timeIntervalSince1970 == 1_704_302_400)
        #expect(
            alan.identities == [
                ImportIdentity(provider: "google", subject: "118765432109876543210", email: "alan@example.org", emailVerified: true)
            ])

        let katherine = try #require(items[3].importedRecord)
        #expect(katherine.status == .disabled)
        #expect(katherine.email == nil)
        #expect(!katherine.emailVerified)
        #expect(katherine.name == PersonName(givenName: "Katherine", familyName: nil))
        // `+09`: nine in the morning in Seoul is midnight UTC.
        #expect(katherine.createdAt?.timeIntervalSince1970 == 1_706_745_600)
        #expect(katherine.identities == [ImportIdentity(provider: "kakao", subject: "3141592653")])

        #expect(items[4] == .error("two identities have provider google and subject \"100200300400500600700\""))
    }

    @Test func supabaseBansDisableOnlyWhileTheyLast() throws {
        func status(bannedUntil: String) throws -> AccountStatus {
            try Self.record(
                .supabase,
                #"""
                {"id": "s1", "banned_until": \#(bannedUntil), "identities": [{"provider": "google", "provider_id": "1"}]}
                """#
            ).status
        }
        #expect(try status(bannedUntil: "null") == .active)
        #expect(try status(bannedUntil: #""2024-06-01 00:00:00+00""#) == .active)
        #expect(try status(bannedUntil: #""2025-06-01T00:00:00Z""#) == .disabled)
        #expect(try status(bannedUntil: #""infinity""#) == .disabled)
        let soon = #"{"id": "s1", "banned_until": "soon", "identities": [{"provider": "google", "provider_id": "1"}]}"#
        #expect(
            try Self.item(.supabase, soon)
                == .error("banned_until is not an ISO 8601 date and time with a zone"))
    }

    @Test func supabaseIdentityRows() throws {
        // No `provider_id` column (older exports): `identity_data.sub`. A Google refresh token is not kept.
        let record = try Self.record(
            .supabase,
            #"""
            {"id": "s2", "email": "bo@example.com", "email_confirmed_at": null, "phone": "+15555550102",
             "identities": [{"provider": "google", "identity_data": {"sub": "42", "email": "bo@example.com", "email_verified": "true"},
                             "provider_refresh_token": "1//google-refresh"},
                            {"provider": "phone", "provider_id": "15555550102"}]}
            """#)
        #expect(!record.emailVerified)
        #expect(record.hadPasswordOrPhone)
        #expect(record.identities == [ImportIdentity(provider: "google", subject: "42", email: "bo@example.com", emailVerified: true)])

        let magicLink = #"""
            {"id": "s3", "email": "cy@example.com", "encrypted_password": "", "identities": [{"provider": "email", "provider_id": "s3"}]}
            """#
        #expect(try Self.item(.supabase, magicLink) == .skipped(externalID: "s3", reason: "no social identity (email link login only)"))
        let anonymous = #"{"id": "s4", "is_anonymous": true, "identities": []}"#
        #expect(try Self.item(.supabase, anonymous) == .skipped(externalID: "s4", reason: "no social identity (anonymous user)"))
        let deleted = #"{"id": "s5", "deleted_at": "2024-03-01 00:00:00+00", "identities": [{"provider": "google", "provider_id": "9"}]}"#
        #expect(try Self.item(.supabase, deleted) == .skipped(externalID: "s5", reason: "deleted in Supabase (deleted_at is set)"))
        #expect(
            try Self.item(.supabase, #"{"id": "s6", "identities": [{"provider": "google", "identity_data": {}}]}"#)
                == .error("identities[0].provider_id is missing"))
        #expect(
            try Self.item(.supabase, #"{"id": "s7", "identities": [{"provider": "sso:8a1f", "provider_id": "1"}]}"#)
                == .error("identities[0].provider \"sso:8a1f\" is not a provider name (lowercase letters, digits, '.', '_' or '-')"))
        #expect(try Self.item(.supabase, #"{"identities": [{"provider": "google", "provider_id": "1"}]}"#) == .error("id is missing"))
    }

    // MARK: jsonl

    @Test func brokerJSONLinesFile() throws {
        let items = try Self.users(in: "broker.jsonl").map { ImportSource.jsonl.item(from: $0) }
        try #require(items.count == 5)

        let ada = try #require(items[0].importedRecord)
        #expect(
            ada
                == ImportRecord(
                    externalID: "user-1001", email: "ada.lovelace@example.com", emailVerified: true, name: Self.ada, status: .active,
                    createdAt: Date(timeIntervalSince1970: 1_704_164_645),
                    identities: [
                        ImportIdentity(provider: "google", subject: Self.adaGoogle, email: "ada.lovelace@example.com", emailVerified: true),
                        ImportIdentity(
                            provider: "facebook", subject: Self.adaFacebook, providerScope: "1234567890123456",
                            email: "ada.lovelace@example.com"),
                        ImportIdentity(
                            provider: "apple", subject: Self.adaApple, providerScope: "ABCDE12345", email: Self.adaRelay,
                            emailVerified: true,
                            isPrivateEmail: true, providerRefreshToken: "r1a2b3c4d5e6f7.0.nxyz.Apple-refresh-token-example"),
                    ]))

        let katherine = try #require(items[1].importedRecord)
        #expect(katherine.status == .disabled)
        #expect(katherine.createdAt?.timeIntervalSince1970 == 1_706_745_600)
        #expect(katherine.name == PersonName(givenName: "Katherine", familyName: nil))
        #expect(katherine.identities == [ImportIdentity(provider: "line", subject: "U4af4980629c3e4f5a6b7c8d9e0f1a2b3")])

        #expect(
            items[2]
                == .record(
                    ImportRecord(
                        externalID: "user-1003", email: "alan@example.org",
                        identities: [
                            ImportIdentity(
                                provider: "google", subject: "118765432109876543210", email: "alan@example.org", emailVerified: true)
                        ])))
        #expect(items[3] == .error("identities is empty: a record needs at least one identity"))
        #expect(items[4] == .error("identities[0].subject is not a string"))
    }

    @Test func brokerJSONLinesAreStrict() throws {
        let google = #"{"provider": "google", "subject": "1"}"#
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "status": "deleted", "identities": [\#(google)]}"#)
                == .error("status \"deleted\" is not active or disabled"))
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "email_verified": "true", "identities": [\#(google)]}"#)
                == .error("email_verified is not true or false"))
        #expect(try Self.item(.jsonl, #"{"external_id": "x"}"#) == .error("identities is missing"))
        #expect(try Self.item(.jsonl, #"{"external_id": "", "identities": [\#(google)]}"#) == .error("external_id is empty"))
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "identities": [{"provider": "Google", "subject": "1"}]}"#)
                == .error("identities[0].provider \"Google\" is not a provider name (lowercase letters, digits, '.', '_' or '-')"))
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "identities": [{"provider": "google", "subject": ""}]}"#)
                == .error("identities[0].subject is empty"))
        let again = #"{"provider": "google", "subject": "1", "email": "a@b.co"}"#
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "identities": [\#(google), \#(again)]}"#)
                == .error("two identities have provider google and subject \"1\""))
        let spaced = #"{"provider": "google", "subject": "1", "email": "a b@example.com"}"#
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "identities": [\#(spaced)]}"#)
                == .error("identities[0].email \"…@example.com\" is not an email address"))
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "email": "a@@example.com", "identities": [\#(google)]}"#)
                == .error("email \"…@example.com\" is not an email address"))
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "email": "@example.com", "identities": [\#(google)]}"#)
                == .error("email \"…@example.com\" is not an email address"))
        // White space outside ASCII too (a no-break space, an ideographic space), and domains
        // with a dot only at an end.
        for bad in ["a\u{00A0}b@example.com", "a\u{3000}b@example.com", "a@example.", "a@.example", "a@example"] {
            let json = #"{"external_id": "x", "email": "\#(bad)", "identities": [\#(google)]}"#
            #expect(try Self.item(.jsonl, json).importedRecord == nil, "\(bad)")
        }
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "email": "zoë@exämple.com", "identities": [\#(google)]}"#).importedRecord != nil)
    }

    @Test func lengthsAreCountedInBytes() throws {
        let longest = String(repeating: "é", count: 127) + "a"  // 255 bytes
        let identity = #"{"provider": "google", "subject": "\#(longest)", "provider_scope": "\#(longest)"}"#
        let record = try Self.record(.jsonl, #"{"external_id": "\#(longest)", "identities": [\#(identity)]}"#)
        #expect(record.externalID.utf8.count == 255)
        #expect(
            try Self.item(.jsonl, #"{"external_id": "\#(longest)é", "identities": [\#(identity)]}"#)
                == .error("external_id is longer than 255 bytes"))
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "identities": [{"provider": "google", "subject": "\#(longest)é"}]}"#)
                == .error("identities[0].subject is longer than 255 bytes"))
        let wideScope = #"{"provider": "google", "subject": "1", "provider_scope": "\#(longest)é"}"#
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "identities": [\#(wideScope)]}"#)
                == .error("identities[0].provider_scope is longer than 255 bytes"))
        let longEmail = String(repeating: "a", count: 309) + "@example.com"  // 321 bytes
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "email": "\#(longEmail)", "identities": [\#(Self.google)]}"#)
                == .error("email (longer than 320 bytes) is not an email address"))
        let a65 = String(repeating: "a", count: 65)
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "identities": [{"provider": "\#(a65)", "subject": "1"}]}"#)
                == .error(
                    "identities[0].provider \"\(a65.dropLast())\" is not a provider name (lowercase letters, digits, '.', '_' or '-')"))
    }

    @Test(arguments: [
        ("2024-01-02T03:04:05Z", 1_704_164_645.0),
        ("2024-01-02t03:04:05z", 1_704_164_645),
        ("2024-01-02T04:04:05+01:00", 1_704_164_645),
        ("2024-01-02T04:04:05+0100", 1_704_164_645),
        ("2024-01-01T21:34:05-05:30", 1_704_164_645),
        ("2024-01-02 03:04:05+00", 1_704_164_645),
        ("2024-01-02 03:04:05.5+00", 1_704_164_645.5),
        ("2024-02-29T00:00:00Z", 1_709_164_800),
        ("1969-12-31T23:59:59Z", -1),
    ])
    func createdAtIsReadExactly(text: String, epochSeconds: Double) throws {
        let record = try Self.record(.jsonl, #"{"external_id": "x", "created_at": "\#(text)", "identities": [\#(Self.google)]}"#)
        #expect(record.createdAt?.timeIntervalSince1970 == epochSeconds)
    }

    @Test(arguments: [
        "2024-01-02T03:04:05", "2024-01-02", "2023-02-29T00:00:00Z", "2024-01-02T24:00:00Z", "2024-01-02T03:04:60Z", "2024-13-02T03:04:05Z",
        "2024-01-02T03:04:05.Z", "2024-01-02T03:04:05.1234567890Z", "2024-01-02T03:04:05+1", "2024-01-02T03:04:05Z ", "yesterday",
    ])
    func aDateThatDoesNotParseIsAnErrorNamingTheField(text: String) throws {
        #expect(
            try Self.item(.jsonl, #"{"external_id": "x", "created_at": "\#(text)", "identities": [\#(Self.google)]}"#)
                == .error("created_at is not an ISO 8601 date and time with a zone"))
    }

    // MARK: Provider names

    /// The three built-ins come out as the broker names them, whatever the source calls them;
    /// every other name stays as the source spells it, for `--map-provider SOURCE=ID`.
    @Test func providerNamesAreNormalisedForTheBuiltInsOnly() throws {
        let firebase = try Self.record(
            .firebase,
            #"""
            {"localId": "f", "providerUserInfo": [{"providerId": "google.com", "rawId": "1"}, {"providerId": "facebook.com", "rawId": "2"},
              {"providerId": "apple.com", "rawId": "3"}, {"providerId": "oidc.line", "rawId": "4"},
              {"providerId": "github.com", "rawId": "5"}]}
            """#)
        #expect(firebase.identities.map(\.provider) == ["google", "facebook", "apple", "oidc.line", "github.com"])

        let auth0 = try Self.record(
            .auth0,
            #"""
            {"user_id": "a", "identities": [{"provider": "google-oauth2", "user_id": "1"}, {"provider": "facebook", "user_id": "2"},
              {"provider": "apple", "user_id": "3"}, {"provider": "line", "user_id": "4"}, {"provider": "oidc", "user_id": "5"}]}
            """#)
        #expect(auth0.identities.map(\.provider) == ["google", "facebook", "apple", "line", "oidc"])

        let supabase = try Self.record(
            .supabase,
            #"""
            {"id": "s", "identities": [{"provider": "google", "provider_id": "1"}, {"provider": "facebook", "provider_id": "2"},
              {"provider": "apple", "provider_id": "3"}, {"provider": "kakao", "provider_id": "4"},
              {"provider": "linkedin_oidc", "provider_id": "5"}]}
            """#)
        #expect(supabase.identities.map(\.provider) == ["google", "facebook", "apple", "kakao", "linkedin_oidc"])

        // The broker's own format names the tenant's provider ids: nothing is renamed.
        let jsonl = try Self.record(
            .jsonl,
            #"""
            {"external_id": "j", "identities": [{"provider": "google.com", "subject": "1"}, {"provider": "line", "subject": "2"}]}
            """#)
        #expect(jsonl.identities.map(\.provider) == ["google.com", "line"])
    }

    @Test func namesAreSplitOnTheFirstSpaceAndCleaned() throws {
        let google = #"[{"providerId": "google.com", "rawId": "1"}]"#
        let name = { (displayName: String) throws -> PersonName in
            try Self.record(.firebase, #"{"localId": "f", "displayName": "\#(displayName)", "providerUserInfo": \#(google)}"#).name
        }
        #expect(try name("Ada King Lovelace") == PersonName(givenName: "Ada", familyName: "King Lovelace"))
        #expect(try name("  Plato ") == PersonName(givenName: "Plato", familyName: nil))
        #expect(try name(#"Ada\u001B[2J Love\nlace"#) == PersonName(givenName: "Ada[2J", familyName: "Love lace"))
        #expect(try name(" ") == PersonName(givenName: nil, familyName: nil))
        // Auth0 names a database user by its email: no name.
        let auth0 = try Self.record(
            .auth0,
            #"""
            {"user_id": "g|1", "name": "bo@example.com", "identities": [{"provider": "google-oauth2", "user_id": "1"}]}
            """#)
        #expect(auth0.name == PersonName(givenName: nil, familyName: nil))
    }

    @Test func everySourceReadsItsOwnFixture() throws {
        let files: [ImportSource: String] = [
            .firebase: "firebase.json", .auth0: "auth0.ndjson", .supabase: "supabase.jsonl", .jsonl: "broker.jsonl",
        ]
        #expect(Set(files.keys) == Set(ImportSource.allCases))
        #expect(ImportSource(rawValue: "auth0") == .auth0)
        for source in ImportSource.allCases {
            let items = try Self.users(in: try #require(files[source])).map { source.item(from: $0, now: Self.now) }
            let records = items.filter { $0.importedRecord != nil }.count
            let errors = items.filter { if case .error = $0 { true } else { false } }.count
            #expect(records == 3, "\(source)")
            #expect(errors == (source == .jsonl ? 2 : 1), "\(source)")
        }
    }
}

extension ImportItem {
    /// The record, when the item is one.
    fileprivate var importedRecord: ImportRecord? {
        if case .record(let record) = self { record } else { nil }
    }
}
