import BrokerApplication
import BrokerCore
import Foundation
import MockIdP
import PostgresNIO
import Storage
import Testing

/// The Apple credential check tests' checker and row counts, shared with the graceful stop tests.
enum CredentialChecks {
    static func checker(_ setup: AppleTestSetup, rate: Int = 1_000) -> AppleCredentialChecker {
        setup.app.services.appleCredentialChecker(AppleCredentialChecks(interval: 86_400, maxCallsPerSecond: rate))
    }

    static func count(_ setup: AppleTestSetup, _ sql: String) async throws -> Int {
        let rows = try await setup.app.database.client.query(PostgresQuery(unsafeSQL: sql))
        var count = 0
        for try await value in rows.decode(Int.self) { count = value }
        return count
    }
}
