import Crypto
import Foundation
import PostgresNIO
import Storage
import TestSupport
import Testing

/// `broker import users|list|show` (issue 24) as an operator runs them: the broker's JSON lines,
/// idempotent runs, dry runs, conflicts, bad lines with their line numbers, `--max-errors`,
/// and a job killed at a random point that resumes with no duplicates and no gaps.
@Suite struct ImportCLITests {
    static let team = "TEAM000001"
    static let facebookApp = "5550001"

    /// A tenant `acme` with an Apple team, Google and Facebook, and a folder for files.
    static func withTenant(_ body: @Sendable (BrokerCLI, Database, String) async throws -> Void) async throws {
        try await TestDatabase.withFresh { database, url in
            let cli = BrokerCLI(databaseURL: url)
            let folder = NSTemporaryDirectory() + "import-\(UUID().uuidString.prefix(8))/"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            try P256.Signing.PrivateKey().pemRepresentation.write(toFile: folder + "key.p8", atomically: true, encoding: .utf8)
            try "secret-of-the-app".write(toFile: folder + "fb.secret", atomically: true, encoding: .utf8)
            try await configure(cli, "acme", folder)
            try await body(cli, database, folder)
        }
    }

    /// Creates tenant `slug` with the Apple team, Google and Facebook.
    static func configure(_ cli: BrokerCLI, _ slug: String, _ folder: String) async throws {
        #expect(try await cli.run("tenant", "create", slug).status == 0)
        let steps: [[String]] = [
            [
                "apple", "team", "set", "--tenant", slug, "--team-id", team, "--key-id", "KEY0000001", "--private-key-file",
                folder + "key.p8",
            ],
            ["apple", "group", "add", "--tenant", slug, "--primary-app-id", "com.\(slug).app"],
            [
                "provider", "enable", "google", "--tenant", slug, "--client-id", "111-web.apps.googleusercontent.com", "--platforms",
                "android,web",
            ],
            [
                "provider", "enable", "facebook", "--tenant", slug, "--app-id", facebookApp, "--app-secret-file", folder + "fb.secret",
                "--platforms", "android,web",
            ],
        ]
        for step in steps {
            let result = try await cli.run(step)
            #expect(result.status == 0, "\(step): \(result.output)")
        }
    }

    static func line(_ id: String, email: String? = nil, _ identities: [String]) -> String {
        let mail = email.map { ",\"email\":\"\($0)\",\"email_verified\":true" } ?? ""
        return "{\"external_id\":\"\(id)\"\(mail),\"identities\":[\(identities.joined(separator: ","))]}"
    }

    static func google(_ subject: String) -> String { "{\"provider\":\"google\",\"subject\":\"\(subject)\"}" }
    static func apple(_ subject: String) -> String { "{\"provider\":\"apple\",\"subject\":\"\(subject)\"}" }
    static func facebook(_ subject: String) -> String { "{\"provider\":\"facebook\",\"subject\":\"\(subject)\"}" }

    static func count(_ database: Database, _ sql: String) async throws -> Int {
        var total = 0
        for try await value in try await database.client.query(PostgresQuery(unsafeSQL: sql)).decode(Int.self) { total = value }
        return total
    }

    /// Runs `import` (a spawned import of the test's database) and holds it, mid-file, at the
    /// commit of the first batch that brings its job to `records` or more: a trigger of this
    /// test makes that commit wait on a lock the test holds. `whilePaused` runs once the import
    /// waits there (it signals or kills the process); the lock is let go after it. Without the
    /// hold, a loaded machine let imports run to their end before the test's signal arrived.
    /// `pg_locks` is the cluster's: only waiters in this test's database count (another test's
    /// paused import once made this one signal its process before it had set its handlers:
    /// exit 143, no output).
    static func pausing(
        _ database: Database, atRecords records: Int, _ spawn: () throws -> ProcessRunner.Running,
        whilePaused: (ProcessRunner.Running) async throws -> Void
    ) async throws -> ProcessRunner.Result {
        _ = try await database.client.query(
            """
            CREATE OR REPLACE FUNCTION test_import_pause() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.records >= (SELECT at FROM test_import_pause_at) THEN
                    PERFORM pg_advisory_xact_lock_shared(424242);
                END IF;
                RETURN NEW;
            END $$
            """)
        _ = try await database.client.query("CREATE TABLE IF NOT EXISTS test_import_pause_at (at int NOT NULL)")
        _ = try await database.client.query("DELETE FROM test_import_pause_at")
        _ = try await database.client.query("INSERT INTO test_import_pause_at VALUES (\(records))")
        _ = try await database.client.query(
            "CREATE OR REPLACE TRIGGER test_import_pause BEFORE UPDATE ON import_jobs FOR EACH ROW EXECUTE FUNCTION test_import_pause()")
        return try await database.client.withConnection { connection in
            _ = try await connection.query("SELECT pg_advisory_lock(424242)", logger: TestDatabase.logger)
            let running = try spawn()
            let paused = try await ServedHTTP.within(.seconds(120)) {
                let rows = try await database.client.query(
                    """
                    SELECT count(*)::int8 FROM pg_locks WHERE locktype = 'advisory' AND objid = 424242 AND NOT granted
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    """)
                for try await waiting in rows.decode(Int.self) { return waiting > 0 }
                return false
            }
            #expect(paused != nil, "the import never reached \(records) records")
            try await whilePaused(running)
            _ = try await connection.query("SELECT pg_advisory_unlock(424242)", logger: TestDatabase.logger)
            return try await onOwnThread { try ProcessRunner.wait(running) }
        }
    }

    static func importJSON(_ cli: BrokerCLI, _ file: String, _ extra: [String] = []) async throws -> (
        status: Int32, job: [String: Any], output: String
    ) {
        let result = try await cli.run(["import", "users", "--tenant", "acme", "--from", "jsonl", "--file", file, "--json"] + extra)
        let job = (try? result.object()) ?? [:]
        return (result.status, job, result.output)
    }

    @Test func aFileImportsOnceAndAgainChangesNothing() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "users.jsonl"
            let lines = [
                Self.line("u-1", email: "ada@example.com", [Self.google("g-1"), Self.facebook("f-1"), Self.apple("001.a")]),
                Self.line("u-2", [Self.apple("001.b")]),
                "",
                Self.line("u-3", [Self.google("g-3")]),
            ]
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)

            let dry = try await Self.importJSON(cli, file, ["--dry-run"])
            #expect(dry.status == 0, "\(dry.output)")
            #expect(dry.job["created"] as? Int == 3 && dry.job["dry_run"] as? Bool == true)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 0, "a dry run writes no account")

            let first = try await Self.importJSON(cli, file)
            #expect(first.status == 0, "\(first.output)")
            #expect(
                first.job["created"] as? Int == 3 && first.job["identities"] as? Int == 5 && first.job["status"] as? String == "completed")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts WHERE external_id IS NOT NULL") == 3)
            // Each identity under the tenant's scope: Apple's team, Facebook's app id, Google's none.
            let scopes = try await Self.count(
                database,
                """
                SELECT count(*)::int8 FROM identities WHERE (provider = 'apple' AND provider_scope = '\(Self.team)')
                    OR (provider = 'facebook' AND provider_scope = '\(Self.facebookApp)') OR (provider = 'google' AND provider_scope = '')
                """)
            #expect(scopes == 5)
            #expect(
                try await Self.count(
                    database,
                    "SELECT count(*)::int8 FROM accounts WHERE external_id = 'u-1' AND email = 'ada@example.com' AND email_verified") == 1)
            // One event for the whole job, none per account.
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM events_outbox WHERE event_type = 'import.completed'") == 1)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM events_outbox WHERE event_type = 'account.created'") == 0)

            let again = try await Self.importJSON(cli, file)
            #expect(again.status == 0, "\(again.output)")
            #expect(again.job["unchanged"] as? Int == 3 && again.job["created"] as? Int == 0)
            #expect(again.job["job_id"] as? String != first.job["job_id"] as? String, "a finished file runs as a new job")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM identities") == 5)

            // A record gains the identities it lacks and never loses one.
            try (Self.line("u-2", [Self.google("g-2")]) + "\n").write(toFile: folder + "more.jsonl", atomically: true, encoding: .utf8)
            let more = try await Self.importJSON(cli, folder + "more.jsonl")
            #expect(more.job["updated"] as? Int == 1, "\(more.output)")
            #expect(
                try await Self.count(
                    database, "SELECT count(*)::int8 FROM identities i JOIN accounts a ON a.id = i.account_id WHERE a.external_id = 'u-2'")
                    == 2)

            let list = try await cli.run("import", "list", "--tenant", "acme")
            #expect(list.status == 0 && list.output.contains("completed") && list.output.contains("(dry run)"), "\(list.output)")
            let show = try await cli.run("import", "show", try #require(first.job["job_id"] as? String))
            #expect(show.status == 0 && show.output.contains("3 created"), "\(show.output)")
        }
    }

    @Test func conflictsBadLinesAndSkipsAreReportedWithTheirLines() async throws {
        try await Self.withTenant { cli, database, folder in
            try (Self.line("first", [Self.google("g-taken")]) + "\n").write(toFile: folder + "a.jsonl", atomically: true, encoding: .utf8)
            #expect(try await Self.importJSON(cli, folder + "a.jsonl").status == 0)
            let file = folder + "b.jsonl"
            let lines = [
                Self.line("second", [Self.google("g-new"), Self.google("g-taken")]),  // 1: conflict, nothing written
                "{not json",  // 2
                Self.line("third", [Self.apple("001.c")]),  // 3: fine
                // 4
                "{\"external_id\":\"fourth\",\"email\":\"not-an-email\",\"identities\":[{\"provider\":\"google\",\"subject\":\"g-4\"}]}",
                Self.line("fifth", ["{\"provider\":\"oidc.line\",\"subject\":\"U1\"}"]),  // 5: unmapped provider
                Self.line("sixth", ["{\"provider\":\"facebook\",\"subject\":\"f-6\",\"provider_scope\":\"999\"}"]),  // 6: another app
            ]
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let result = try await Self.importJSON(cli, file)
            #expect(result.status == 0, "\(result.output)")
            #expect(result.job["created"] as? Int == 1 && result.job["conflicts"] as? Int == 1 && result.job["errors"] as? Int == 4)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM identities WHERE subject = 'g-new'") == 0, "all or nothing")
            let reported = try String(contentsOfFile: file + ".errors.jsonl", encoding: .utf8).split(separator: "\n").map {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
            }
            #expect(reported.compactMap { $0["line"] as? Int } == [1, 2, 4, 5, 6])
            #expect(reported.first?["kind"] as? String == "conflict" && reported.first?["external_id"] as? String == "second")
            #expect((reported[3]["reason"] as? String)?.contains("--map-provider oidc.line=") == true, "\(reported[3])")
            #expect((reported[4]["reason"] as? String)?.contains("999") == true, "\(reported[4])")
            #expect(!(String(data: try JSONSerialization.data(withJSONObject: reported), encoding: .utf8) ?? "").contains("not-an-email"))
        }
    }

    @Test func maxErrorsStopsAResumableJob() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "bad.jsonl"
            var lines = (0..<10).map { Self.line("ok-\($0)", [Self.google("g-ok-\($0)")]) }
            lines.insert("[1, 2]", at: 3)
            lines.insert("{\"external_id\": \"\"}", at: 6)
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let stopped = try await Self.importJSON(cli, file, ["--max-errors", "1", "--batch-size", "2"])
            #expect(stopped.status == 1, "\(stopped.output)")
            #expect(stopped.output.contains("--resume"), "\(stopped.output)")
            let jobs = try await cli.run("import", "list", "--tenant", "acme", "--json").array()
            let job = try #require(jobs.first)
            #expect(job["status"] as? String == "stopped" && job["errors"] as? Int == 1)
            let id = try #require(job["job_id"] as? String)
            // Resumed with a higher limit: it goes on from the batch after the stop.
            let resumed = try await Self.importJSON(cli, file, ["--resume", id, "--max-errors", "5"])
            #expect(resumed.status == 0, "\(resumed.output)")
            #expect(resumed.job["job_id"] as? String == id && resumed.job["created"] as? Int == 10 && resumed.job["errors"] as? Int == 2)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 10)
            let errorLines = try String(contentsOfFile: file + ".errors.jsonl", encoding: .utf8).split(separator: "\n")
            #expect(errorLines.count == 2, "no line twice: \(errorLines)")
            let finished = try await Self.importJSON(cli, file, ["--resume", id])
            #expect(finished.status == 1 && finished.output.contains("completed"), "\(finished.output)")
        }
    }

    @Test func aKilledImportResumesWithNoDuplicatesAndNoGaps() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "many.jsonl"
            let total = 3_000
            var text = ""
            for n in 0..<total {
                // Every 97th line is bad: errors interleave with batches.
                text += n % 97 == 50 ? "{oops\n" : Self.line("p-\(n)", [Self.google("g-\(n)"), Self.apple("001.\(n)")]) + "\n"
            }
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let bad = (0..<total).filter { $0 % 97 == 50 }.count
            var kills = 0
            for _ in 0..<2 {
                // Kill without warning, mid-commit, once a random number of records has committed.
                let target = Int.random(in: 100...(total / 2))
                _ = try await Self.pausing(database, atRecords: target) {
                    try cli.spawn(["import", "users", "--tenant", "acme", "--from", "jsonl", "--file", file, "--batch-size", "50"])
                } whilePaused: { running in
                    running.signal(SIGKILL)
                }
                kills += 1
            }
            let last = try await Self.importJSON(cli, file, ["--batch-size", "50"])
            #expect(last.status == 0, "\(last.output)")
            #expect(last.job["records"] as? Int == total, "\(last.job)")
            #expect(last.job["created"] as? Int == total - bad && last.job["errors"] as? Int == bad)
            #expect(
                try await Self.count(database, "SELECT count(*)::int8 FROM import_jobs WHERE NOT dry_run") == 1,
                "one job, resumed \(kills) times")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == total - bad)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM identities") == 2 * (total - bad))
            let errorLines = try String(contentsOfFile: file + ".errors.jsonl", encoding: .utf8).split(separator: "\n")
            #expect(errorLines.count == bad, "each bad line once")
        }
    }
    /// Issue 39 D11: SIGTERM or SIGINT in the middle of an import commits the batch in flight,
    /// begins nothing after it, records the job as stopped where it is, and exits 1 naming the
    /// resume; the resume completes the file with no duplicates and no gaps.
    @Test func aStoppedImportCommitsItsBatchInFlightAndResumes() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "stopped.jsonl"
            let total = 3_000
            try (0..<total).map { Self.line("s-\($0)", [Self.google("sg-\($0)")]) }.joined(separator: "\n").appending("\n")
                .write(toFile: file, atomically: true, encoding: .utf8)
            for signal in [SIGTERM, SIGINT] {
                // Signalled while a batch waits to commit: that batch commits, nothing after it.
                let done = try await database.client.query("SELECT coalesce(max(records), 0)::int8 FROM import_jobs")
                var before = 0
                for try await value in done.decode(Int.self) { before = value }
                let stopped: ProcessRunner.Result? = try await Self.pausing(database, atRecords: before + 200) {
                    try cli.spawn(["import", "users", "--tenant", "acme", "--from", "jsonl", "--file", file, "--batch-size", "50"])
                } whilePaused: { running in
                    running.signal(signal)
                }
                let result = try #require(stopped)
                #expect(result.status == 1, "\(result.output.suffix(800))")
                #expect(
                    result.output.contains("stopped by the operator") && result.output.contains("--resume"), "\(result.output.suffix(800))")
                let rows = try await database.client.query("SELECT status, records, created FROM import_jobs")
                for try await (status, records, created) in rows.decode((String, Int, Int).self) {
                    #expect(status == "stopped" && records < total, "\(status) \(records)")
                    // Nothing half-written: the committed batches are the accounts there are.
                    #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == created)
                }
            }
            let last = try await Self.importJSON(cli, file, ["--batch-size", "50"])
            #expect(last.status == 0, "\(last.output)")
            #expect(last.job["records"] as? Int == total && last.job["created"] as? Int == total, "\(last.job)")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM import_jobs WHERE NOT dry_run") == 1)
            #expect(try await Self.count(database, "SELECT count(DISTINCT external_id)::int8 FROM accounts") == total)
        }
    }

    /// Two batches are on their way at once (decision 0061): the later one reads before the
    /// earlier one commits. Records that meet a neighbour batch's keys (the same external id
    /// again, an identity another record holds) end as they would one batch at a time.
    @Test func neighbouringBatchesMeetingEachOthersKeysEndAsOneAtATime() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "overlap.jsonl"
            var lines: [String] = []
            var conflictLines: [Int] = []
            for n in 0..<30 {
                lines.append(Self.line("r-\(n)", [Self.google("g-\(n)")]))
                // The account just before again, with an identity more: updated.
                if n % 2 == 1 { lines.append(Self.line("r-\(n - 1)", [Self.google("g-\(n - 1)"), Self.google("h-\(n - 1)")])) }
                // Another external id with r-n's identity: a conflict.
                if n % 3 == 0 {
                    lines.append(Self.line("c-\(n)", [Self.google("g-\(n)")]))
                    conflictLines.append(lines.count)
                }
            }
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            // A pool of one connection: the batches take turns on it (no second one to wait for).
            var single = cli
            single.environment["BROKER_DB_POOL_SIZE"] = "1"
            for (size, cli) in [("2", cli), ("3", cli), ("2", single)] {
                try await database.client.query("DELETE FROM identities")
                try await database.client.query("DELETE FROM accounts")
                try await database.client.query("DELETE FROM import_jobs")
                let result = try await Self.importJSON(cli, file, ["--batch-size", size])
                #expect(result.status == 0, "\(result.output)")
                #expect(result.job["records"] as? Int == lines.count, "batch size \(size): \(result.job)")
                #expect(result.job["created"] as? Int == 30 && result.job["updated"] as? Int == 15, "batch size \(size): \(result.job)")
                #expect(result.job["conflicts"] as? Int == 10 && result.job["errors"] as? Int == 0, "batch size \(size): \(result.job)")
                #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 30)
                #expect(try await Self.count(database, "SELECT count(*)::int8 FROM identities") == 45)
                #expect(
                    try await Self.count(
                        database,
                        "SELECT count(*)::int8 FROM identities i JOIN accounts a ON a.id = i.account_id WHERE a.external_id LIKE 'c-%'")
                        == 0)
                let reported = try String(contentsOfFile: file + ".errors.jsonl", encoding: .utf8).split(separator: "\n").map {
                    try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
                }
                #expect(reported.compactMap { $0["line"] as? Int } == conflictLines, "batch size \(size): each conflict once, in order")
            }
        }
    }

    @Test func aRollbackRemovesWhatItsJobCreatedAndKeepsWhoSignedInSince() async throws {
        try await Self.withTenant { cli, database, folder in
            try (Self.line("u-0", [Self.google("g-0")]) + "\n").write(toFile: folder + "earlier.jsonl", atomically: true, encoding: .utf8)
            #expect(try await Self.importJSON(cli, folder + "earlier.jsonl").status == 0)
            let lines = [
                Self.line("u-0", [Self.google("g-0"), Self.google("g-0b")]), Self.line("u-1", [Self.google("g-1")]),
                Self.line("u-2", [Self.google("g-2")]),
            ]
            try (lines.joined(separator: "\n") + "\n").write(toFile: folder + "later.jsonl", atomically: true, encoding: .utf8)
            let later = try await Self.importJSON(cli, folder + "later.jsonl")
            #expect(later.job["created"] as? Int == 2 && later.job["updated"] as? Int == 1, "\(later.output)")
            let id = try #require(later.job["job_id"] as? String)
            // u-1 signs in after the import.
            try await database.client.query("UPDATE accounts SET last_seen_at = now() WHERE external_id = 'u-1'")

            let dry = try await cli.run("import", "rollback", id, "--dry-run", "--json")
            #expect(dry.status == 0, "\(dry.output)")
            let planned = try dry.object()
            #expect(planned["accounts_removed"] as? Int == 1 && planned["identities_removed"] as? Int == 2)
            #expect(planned["accounts_kept"] as? Int == 1 && planned["identities_kept"] as? Int == 1)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM identities") == 4, "a dry run changes nothing")

            let done = try await cli.run("import", "rollback", id, "--tenant", "acme")
            #expect(done.status == 0 && done.output.contains("Kept 1 accounts") && done.output.contains("--force"), "\(done.output)")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts WHERE external_id IN ('u-0', 'u-1')") == 2)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM identities WHERE subject IN ('g-0', 'g-1')") == 2)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM identities WHERE subject IN ('g-0b', 'g-2')") == 0)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM import_jobs WHERE status = 'rolled_back'") == 1)

            let forced = try await cli.run("import", "rollback", id, "--force", "--json")
            #expect(try forced.object()["accounts_removed"] as? Int == 1)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 1, "only u-0, from the earlier job")
        }
    }

    @Test func anExportImportsIntoAFreshTenantAsTheSameAccounts() async throws {
        try await Self.withTenant { cli, database, folder in
            let lines = [
                "{\"external_id\":\"e-1\",\"email\":\"ada@example.com\",\"email_verified\":true,\"name\":{\"given_name\":\"Ada\",\"family_name\":\"Lovelace\"},"
                    + "\"created_at\":\"2021-03-04T05:06:07.123456Z\",\"identities\":[\(Self.google("g-e1")),\(Self.apple("001.e1"))]}",
                "{\"external_id\":\"e-2\",\"status\":\"disabled\",\"identities\":[\(Self.facebook("f-e2"))]}",
            ]
            try (lines.joined(separator: "\n") + "\n").write(toFile: folder + "in.jsonl", atomically: true, encoding: .utf8)
            #expect(try await Self.importJSON(cli, folder + "in.jsonl").status == 0)
            let exported = try await cli.run("export", "users", "--tenant", "acme", "--out", folder + "out.jsonl", "--json")
            #expect(try exported.status == 0 && exported.object()["accounts"] as? Int == 2, "\(exported.output)")
            let first = try String(contentsOfFile: folder + "out.jsonl", encoding: .utf8)
            #expect(!first.contains("refresh_token") && first.contains("\"created_at\":\"2021-03-04T05:06:07.123456Z\""), "\(first)")
            let mode = try FileManager.default.attributesOfItem(atPath: folder + "out.jsonl")[.posixPermissions] as? Int
            #expect(mode == 0o600)

            try await Self.configure(cli, "fresh", folder)
            let imported = try await cli.run([
                "import", "users", "--tenant", "fresh", "--from", "jsonl", "--file", folder + "out.jsonl", "--json",
            ])
            #expect(try imported.status == 0 && imported.object()["created"] as? Int == 2, "\(imported.output)")
            #expect(try await cli.run("export", "users", "--tenant", "fresh", "--out", folder + "again.jsonl").status == 0)
            let again = try String(contentsOfFile: folder + "again.jsonl", encoding: .utf8)
            #expect(Set(first.split(separator: "\n")) == Set(again.split(separator: "\n")), "\(first)\n\(again)")
            // The two tenants hold the same Apple and Facebook ids apart.
            #expect(try await Self.count(database, "SELECT count(DISTINCT tenant_id)::int8 FROM identities WHERE subject = '001.e1'") == 2)
        }
    }

    @Test func aDatabaseFailureMidJobLeavesNoHalfBatchAndTheRunContinuesLater() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "users.jsonl"
            try
                ((0..<30).map { Self.line("d-\($0)", [Self.google("g-d-\($0)"), Self.apple("001.d\($0)")]) }.joined(separator: "\n") + "\n")
                .write(toFile: file, atomically: true, encoding: .utf8)
            // The identities table goes away: every batch fails after reading its keys.
            try await database.client.query("ALTER TABLE identities RENAME TO identities_away")
            let failed = try await Self.importJSON(cli, file, ["--batch-size", "10"])
            try await database.client.query("ALTER TABLE identities_away RENAME TO identities")
            #expect(
                failed.status == 1 && failed.output.contains("import_interrupted") && failed.output.contains("--resume"), "\(failed.output)"
            )
            #expect(!failed.output.contains("g-d-"), "no value of the batch in the message")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 0, "no half-written batch")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM import_jobs WHERE status = 'running' AND records = 0") == 1)

            let again = try await Self.importJSON(cli, file, ["--batch-size", "10"])
            #expect(again.status == 0 && again.job["created"] as? Int == 30, "\(again.output)")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM import_jobs") == 1, "the same job went on")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM identities") == 60)
        }
    }

    // MARK: Issue 39 F17

    /// People sign in while their import runs (issue 39 F17 (a)): a sign-in commits an identity
    /// of a batch after the batch looked its keys up and before it inserts them. A trigger of
    /// this test makes exactly that happen, eight times, each on another connection (dblink) that
    /// commits on its own: the batch's insert meets the committed identity, as it meets a real
    /// sign-in's. The batches (of 4, on two connections) are tried again until they settle:
    /// each record met that way is a conflict, the others are created, and the job completes.
    /// Three tries were the limit before: the job stopped with import_interrupted (23505).
    @Test func signInsOfTheSamePeopleBetweenABatchsLookupAndItsInsertEndAsConflicts() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "race.jsonl"
            let total = 12, raced = 8
            try ((0..<total).map { Self.line("s-\($0)", [Self.google("g-s-\($0)")]) }.joined(separator: "\n") + "\n")
                .write(toFile: file, atomically: true, encoding: .utf8)
            try await database.client.query("CREATE EXTENSION IF NOT EXISTS dblink")
            try await database.client.query("CREATE TABLE test_race (remaining int NOT NULL)")
            try await database.client.query("INSERT INTO test_race VALUES (\(raced))")
            // Before an imported identity row goes in: while the test still owes sign-ins, one
            // commits, on a connection of its own, a new account with that very identity. The
            // count goes down in the same remote transaction, so each sign-in happens once.
            try await database.client.query(
                """
                CREATE FUNCTION test_race_sign_in() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF (SELECT remaining FROM test_race) > 0 THEN
                        PERFORM dblink_exec(
                            format('dbname=%s host=%s user=postgres', current_database(),
                                split_part(current_setting('unix_socket_directories'), ',', 1)),
                            format($q$
                                WITH turn AS (UPDATE test_race SET remaining = remaining - 1 WHERE remaining > 0 RETURNING 1),
                                account AS (INSERT INTO accounts (id, tenant_id) SELECT gen_random_uuid(), %L::uuid FROM turn RETURNING id)
                                INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject)
                                SELECT gen_random_uuid(), %L::uuid, account.id, %L, %L, %L FROM account
                                $q$, NEW.tenant_id, NEW.tenant_id, NEW.provider, NEW.provider_scope, NEW.subject));
                    END IF;
                    RETURN NEW;
                END $$
                """)
            try await database.client.query(
                """
                CREATE TRIGGER test_race_sign_in BEFORE INSERT ON identities FOR EACH ROW
                WHEN (NEW.import_job_id IS NOT NULL) EXECUTE FUNCTION test_race_sign_in()
                """)
            let result = try await Self.importJSON(cli, file, ["--batch-size", "4"])
            #expect(result.status == 0, "\(result.output)")
            #expect(result.job["status"] as? String == "completed", "\(result.output)")
            #expect(try await Self.count(database, "SELECT remaining::int8 FROM test_race") == 0, "every sign-in of the test happened")
            #expect(result.job["records"] as? Int == total, "\(result.job)")
            #expect(result.job["conflicts"] as? Int == raced && result.job["created"] as? Int == total - raced, "\(result.job)")
            // Each identity once, with the account of whoever wrote it first.
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM identities WHERE subject LIKE 'g-s-%'") == total)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts WHERE external_id LIKE 's-%'") == total - raced)
            let reported = try String(contentsOfFile: file + ".errors.jsonl", encoding: .utf8).split(separator: "\n")
            #expect(reported.count == raced && reported.allSatisfy { $0.contains("\"kind\":\"conflict\"") }, "\(reported)")
        }
    }

    /// A dry run decides as the real run does across batches (issue 39 F17 (b)): an external id
    /// or an identity that an earlier batch would have written is met by a later one, although
    /// the dry run wrote nothing. Before, the same person twice in two batches was created twice.
    @Test func aDryRunDecidesAcrossBatchesAsTheRealRunDoes() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "overlap.jsonl"
            var lines: [String] = []
            for n in 0..<30 {
                lines.append(Self.line("r-\(n)", [Self.google("g-\(n)")]))
                if n % 2 == 1 { lines.append(Self.line("r-\(n - 1)", [Self.google("g-\(n - 1)"), Self.google("h-\(n - 1)")])) }
                if n % 3 == 0 { lines.append(Self.line("c-\(n)", [Self.google("g-\(n)")])) }
            }
            // The first person again at the end, far from the first batch: unchanged, and with
            // another's identity, a conflict.
            lines.append(Self.line("r-0", [Self.google("g-0")]))
            lines.append(Self.line("late", [Self.google("g-5")]))
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let keys = ["records", "created", "updated", "unchanged", "conflicts", "errors"]
            var dryRuns: [[Int]] = []
            for size in ["2", "3", "5", "2000"] {
                let dry = try await Self.importJSON(cli, file, ["--dry-run", "--batch-size", size])
                #expect(dry.status == 0, "\(dry.output)")
                dryRuns.append(keys.map { dry.job[$0] as? Int ?? -1 })
            }
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 0, "a dry run writes no account")
            let real = try await Self.importJSON(cli, file, ["--batch-size", "2"])
            #expect(real.status == 0, "\(real.output)")
            let counts = keys.map { real.job[$0] as? Int ?? -1 }
            #expect(counts == [lines.count, 30, 15, 1, 11, 0], "\(real.job)")
            for (dry, size) in zip(dryRuns, ["2", "3", "5", "2000"]) {
                #expect(dry == counts, "dry run with batches of \(size): \(dry), the real run: \(counts)")
            }
        }
    }

    /// A line over 1 MiB is an error of its own, with its line number, and the import goes on
    /// (issue 39 F17 (c)); before, it interrupted the job and the lines before it in its batch
    /// were never imported.
    @Test func aLineOverOneMebibyteIsReportedAndTheImportGoesOn() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "long.jsonl"
            let long =
                "{\"external_id\":\"big\",\"pad\":\"\(String(repeating: "x", count: 1 << 20))\",\"identities\":[\(Self.google("g-big"))]}"
            let lines = [Self.line("l-1", [Self.google("g-l-1")]), long, Self.line("l-3", [Self.google("g-l-3")])]
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let result = try await Self.importJSON(cli, file)
            #expect(result.status == 0, "\(result.output.prefix(2000))")
            #expect(
                result.job["status"] as? String == "completed" && result.job["created"] as? Int == 2 && result.job["errors"] as? Int == 1)
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts WHERE external_id IN ('l-1', 'l-3')") == 2)
            let reported = try String(contentsOfFile: file + ".errors.jsonl", encoding: .utf8).split(separator: "\n").map {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
            }
            #expect(reported.count == 1 && reported.first?["line"] as? Int == 2, "\(reported)")
            #expect((reported.first?["reason"] as? String)?.contains("longer than 1 MiB") == true, "\(reported)")
        }
    }

    static func firebaseUser(_ id: String) -> String {
        "{\"localId\": \"\(id)\", \"providerUserInfo\": [{\"providerId\": \"google.com\", \"rawId\": \"g-\(id)\"}]}"
    }

    /// A Firebase export cut off in the middle (issue 39 F17 (c)): the users before the cut are
    /// imported, the job stops (not left running) with an error naming the byte where the file
    /// ends, running it again says the same, and the whole export continues the job.
    @Test func aTruncatedFirebaseExportImportsWhatComesBeforeAndStopsAtTheByteWhereItEnds() async throws {
        try await Self.withTenant { cli, database, folder in
            let whole = "{\"users\": [\n" + (1...5).map { Self.firebaseUser("fb-\($0)") }.joined(separator: ",\n") + "\n]}\n"
            let cut = String(whole.prefix(whole.count - 40))  // inside the fifth user
            let file = folder + "users.json"
            try cut.write(toFile: file, atomically: true, encoding: .utf8)
            let size = cut.utf8.count
            let first = try await cli.run([
                "import", "users", "--tenant", "acme", "--from", "firebase", "--file", file, "--batch-size", "2",
            ])
            #expect(first.status == 1, "\(first.output)")
            #expect(
                first.output.contains("byte \(size)") && first.output.contains("cut off") && first.output.contains("--resume"),
                "\(first.output)")
            let jobs = try await cli.run("import", "list", "--tenant", "acme", "--json").array()
            let job = try #require(jobs.first)
            #expect(job["status"] as? String == "stopped" && job["created"] as? Int == 4, "\(job)")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 4)
            let id = try #require(job["job_id"] as? String)

            let again = try await cli.run([
                "import", "users", "--tenant", "acme", "--from", "firebase", "--file", file, "--resume", id, "--json",
            ])
            #expect(
                again.status == 1 && again.output.contains("import_file_invalid") && again.output.contains("byte \(size)"),
                "\(again.output)")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM import_jobs WHERE status = 'running'") == 0)

            try whole.write(toFile: file, atomically: true, encoding: .utf8)
            let fixed = try await cli.run([
                "import", "users", "--tenant", "acme", "--from", "firebase", "--file", file, "--resume", id, "--json",
            ])
            #expect(fixed.status == 0, "\(fixed.output)")
            #expect(try fixed.object()["status"] as? String == "completed" && fixed.object()["created"] as? Int == 5, "\(fixed.output)")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 5)
        }
    }

    /// `--max-errors 5` on a file whose lines 6 to 25 are bad (issue 39 F17 (d)): the job takes
    /// five bad records, stops before the sixth (line 11), writes nothing after it, and its
    /// counts say so. Before, the whole batch of 300 lines was written and 280 records created.
    @Test func maxErrorsStopsBeforeTheBadRecordItDoesNotAllow() async throws {
        try await Self.withTenant { cli, database, folder in
            let file = folder + "bad.jsonl"
            let lines = (1...300).map { n in (6...25).contains(n) ? "{oops \(n)" : Self.line("m-\(n)", [Self.google("g-m-\(n)")]) }
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let stopped = try await Self.importJSON(cli, file, ["--max-errors", "5"])
            #expect(stopped.status == 1, "\(stopped.output)")
            // The output holds the job and the error: the job as `import list` shows it.
            let job = try #require(try await cli.run("import", "list", "--tenant", "acme", "--json").array().first)
            #expect(job["status"] as? String == "stopped" && job["line"] as? Int == 11, "\(job)")
            #expect(job["records"] as? Int == 10 && job["created"] as? Int == 5 && job["errors"] as? Int == 5, "\(job)")
            #expect(stopped.output.contains("line 11"), "\(stopped.output)")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 5, "no record after the sixth error")
            let reported = try String(contentsOfFile: file + ".errors.jsonl", encoding: .utf8).split(separator: "\n").map {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
            }
            #expect(reported.compactMap { $0["line"] as? Int } == [6, 7, 8, 9, 10])
        }
    }

    /// The recovery path `broker import users --help` and the stop message describe (issue 39
    /// F17 (e)): run with bad lines and --max-errors, fix the lines in the file, run the
    /// printed command. A changed file was refused as "another file" before. The lines the job
    /// has read may not change: that is refused, and changes nothing.
    @Test func aStoppedJobContinuesWithItsFixedFileAsTheHelpSays() async throws {
        try await Self.withTenant { cli, database, folder in
            let help = try await cli.run("import", "users", "--help")
            let helpText = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(helpText.contains("--resume JOB_ID after fixing the file's lines"), "\(help.output)")
            let file = folder + "fix.jsonl"
            let good = (1...30).map { Self.line("x-\($0)", [Self.google("g-x-\($0)")]) }
            var lines = good
            for n in [4, 12, 20] { lines[n - 1] = "{\"external_id\":\"x-\(n)\",\"identities\":[{\"provider\":\"google\"}]}" }
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let stopped = try await cli.run([
                "import", "users", "--tenant", "acme", "--from", "jsonl", "--file", file, "--max-errors", "1", "--batch-size", "5",
            ])
            #expect(stopped.status == 1, "\(stopped.output)")
            let hint = try #require(stopped.output.split(separator: "\n").first { $0.hasPrefix("hint:") }, "\(stopped.output)")
            let command = try #require(hint.range(of: "then: broker ").map { hint[$0.upperBound...] }, "\(hint)")
            let words = command.split(separator: " ").map(String.init)
            let printed = Array(words.prefix(through: try #require(words.firstIndex(of: "--resume")) + 1))
            #expect(stopped.output.contains("line 12"), "\(stopped.output)")

            // Line 4 was read already (an error of the job): changing it is refused.
            var tampered = good
            tampered[19] = lines[19]
            try (tampered.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let refused = try await cli.run(printed)
            #expect(refused.status == 1 && refused.output.contains("line 12"), "\(refused.output)")
            let job = try #require(try await cli.run("import", "list", "--tenant", "acme", "--json").array().first)
            #expect(job["status"] as? String == "stopped" && job["created"] as? Int == 10 && job["errors"] as? Int == 1, "\(job)")

            // Lines 12 and 20 fixed, the lines before 12 as they were.
            var fixed = lines
            fixed[11] = good[11]
            fixed[19] = good[19]
            try (fixed.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let resumed = try await cli.run(printed)
            #expect(resumed.status == 0, "\(resumed.output)")
            #expect(resumed.output.contains("Continued") && resumed.output.contains("29 created"), "\(resumed.output)")
            #expect(try await Self.count(database, "SELECT count(*)::int8 FROM accounts") == 29)
            let errorLines = try String(contentsOfFile: file + ".errors.jsonl", encoding: .utf8).split(separator: "\n")
            #expect(errorLines.count == 1 && errorLines.first?.contains("\"line\":4") == true, "\(errorLines)")
            // The job now describes the fixed file: running that file again finds it completed.
            let after = try await Self.importJSON(cli, file)
            #expect(after.job["job_id"] as? String != job["job_id"] as? String && after.job["unchanged"] as? Int == 29, "\(after.output)")
        }
    }
}
