import BrokerCore
import Foundation
import PostgresNIO

/// The posted record set every sign-in statement reads, `posted p`: one element per sign-in,
/// one JSON array as the statement's only parameter, whatever the batch's size (one prepared
/// statement, one generic plan). Its members are ``SignInColumns/posted``; the statements refer
/// to them by name (`p.email`, `p.session_id`), as converted for storage (timestamps, bytes,
/// JSON objects).
enum PostedSignIns {
    /// The CTE `posted` of a batch, materialized: each element is decoded once.
    static let cte = cte(limit: "")

    /// The CTE `posted` of a statement that takes one element. `LIMIT 1` tells the planner so:
    /// it otherwise takes a set-returning function for 100 rows, and the estimates of a
    /// statement with many joins on the element grew past a billion rows.
    static let oneElementCTE = cte(limit: "\n    LIMIT 1")

    private static func cte(limit: String) -> String {
        let columns = SignInColumns.posted
        let made = columns.map { "\($0.sql) AS \($0.name)" }.joined(separator: ", ")
        let record = columns.map { "\($0.name) \($0.jsonType)" }.joined(separator: ", ")
        return """
            posted AS MATERIALIZED (
                SELECT \(made)
                FROM json_to_recordset($1::text::json) AS r(\(record))\(limit)
            )
            """
    }

    /// The elements as the statement's parameter: `[{"n": 0, "tenant_id": …}, …]`.
    static func json(_ elements: [SignInColumns.Element]) -> String {
        var writer = JSONWriter(capacity: 800 * elements.count)
        writer.beginArray()
        for element in elements {
            writer.beginObject()
            for column in SignInColumns.posted { column.write(&writer, element) }
            writer.endObject()
        }
        writer.endArray()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// The requests as elements in batch order, with the new ids given (or none).
    static func json(_ requests: [SignInRequest], newIDs: [(identity: UUID, account: UUID)]? = nil) -> String {
        json(requests.enumerated().map { n, request in SignInColumns.Element(n: n, request: request, newIDs: newIDs?[n]) })
    }
}

/// A lean batch statement whose one parameter is its requests as posted elements (no new ids),
/// answering with its rows as they are: the quiet and known statements, each in its plain and
/// its code-keeping form (decision 0100).
protocol PostedBatchStatement: PostgresPreparedStatement where Row == PostgresRow {
    /// The posted elements, in batch order; no two with one session id.
    var requests: [SignInRequest] { get }
}

extension PostedBatchStatement {
    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(PostedSignIns.json(requests))
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}
