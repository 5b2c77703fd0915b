import Foundation
import Storage
import TestSupport
import Testing

/// `broker apple check-credentials` (issue 23 §3) as an operator runs it: the report's shape,
/// and what to do for an unknown tenant. (What the checks do is in AppleCredentialCheckTests.)
@Suite struct AppleCredentialCLITests {
    @Test func aTenantWithoutAppleTokensReportsNothingChecked() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url, extra: ["BROKER_APPLE_BASE_URL": "http://127.0.0.1:9"])
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let _ = try await CLIFixtures.seedAccount(database)
            let json = try await cli.run("apple", "check-credentials", "--tenant", "acme", "--now", "--json")
            #expect(json.status == 0, "\(json.output)")
            let body = try json.object()
            #expect(body["checked"] as? Int == 0)
            #expect(body["still_valid"] as? Int == 0)
            #expect(body["revoked"] as? Int == 0)
            #expect(body["failed"] as? Int == 0)
            let text = try await cli.run("apple", "check-credentials", "--tenant", "acme")
            #expect(text.output.contains("Checked 0 Apple refresh token(s) of tenant 'acme'"), "\(text.output)")
            let unknown = try await cli.run("apple", "check-credentials", "--tenant", "nobody")
            #expect(unknown.status == 1)
            #expect(unknown.output.contains("broker tenant list"), "\(unknown.output)")
        }
    }
}
