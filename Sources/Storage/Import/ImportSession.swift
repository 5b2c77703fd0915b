import BrokerCore
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// A job held by one process (``ImportRepository/withJob(_:_:)``): its batches, each in one
/// transaction with the job's cursor and counts, on two connections that take turns (decision
/// 0061). While one batch commits, the next one reads what the database holds for its keys,
/// decides and encodes its rows; it inserts once the batch before it has inserted, and it
/// advances the job only after that batch committed, when the caller hands it its place in the
/// file (``ImportBatchInFlight/commit(_:)``). Commits stay in file order, so a job killed at any
/// point resumes after its last commit with no gap and no duplicate.
///
/// Two neighbouring batches with no key in common (external id, identity) insert at the same
/// time, one on each connection: neither can meet a row of the other, so neither waits on the
/// other. When they share a key, the later one inserts only after the earlier one finished
/// inserting: only the later one can then meet the other's uncommitted rows, and the earlier
/// one commits without waiting for anything of the later one. No two batches ever wait on each
/// other. A later batch that met an earlier one's key is tried again once that commits, and
/// then sees the row (decision 0047).
public final class ImportSession: Sendable {
    let lanes: [PostgresConnection]
    public let job: ImportRepository.Job
    let statementTimeout: Duration
    let logger: Logger
    let transactionSettings: [(String, String)]
    /// A dry run's memory of what its batches would have written (``ImportDryRunMemory``).
    let dryRunMemory: ImportDryRunMemory?

    private struct State {
        var next = 0
        /// The batch begun last, and its keys: the next one inserts after it did when they share one.
        var last: ImportBatchInFlight?
        var lastKeys = BatchKeys()
        /// The batch running on each lane.
        var running: [ImportBatchInFlight?]
    }

    private let state: Mutex<State>

    init(
        lanes: [PostgresConnection], job: ImportRepository.Job, statementTimeout: Duration,
        transactionSettings: [(String, String)], logger: Logger
    ) {
        self.lanes = lanes
        self.transactionSettings = transactionSettings
        self.job = job
        self.statementTimeout = statementTimeout
        self.logger = logger
        dryRunMemory = job.dryRun ? ImportDryRunMemory() : nil
        state = Mutex(State(running: Array(repeating: nil, count: lanes.count)))
    }

    var writer: ImportBatchWriter {
        ImportBatchWriter(
            tenantID: job.tenantID, jobID: job.id, dryRun: job.dryRun, statementTimeout: statementTimeout, logger: logger,
            transactionSettings: transactionSettings, dryRunMemory: dryRunMemory)
    }

    /// Abandons every batch not yet committed and waits until all have ended: nothing runs on
    /// the job's connections once its holder returns (which calls it too).
    public func abandonAll() async {
        let running = state.withLock { $0.running }
        for batch in running { await batch?.abandon() }
    }

    /// Starts `rows` (nothing is written in a dry run) on the next connection, after the batch
    /// that last ran there ended. The caller commits or abandons every batch it begins, in the
    /// order it began them, and ends each before it begins the batch after the next.
    public func begin(_ rows: [ImportRow]) -> ImportBatchInFlight {
        let batch = ImportBatchInFlight()
        let keys = BatchKeys(rows)
        let (lane, before, previous) = state.withLock { state in
            let lane = state.next
            defer {
                state.next = (lane + 1) % lanes.count
                state.last = batch
                state.lastKeys = keys
                state.running[lane] = batch
            }
            // A dry run's batch decides after the one before it decided, whatever their keys
            // (it remembers what that one would have written).
            return (lane, state.running[lane], dryRunMemory != nil || state.lastKeys.shares(with: rows) ? state.last : nil)
        }
        let (connection, writer, tenantID, jobID) = (lanes[lane], writer, job.tenantID, job.id)
        batch.start {
            if let before { await before.ended() }
            return try await writer.write(
                rows, on: connection,
                beforeInserts: { if let previous { await previous.inserted() } },
                afterInserts: { batch.insertsDone() },
                finish: { outcomes, identities, connection in
                    batch.decided(outcomes)
                    let progress = try await batch.released()
                    var counts = ImportCounts()
                    for outcome in outcomes { counts.add(outcome) }
                    counts.skipped = progress.skipped
                    counts.errors = progress.errors
                    counts.records += progress.skipped + progress.errors
                    counts.identities = identities
                    try await writer.statement(
                        """
                        UPDATE import_jobs SET cursor_offset = \(progress.cursorOffset), cursor_line = \(progress.cursorLine),
                            error_file_bytes = \(progress.errorFileBytes), records = records + \(counts.records),
                            created = created + \(counts.created), updated = updated + \(counts.updated),
                            unchanged = unchanged + \(counts.unchanged), conflicts = conflicts + \(counts.conflicts),
                            skipped = skipped + \(counts.skipped), errors = errors + \(counts.errors),
                            identities = identities + \(counts.identities), updated_at = now()
                        WHERE tenant_id = \(tenantID) AND id = \(jobID)
                        """, on: connection)
                    return counts
                }
            ).counts
        }
        return batch
    }
}

/// The unique keys a batch may insert: its external ids and identity keys.
struct BatchKeys: Sendable {
    private var externalIDs: Set<ExactText> = []
    private var identities: Set<ImportIdentityKey> = []

    init() {}

    init(_ rows: [ImportRow]) {
        externalIDs.reserveCapacity(rows.count)
        identities.reserveCapacity(rows.count * 2)
        for row in rows {
            externalIDs.insert(ExactText(row.externalID))
            for identity in row.identities { identities.insert(identity.key) }
        }
    }

    /// Whether any of `rows` has one of these keys.
    func shares(with rows: [ImportRow]) -> Bool {
        rows.contains { row in externalIDs.contains(ExactText(row.externalID)) || row.identities.contains { identities.contains($0.key) } }
    }
}

/// One batch of a job on its way (``ImportSession/begin(_:)``): first its outcomes, once its
/// rows are inserted in its open transaction; then the caller commits it with the job's new
/// place in the file, or abandons it (rolled back).
public final class ImportBatchInFlight: Sendable {
    private let outcomesDecided = OneShot<[ImportOutcome]>()
    private let insertsEnded = OneShot<Void>()
    private let release = OneShot<ImportRepository.Progress?>()
    private let result = OneShot<ImportCounts>()

    init() {}

    /// Runs the batch's work in a task of its own; whatever way it ends, every turn it owes
    /// the others is handed over.
    fileprivate func start(_ work: @escaping @Sendable () async throws -> ImportCounts) {
        Task {
            let outcome: Result<ImportCounts, any Error>
            do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
            insertsEnded.fulfil(.success(()))
            if case .failure(let error) = outcome { outcomesDecided.fulfil(.failure(error)) }
            result.fulfil(outcome)
        }
    }

    fileprivate func insertsDone() { insertsEnded.fulfil(.success(())) }
    fileprivate func decided(_ outcomes: [ImportOutcome]) { outcomesDecided.fulfil(.success(outcomes)) }

    /// The job's new place, once the caller commits; abandoning throws.
    fileprivate func released() async throws -> ImportRepository.Progress {
        guard let progress = try await release.value else { throw ImportBatchAbandoned() }
        return progress
    }

    /// Once this batch inserted (or failed).
    fileprivate func inserted() async { _ = try? await insertsEnded.value }

    /// Once this batch committed, rolled back or failed.
    fileprivate func ended() async { _ = try? await result.value }

    /// Each row's outcome, once the rows are inserted (not yet committed); throws what stopped
    /// the batch.
    public func outcomes() async throws -> [ImportOutcome] { try await outcomesDecided.value }

    /// Advances the job to `progress` in the batch's transaction and commits; returns the
    /// batch's counts.
    public func commit(_ progress: ImportRepository.Progress) async throws -> ImportCounts {
        release.fulfil(.success(progress))
        return try await result.value
    }

    /// Rolls the batch back (unless it already ended) and waits until it did.
    public func abandon() async {
        release.fulfil(.success(nil))
        await ended()
    }
}

/// The caller gave a batch up (``ImportBatchInFlight/abandon()``): its transaction rolls back.
struct ImportBatchAbandoned: Error {}
