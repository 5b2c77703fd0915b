import Foundation
import NIOCore
import NIOPosix
import PostgresNIO
import Testing
import TestSupport

@testable import Storage

/// `PostgresConnection.pipelined(_:then:)` writes its second statement right behind the first,
/// before the first one's answer (decision 0077): the commit confirmation of every write that
/// runs on its own. It is only a confirmation if PostgreSQL receives it after the write. Here the
/// second statement reads what the first wrote, so it finds the row only if it came second;
/// callers from every isolation the broker has (a plain task, an actor, a task pinned to another
/// event loop), many at once behind a barrier, on one pool of few connections.
@Suite struct PipelinedStatementTests {
    enum PipelineProbe: ProbeTable { static let table = "pipeline_probe" }
    typealias Insert = ProbeInsert<PipelineProbe>

    /// Sees the row only when PostgreSQL ran it after the insert.
    static func count(_ id: Int, on connection: PostgresConnection) async throws -> Int {
        try await connection.query("SELECT count(*)::int FROM pipeline_probe WHERE id = \(id)", logger: TestDatabase.logger)
            .collect().first?.decode(Int.self) ?? -1
    }

    /// Inserts `id` and counts it in one pipeline; returns the count. A prepared insert is
    /// pipelined only on a connection that has run it before (the product's rule, `Pipelining`):
    /// its first run on a connection goes alone.
    static func insertThenCount(_ id: Int, prepared: Bool, client: PostgresClient) async throws -> Int {
        let record = try #require(ConnectionScopes.of(client))
        let key = ObjectIdentifier(Insert.self)
        return try await client.withConnection { connection in
            if prepared && !record.hasPrepared(key, on: connection) {
                _ = try await connection.collect(Insert(id: -1 - id), logger: TestDatabase.logger)
                record.notePrepared(key, on: connection)
            }
            return try await connection.pipelined(
                {
                    if prepared {
                        _ = try await connection.collect(Insert(id: id), logger: TestDatabase.logger)
                    } else {
                        _ = try await connection.query("INSERT INTO pipeline_probe VALUES (\(id))", logger: TestDatabase.logger).collect()
                    }
                }, then: { try await count(id, on: connection) }
            ).1
        }
    }

    actor Caller {
        func insertThenCount(_ id: Int, prepared: Bool, client: PostgresClient) async throws -> Int {
            try await PipelinedStatementTests.insertThenCount(id, prepared: prepared, client: client)
        }
    }

    @Test(arguments: [false, true])
    func theSecondStatementAlwaysRunsAfterTheFirst(prepared: Bool) async throws {
        try await TestDatabase.withFresh(migrated: false) { database, _ in
            try await database.client.query("CREATE TABLE pipeline_probe (id int NOT NULL)", logger: TestDatabase.logger)
            let caller = Caller()
            let otherLoop = EventLoopTaskExecutor.executor(for: MultiThreadedEventLoopGroup.singleton.next())
            let rounds = 300
            let barrier = Barrier(count: rounds)
            let counts = try await withThrowingTaskGroup(of: Int.self) { group in
                for id in 0..<rounds {
                    let client = database.client
                    switch id % 3 {
                    case 0:
                        group.addTask {
                            await barrier.arrive()
                            return try await Self.insertThenCount(id, prepared: prepared, client: client)
                        }
                    case 1:
                        group.addTask {
                            await barrier.arrive()
                            return try await caller.insertThenCount(id, prepared: prepared, client: client)
                        }
                    default:
                        group.addTask(executorPreference: otherLoop) {
                            await barrier.arrive()
                            return try await Self.insertThenCount(id, prepared: prepared, client: client)
                        }
                    }
                }
                var counts: [Int] = []
                for try await count in group { counts.append(count) }
                return counts
            }
            #expect(counts.count == rounds)
            #expect(counts.allSatisfy { $0 == 1 }, "the second statement ran before the first: \(counts.filter { $0 != 1 }.count) times")
        }
    }

    /// Why a prepared statement goes alone the first time on a connection: PostgresNIO 1.33
    /// queues its preparation, and its execution only once the preparation is answered, behind
    /// a statement queued meanwhile. The follower then runs first. If this ever fails, PostgresNIO
    /// has changed and `Pipelining.prepared`'s first run alone may go.
    @Test func aFollowerOvertakesAStatementNotPreparedYet() async throws {
        try await TestDatabase.withFresh(migrated: false) { database, _ in
            try await database.client.query("CREATE TABLE pipeline_probe (id int NOT NULL)", logger: TestDatabase.logger)
            let count = try await database.client.withConnection { connection in
                try await connection.pipelined(
                    {
                        _ = try await connection.collect(Insert(id: 7), logger: TestDatabase.logger)
                    }, then: { try await Self.count(7, on: connection) }
                ).1
            }
            #expect(count == 0, "the follower ran after the unprepared insert: PostgresNIO keeps them in order now")
        }
    }
}
