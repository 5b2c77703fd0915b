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

    /// `broker serve` with `cli`'s environment: its exit, or nil when it still ran after 60 s
    /// (then it is stopped).
    static func serveExit(_ cli: BrokerCLI) async throws -> BrokerCLI.Result? {
        let running = try cli.spawn(["serve"])
        return try await withThrowingTaskGroup(of: BrokerCLI.Result?.self) { group in
            group.addTask {
                let result = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ProcessRunner.Result, any Error>) in
                    Thread.detachNewThread { continuation.resume(with: Swift.Result { try ProcessRunner.wait(running) }) }
                }
                return BrokerCLI.Result(status: result.status, output: result.output)
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))  // a bound on a hang, not a wait for an event
                running.signal(SIGKILL)
                return nil
            }
            let first = try await group.next() ?? nil
            running.signal(SIGKILL)
            group.cancelAll()
            return first
        }
    }

    @Test func aWrongMasterKeyIsRefusedBeforeAnythingIsServedOrWritten() async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url, extra: ["BROKER_PORT": "0"])
            #expect(try await cli.run("tenant", "create", "acme").status == 0)
            let wrong = BrokerCLI(databaseURL: url, extra: ["BROKER_MASTER_KEY": MasterKey.generate().base64, "BROKER_PORT": "0"])

            let rotate = try await wrong.run("keys", "rotate", "--tenant", "acme")
            #expect(rotate.status != 0)
            #expect(rotate.output.contains("BROKER_MASTER_KEY") && rotate.output.contains("master key does not open"), "\(rotate.output)")
            #expect(try await Self.signingKeys(database) == 1, "no key was sealed with the wrong master key")

            let served = try await Self.serveExit(wrong)
            #expect(served != nil, "serve refused to start")
            #expect(served?.status != 0)
            #expect(served?.output.contains("BROKER_MASTER_KEY") == true, "\(served?.output.suffix(600) ?? "")")

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
