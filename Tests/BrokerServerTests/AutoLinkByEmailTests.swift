import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import MockIdP
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Providers
import Storage
import Testing

/// The tenant's `auto_link_verified_email` (issue 11): a new identity joins the one active
/// account with its provider-verified email, never for relay addresses, unverified or Facebook
/// emails, or more than one match; `possible_duplicate` flags a new account that shares an email.
@Suite struct AutoLinkByEmailTests {
    typealias S = ProviderTestSetup
    typealias L = LinkingRequests

    static func run(autoLink: Bool, _ test: @Sendable @escaping (S) async throws -> Void) async throws {
        try await L.run { setup in
            if autoLink { _ = try await TenantAdmin(database: setup.app.database, actor: "test").setAutoLinkVerifiedEmail("acme", true) }
            try await test(setup)
        }
    }

    static func googleSignIn(_ setup: S, subject: String, email: String, verified: Bool = true) async throws -> [String: Any] {
        let token = try setup.google.mint(
            setup.google.claims(subject: subject, audience: S.webClient, email: email, emailVerified: verified))
        return try await L.signIn(setup, "google", ["id_token": token]).body
    }

    @Test func offByDefaultANewAccountFlaggedAsAPossibleDuplicate() async throws {
        try await Self.run(autoLink: false) { setup in
            let tenant = try await setup.client.execute(uri: "/v1/tenant", method: .get, headers: bearer(setup.keys["acme"] ?? ""))
            #expect(try tenant.json()[path: "linking.auto_link_verified_email"] as? Bool == false)
            let apple = try await L.signInWithApple(setup, subject: "001.off", email: "Same@Example.com")
            #expect(apple.body["possible_duplicate"] as? Bool == false)
            #expect(apple.body.keys.contains("linked_by"))
            #expect(apple.body["linked_by"] is NSNull)
            let google = try await Self.googleSignIn(setup, subject: "g-off", email: "same@example.com")
            #expect(google["is_new_account"] as? Bool == true)
            #expect(google["possible_duplicate"] as? Bool == true)
            #expect(google["linked_by"] is NSNull)
            #expect(google[path: "account.id"] as? String != apple.accountID)
            // A returning sign-in is never flagged.
            let again = try await Self.googleSignIn(setup, subject: "g-off", email: "same@example.com")
            #expect(again["possible_duplicate"] as? Bool == false)
        }
    }

    @Test func onANewVerifiedIdentityJoinsTheAccountWithThatEmail() async throws {
        try await Self.run(autoLink: true) { setup in
            let tenant = try await setup.client.execute(uri: "/v1/tenant", method: .get, headers: bearer(setup.keys["acme"] ?? ""))
            #expect(try tenant.json()[path: "linking.auto_link_verified_email"] as? Bool == true)
            let apple = try await L.signInWithApple(setup, subject: "001.on", email: "Grace@Example.com")
            let google = try await Self.googleSignIn(setup, subject: "g-on", email: "grace@example.COM")
            #expect(google[path: "account.id"] as? String == apple.accountID)
            #expect(google["is_new_account"] as? Bool == false)
            #expect(google["linked_by"] as? String == "verified_email")
            #expect(google["possible_duplicate"] as? Bool == false)
            #expect(try await setup.count("accounts") == 1)
            #expect(try await L.identities(setup, of: apple.accountID).count == 2)
            #expect(try await L.auditActions(setup).contains("identity.linked"))
            // Found again by its own key, not by email.
            let again = try await Self.googleSignIn(setup, subject: "g-on", email: "grace@example.com")
            #expect(again[path: "account.id"] as? String == apple.accountID)
            #expect(again["linked_by"] is NSNull)
        }
    }

    @Test func unverifiedEmailsNeverLink() async throws {
        try await Self.run(autoLink: true) { setup in
            let apple = try await L.signInWithApple(setup, subject: "001.unverified", email: "u@example.com")
            let google = try await Self.googleSignIn(setup, subject: "g-unverified", email: "u@example.com", verified: false)
            #expect(google[path: "account.id"] as? String != apple.accountID)
            #expect(google["is_new_account"] as? Bool == true)
            #expect(google["possible_duplicate"] as? Bool == true)
        }
    }

    /// Both of Apple's relay domains (issue 39 A3: `private.icloud.com`, Apple's since 2026, was
    /// taken for an ordinary address and linked).
    @Test(arguments: ProviderIdentity.builtInAppleRelayDomains)
    func relayAddressesNeverLink(domain: String) async throws {
        try await Self.run(autoLink: true) { setup in
            let relay = "abc123@" + domain
            // An account whose verified email happens to be the relay address (through Google).
            let google = try await Self.googleSignIn(setup, subject: "g-relay", email: relay)
            let token = try L.appleToken(setup, subject: "001.relay", email: relay, isPrivateEmail: true)
            let apple = try await L.signIn(setup, "apple", ["client_id": "com.acme.app", "identity_token": token])
            #expect(apple.accountID != google[path: "account.id"] as? String)
            #expect(apple.body["is_new_account"] as? Bool == true)
            #expect(apple.body["possible_duplicate"] as? Bool == true)
            // And a relay address on the identity side is refused even when Apple does not flag it.
            let unflagged = try L.appleToken(setup, subject: "001.relay-2", email: relay.uppercased(), isPrivateEmail: false)
            let second = try await L.signIn(setup, "apple", ["client_id": "com.acme.app", "identity_token": unflagged])
            #expect(second.body["is_new_account"] as? Bool == true)
            #expect(second.body[path: "account.is_private_email"] as? Bool == true, "\(second.body)")
            #expect(second.body[path: "identity.is_private_email"] as? Bool == true)
            #expect(google[path: "account.is_private_email"] as? Bool == true, "any provider's relay address is private")
            // The other way round: Apple first, unflagged, then a verified Google email.
            let other = "xyz789@" + domain.uppercased()
            let first = try await L.signIn(
                setup, "apple",
                ["client_id": "com.acme.app", "identity_token": try L.appleToken(setup, subject: "001.relay-3", email: other)])
            let then = try await Self.googleSignIn(setup, subject: "g-relay-3", email: other.lowercased())
            #expect(then[path: "account.id"] as? String != first.accountID)
            #expect(then["linked_by"] is NSNull)
        }
    }

    @Test func facebookEmailsNeverLink() async throws {
        try await Self.run(autoLink: true) { setup in
            let apple = try await L.signInWithApple(setup, subject: "001.fb", email: "ada@example.com")
            let token = setup.facebook.issueAccessToken(appID: S.appID, userID: "30001", name: "Ada", email: "ada@example.com")
            let facebook = try await L.signIn(setup, "facebook", ["access_token": token])
            #expect(facebook.accountID != apple.accountID)
            #expect(facebook.body["possible_duplicate"] as? Bool == true)
            #expect(facebook.body["linked_by"] is NSNull)
        }
    }

    @Test func twoMatchingAccountsNeverLink() async throws {
        try await Self.run(autoLink: false) { setup in
            let first = try await L.signInWithApple(setup, subject: "001.two-a", email: "two@example.com")
            let second = try await Self.googleSignIn(setup, subject: "g-two-b", email: "two@example.com")
            #expect(second[path: "account.id"] as? String != first.accountID)
            _ = try await TenantAdmin(database: setup.app.database, actor: "test").setAutoLinkVerifiedEmail("acme", true)
            let third = try await Self.googleSignIn(setup, subject: "g-two-c", email: "two@example.com")
            #expect(third["is_new_account"] as? Bool == true)
            #expect(third["possible_duplicate"] as? Bool == true)
            #expect(try await setup.count("accounts") == 3)
        }
    }

    @Test func disabledAccountsAreNotJoined() async throws {
        try await Self.run(autoLink: true) { setup in
            let apple = try await L.signInWithApple(setup, subject: "001.disabled", email: "d@example.com")
            try await setup.app.database.client.query(
                "UPDATE accounts SET status = 'disabled' WHERE id = \(UUID(uuidString: apple.accountID))")
            let google = try await Self.googleSignIn(setup, subject: "g-disabled", email: "d@example.com")
            #expect(google[path: "account.id"] as? String != apple.accountID)
            #expect(google["is_new_account"] as? Bool == true)
        }
    }

    @Test func whoMayAutoLink() throws {
        // Each provider's email trust is its descriptor's.
        let descriptors: [ProviderID: ProviderDescriptor] = [
            .apple: AppleProvider.descriptor, .google: GoogleProvider.descriptor, .facebook: FacebookProvider.descriptor,
        ]
        func identity(_ provider: ProviderID, _ email: String?, verified: Bool = true, relay: Bool = false) -> ProviderIdentity {
            ProviderIdentity(
                provider: provider, providerScope: "", subject: "s", email: email, emailVerified: verified, isPrivateEmail: relay,
                name: PersonName(givenName: nil, familyName: nil), emailTrust: descriptors[provider]?.emailTrust ?? .never)
        }
        #expect(identity(.google, "a@example.com").mayAutoLinkByEmail)
        #expect(identity(.apple, "a@example.com").mayAutoLinkByEmail)
        #expect(!identity(.google, "a@example.com", verified: false).mayAutoLinkByEmail)
        #expect(!identity(.apple, "x@privaterelay.appleid.com", relay: true).mayAutoLinkByEmail)
        #expect(!identity(.apple, "x@PrivateRelay.AppleID.com").mayAutoLinkByEmail)
        #expect(ProviderIdentity.isAppleRelay("x@PRIVATERELAY.APPLEID.COM") && ProviderIdentity.isAppleRelay("@privaterelay.appleid.com"))
        #expect(!ProviderIdentity.isAppleRelay("x@privaterelay.appleid.co") && !ProviderIdentity.isAppleRelay("xprivaterelay.appleid.com"))
        #expect(
            !ProviderIdentity.isAppleRelay("x@privaterelay.appleid.com.evil")
                && !ProviderIdentity.isAppleRelay("x@éprivaterelay.appleid.com"))
        #expect(!ProviderIdentity.isAppleRelay("relay.appleid.com") && !ProviderIdentity.isAppleRelay(nil))
        #expect(ProviderIdentity.isAppleRelay("x@private.icloud.com") && ProviderIdentity.isAppleRelay("x@Private.iCloud.com"))
        #expect(!ProviderIdentity.isAppleRelay("x@icloud.com") && !ProviderIdentity.isAppleRelay("x@private.icloud.com.evil"))
        #expect(!identity(.google, "x@private.icloud.com").mayAutoLinkByEmail)
        #expect(identity(.google, "x@private.icloud.com").isPrivateEmail, "a relay address is private whoever brings it")
        #expect(!identity(.facebook, "a@example.com").mayAutoLinkByEmail)
        #expect(!identity(.google, nil).mayAutoLinkByEmail)
        #expect(!identity(.google, "").mayAutoLinkByEmail)
        // An id of no built-in type (an OpenID Connect provider's) is not trusted unless its settings say so.
        let line = try #require(ProviderID(rawValue: "line"))
        #expect(!identity(line, "a@example.com").mayAutoLinkByEmail)
        var trusted = identity(line, "a@example.com")
        trusted.emailTrust = .verified
        #expect(trusted.mayAutoLinkByEmail)
    }
}
