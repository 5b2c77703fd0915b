import PostgresNIO
import Synchronization

/// Whether a statement may change what the database holds, read from its SQL text (decision
/// 0056): a statement that writes and runs outside a transaction is confirmed committed before
/// its rows are used. The rule errs towards writing: a statement is a read only when it starts
/// with `SELECT` or `WITH` and names none of the words below, so a read that names one (a column
/// called `updated_at` does not: words are whole identifiers) costs a round trip, and a write is
/// never taken for a read. The broker's own SQL functions (migration 0028's scope functions)
/// only read.
///
/// Upstream (docs/upstream.md, "Commit after the rows"): the SQL is read only because the
/// confirmation costs a round trip, and it costs one because PostgresNIO 1.33.2 tells the caller
/// nothing of a commit that fails at `Sync` after `CommandComplete` (nor when the statement's
/// `ReadyForQuery` arrives). This type goes with ``PostgresConnection/confirmCommitted(logger:)``
/// when `Benchmarks/upstream`'s `repro-commit-after-rows` exits 1 against a newer release.
enum StatementEffect {
    /// Words that make a statement a write: data-modifying commands (also in a `WITH`), row locks
    /// (`FOR UPDATE`, `FOR NO KEY UPDATE`) and the functions whose effect is kept at commit.
    private static let writingWords: Set<String> = [
        "INSERT", "UPDATE", "DELETE", "MERGE", "COPY", "TRUNCATE",
        "NEXTVAL", "SETVAL", "PG_NOTIFY", "SET_CONFIG",
    ]

    static func mayWrite(_ sql: String) -> Bool {
        var first: String?
        var word: [UInt8] = []
        word.reserveCapacity(32)
        var writes = false
        func finish() {
            guard !word.isEmpty else { return }
            // Only words as long as one of the writing words are looked up (no string for the rest).
            if first == nil || (4...10).contains(word.count) {
                let text = String(decoding: word, as: UTF8.self)
                if first == nil { first = text }
                if writingWords.contains(text) { writes = true }
            }
            word.removeAll(keepingCapacity: true)
        }
        for byte in sql.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): word.append(byte - 32)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"): word.append(byte)
            default:
                finish()
                if writes { return true }
            }
        }
        finish()
        return writes || (first != "SELECT" && first != "WITH")
    }

    /// `mayWrite` of a prepared statement's SQL, read once per statement type.
    static func mayWrite<Statement: PostgresPreparedStatement>(_: Statement.Type) -> Bool {
        let key = ObjectIdentifier(Statement.self)
        if let known = preparedStatements.withLock({ $0[key] }) { return known }
        let writes = mayWrite(Statement.sql)
        preparedStatements.withLock { $0[key] = writes }
        return writes
    }

    private static let preparedStatements = Mutex<[ObjectIdentifier: Bool]>([:])
}
