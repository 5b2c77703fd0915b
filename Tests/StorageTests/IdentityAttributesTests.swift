import BrokerCore
import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Storage

/// Provider attributes (`identities.attributes`) through both sign-in statements.
@Suite struct IdentityAttributesTests {
    let statements = SignInFixtures()

    func request(_ tenantID: UUID, subject: String, attributes: [String: String]) -> SignInRequest {
        var request = statements.request(tenantID: tenantID, email: "a@example.com")
        request.identity.provider = .google
        request.identity.providerScope = ""
        request.identity.subject = subject
        request.identity.attributes = attributes
        request.session.id = .random()
        return request
    }

    /// Each connection prepares a statement once, with the parameter types of its first run: a
    /// first run without attributes (NULL) must not fix `$21` to a type a later run's text
    /// cannot be read as (found by the demo: Apple first, then Facebook).
    @Test func attributesAfterASignInWithoutThemOnTheSameConnection() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("attrs", in: database)
            try await database.client.withConnection { connection in
                for subject in ["none-first", "with-hd"] {
                    let attributes = subject == "with-hd" ? ["hd": "acme.example"] : [:]
                    let full = AccountRepository.SignInStatement(
                        request: request(tenant.id, subject: subject, attributes: attributes), newIdentityID: .timeOrdered(),
                        newAccountID: .timeOrdered())
                    for try await _ in try await connection.execute(full, logger: TestDatabase.logger) {}
                    let quiet = AccountRepository.QuietSignInBatchStatement(requests: [
                        request(tenant.id, subject: subject, attributes: attributes)
                    ])
                    var rows = 0
                    for try await _ in try await connection.execute(quiet, logger: TestDatabase.logger) { rows += 1 }
                    #expect(rows == 1, "\(subject): the same attributes again are quiet")
                }
            }
            let stored = try await database.client.query(
                "SELECT subject, attributes::text FROM identities WHERE tenant_id = \(tenant.id) ORDER BY subject")
            var found: [String: String?] = [:]
            for try await (subject, attributes) in stored.decode((String, String?).self) { found[subject] = attributes }
            #expect(found["none-first"] == .some(nil))
            #expect(found["with-hd"] == .some(#"{"hd": "acme.example"}"#))
        }
    }

    @Test func newAttributesAreMergedAndAreNotQuiet() async throws {
        try await TestDatabase.withFresh { database, _ in
            let tenant = try await TestDatabase.createTenant("merge", in: database)
            _ = try await database.accounts.signIn(request(tenant.id, subject: "s", attributes: ["hd": "a.example"]))
            let changed = try #require(try await database.accounts.signIn(request(tenant.id, subject: "s", attributes: ["name": "Ada"])))
            #expect(changed.identity.attributes == ["hd": "a.example", "name": "Ada"])
            let replaced = try #require(
                try await database.accounts.signIn(request(tenant.id, subject: "s", attributes: ["hd": "b.example"])))
            #expect(replaced.identity.attributes == ["hd": "b.example", "name": "Ada"])
            let kept = try #require(try await database.accounts.signIn(request(tenant.id, subject: "s", attributes: [:])))
            #expect(kept.identity.attributes == ["hd": "b.example", "name": "Ada"])
        }
    }
}
