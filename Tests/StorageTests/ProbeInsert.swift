import PostgresNIO

/// A test table of one `id int` column.
protocol ProbeTable { static var table: String { get } }

/// `INSERT INTO <table> VALUES ($1) RETURNING id`, prepared (one statement name per table).
struct ProbeInsert<Table: ProbeTable>: PostgresPreparedStatement {
    static var name: String { "test_insert_\(Table.table)" }
    static var sql: String { "INSERT INTO \(Table.table) VALUES ($1) RETURNING id" }
    typealias Row = Int
    let id: Int
    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings()
        bindings.append(id)
        return bindings
    }
    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Int.self) }
}
