import BrokerCore
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// A master key that is not the one the database's secrets are sealed with (issue 39 B8):
/// `serve` and every command that seals or opens a secret refuse it, naming
/// BROKER_MASTER_KEY, and change nothing. Before, `serve` started and answered each sign-in 500
/// after committing it, and `broker keys rotate` exited 0 and broke every sign-in.
@Suite struct MasterKeyCheckCLITests {
    static func signingKeys(_ database: Database) async throws -> Int {
        let rows = try await database.client.query("SELECT count(*)::int FROM signing_keys").collect()
        return try rows.first?.decode(Int.self) ?? -1
    }

    // A serve that did not refuse would run on: the suite's time limit ends the test then.
    @Test(.timeLimit(.minutes(2))) func aWrongMasterKeyIsRefusedBeforeAnythingIsServedOrWritten() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url, extra: ["BROKER_PORT": "0"])
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let wrong = BrokerCLI(databaseURL: url, extra: ["BROKER_MASTER_KEY": MasterKey.generate().base64, "BROKER_PORT": "0"])

            let rotate = try await wrong.run("keys", "rotate", "--tenant", "acme")
            #expect(rotate.status != 0)
            #expect(rotate.output.contains("BROKER_MASTER_KEY") && rotate.output.contains("master key does not open"), "\(rotate.output)")
            #expect(try await Self.signingKeys(database) == 1, "no key was sealed with the wrong master key")

            let served = try await wrong.run("serve")
            #expect(served.status != 0, "serve refused to start")
            #expect(served.output.contains("BROKER_MASTER_KEY"), "\(served.output.suffix(600))")

            // The right key works.
            #expect(try await cli.run("keys", "rotate", "--tenant", "acme").status == 0)
            #expect(try await Self.signingKeys(database) == 2)

            // A database without its check value (one set up before it existed): the key is
            // tested against a sealed signing key before the value is written.
            try await database.client.query("DELETE FROM master_key_check")
            #expect(try await wrong.run("keys", "rotate", "--tenant", "acme").status != 0)
            let rows = try await database.client.query("SELECT count(*)::int FROM master_key_check").collect()
            #expect(try rows.first?.decode(Int.self) == 0, "the wrong key wrote no check value")
            #expect(try await cli.run("keys", "rotate", "--tenant", "acme").status == 0)
            let written = try await database.client.query("SELECT count(*)::int FROM master_key_check").collect()
            #expect(try written.first?.decode(Int.self) == 1)
        }
    }
}
