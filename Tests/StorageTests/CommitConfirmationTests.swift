import Foundation
import PostgresNIO
import Testing
import TestSupport

@testable import Storage

/// A statement sent on its own runs in an implicit transaction that PostgreSQL commits at the
/// protocol's `Sync`, after it has sent the statement's rows and `CommandComplete`. A commit that
/// fails there (a backend terminated between the two, a deferred constraint) arrives after the
/// rows, and PostgresNIO has already handed them over as a success. A statement that writes is
/// confirmed committed before its rows are used (decision 0056); these tests make the commit
/// fail after `CommandComplete` with a deferred constraint trigger, every time.
@Suite struct CommitConfirmationTests {
    /// A table whose every insert (`onlyOdd`: with an odd id) is refused at commit, after the
    /// INSERT itself succeeded.
    private func refusingTable(_ database: Database, onlyOdd: Bool = false) async throws {
        for statement: PostgresQuery in [
            "CREATE TABLE commit_probe (id int NOT NULL)",
            PostgresQuery(
                unsafeSQL: """
                    CREATE FUNCTION commit_probe_refuse() RETURNS trigger LANGUAGE plpgsql
                    AS $$ BEGIN
                        IF \(onlyOdd ? "NEW.id % 2 = 1" : "true") THEN RAISE EXCEPTION 'refused at commit'; END IF;
                        RETURN NULL;
                    END $$
                    """),
            """
            CREATE CONSTRAINT TRIGGER commit_probe_refuse AFTER INSERT ON commit_probe
            DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION commit_probe_refuse()
            """,
            "GRANT SELECT, INSERT ON commit_probe TO broker_serve",
        ] {
            try await database.client.query(statement, logger: TestDatabase.logger)
        }
    }

    private func probeRows(_ database: Database) async throws -> Int {
        try await database.client.query("SELECT count(*) FROM commit_probe", logger: TestDatabase.logger)
            .collect().first?.decode(Int.self) ?? -1
    }

    @Test(arguments: [false, true])
    func aWriteWhoseCommitFailsIsAFailureNotItsRows(perTransaction: Bool) async throws {
        try await TestDatabase.withFreshServing(perTransaction: perTransaction) { admin, serving, _ in
            try await refusingTable(admin)
            // Again and again: the failed commit closes the connection at any moment around the
            // confirmation, which must end either way (a statement written to a closed connection
            // is never answered by PostgresNIO). A hang is turned into a failure by the deadline.
            for attempt in 1...25 {
                let error = await #expect(
                    throws: (any Error).self, "attempt \(attempt): the INSERT's rows came back although its commit failed"
                ) {
                    try await withDatabaseDeadline(.seconds(10)) {
                        try await TenantScope.acrossTenants(because: "a test table that holds no tenant's rows") {
                            try await serving.client.rows("INSERT INTO commit_probe VALUES (1) RETURNING id", logger: TestDatabase.logger)
                        }
                    }
                }
                #expect(!(error is DatabaseDeadlineExceeded), "attempt \(attempt): the write's answer never came")
                // Outside a transaction the connection closed under the confirmation: the
                // database is unavailable as far as the caller knows (503, retried).
                if !perTransaction { #expect(error?.isDatabaseUnavailable == true, "attempt \(attempt): \(String(reflecting: error))") }
            }
            #expect(try await probeRows(admin) == 0)
            // The pool goes on: the next statement gets a working connection.
            let answer = try await TenantScope.acrossTenants(because: "a test table that holds no tenant's rows") {
                try await serving.client.rows("SELECT count(*) FROM commit_probe", logger: TestDatabase.logger)
            }
            #expect(try answer.first?.decode(Int.self) == 0)
        }
    }

    /// The same through a prepared statement, whose confirmation is written right behind it
    /// once the connection has prepared it (decision 0077). Only odd ids are refused: each
    /// refused insert follows one that committed (and prepared the statement on the
    /// connection the pool hands out again), so it is written with its confirmation behind it.
    enum CommitProbe: ProbeTable { static let table = "commit_probe" }

    @Test func aPreparedWriteWhoseCommitFailsIsAFailureNotItsRows() async throws {
        try await TestDatabase.withFreshServing(perTransaction: false) { admin, serving, _ in
            try await refusingTable(admin, onlyOdd: true)
            for attempt in 1...25 {
                let committed = try await TenantScope.acrossTenants(because: "a test table that holds no tenant's rows") {
                    try await serving.client.rows(ProbeInsert<CommitProbe>(id: 2 * attempt), logger: TestDatabase.logger)
                }
                #expect(committed == [2 * attempt])
                let error = await #expect(
                    throws: (any Error).self, "attempt \(attempt): the INSERT's rows came back although its commit failed"
                ) {
                    try await withDatabaseDeadline(.seconds(10)) {
                        try await TenantScope.acrossTenants(because: "a test table that holds no tenant's rows") {
                            try await serving.client.rows(ProbeInsert<CommitProbe>(id: 2 * attempt + 1), logger: TestDatabase.logger)
                        }
                    }
                }
                #expect(!(error is DatabaseDeadlineExceeded), "attempt \(attempt): the write's answer never came")
                #expect(error?.isDatabaseUnavailable == true, "attempt \(attempt): \(String(reflecting: error))")
            }
            #expect(try await probeRows(admin) == 25)
        }
    }

    @Test func aReadIsNotConfirmedAndAWriteIs() {
        #expect(!StatementEffect.mayWrite("SELECT id FROM accounts WHERE tenant_id = $1"))
        #expect(!StatementEffect.mayWrite("  select count(*) from sessions"))
        #expect(!StatementEffect.mayWrite("WITH x AS (SELECT 1) SELECT * FROM x"))
        #expect(!StatementEffect.mayWrite("SELECT updated_at, inserted FROM deleted_things"))
        #expect(StatementEffect.mayWrite("INSERT INTO t VALUES ($1)"))
        #expect(StatementEffect.mayWrite("WITH gone AS (DELETE FROM t RETURNING id) SELECT count(*) FROM gone"))
        #expect(StatementEffect.mayWrite("SELECT id FROM t FOR UPDATE SKIP LOCKED"))
        #expect(StatementEffect.mayWrite("with u as (update t set a = 1 returning a) select a from u"))
        #expect(StatementEffect.mayWrite("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DO NOTHING"))
        #expect(StatementEffect.mayWrite("SELECT pg_notify('broker', $1)"))
        #expect(StatementEffect.mayWrite("SELECT nextval('s')"))
        #expect(StatementEffect.mayWrite("TRUNCATE t"))
        #expect(StatementEffect.mayWrite(""))
    }
}
