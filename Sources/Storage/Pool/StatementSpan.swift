import BrokerCore
import PostgresNIO
import Tracing

/// A client span for each statement and transaction the broker runs, when traces are exported
/// (``TraceSpans``): named after the statement's operation and first table (`SELECT
/// sessions`, OpenTelemetry's database conventions), with the parameterized SQL text (values
/// travel as bind parameters and are never in it) and the repository function that ran it.
enum StatementSpan {
    static func around<T>(
        sql: String, function: String, _ body: () async throws -> T
    ) async throws -> T {
        guard TraceSpans.enabled else { return try await body() }
        let (operation, target) = summary(of: sql)
        return try await withSpan(target.map { "\(operation) \($0)" } ?? operation, ofKind: .client) { span in
            span.attributes["db.system.name"] = "postgresql"
            span.attributes["db.operation.name"] = operation
            span.attributes["db.collection.name"] = target
            span.attributes["db.query.text"] = sql
            span.attributes["code.function.name"] = function
            return try await body()
        }
    }

    /// The statement's first keyword (`WITH` when it starts with common table expressions) and
    /// the first table it names after `FROM`, `INTO` or `UPDATE`, if any.
    static func summary(of sql: String) -> (operation: String, target: String?) {
        let words = sql.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "(" || $0 == ")" || $0 == "," })
        let operation = words.first.map { $0.uppercased() } ?? "SQL"
        var target: String?
        for (index, word) in words.enumerated().dropLast() {
            let keyword = word.uppercased()
            guard keyword == "FROM" || keyword == "INTO" || keyword == "UPDATE" else { continue }
            let name = words[index + 1]
            if name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." }), name.first?.isLetter == true {
                target = String(name)
                break
            }
        }
        return (operation, target)
    }
}

extension PostgresClient {
    /// `withTransaction` in the task's ``TenantScope`` (given to the connection before `BEGIN`),
    /// in a span of its own when traces are exported.
    func transaction<Result: Sendable>(
        logger: Logger, function: String = #function, isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        guard TraceSpans.enabled else { return try await scopedTransaction(logger: logger, isolation: isolation, body) }
        let span = InstrumentationSystem.tracer.startSpan("transaction", ofKind: .client)
        defer { span.end() }
        span.attributes["db.system.name"] = "postgresql"
        span.attributes["db.operation.name"] = "transaction"
        span.attributes["code.function.name"] = function
        do {
            return try await ServiceContext.$current.withValue(
                span.context,
                operation: {
                    try await scopedTransaction(logger: logger, isolation: isolation, body)
                }, isolation: isolation)
        } catch {
            span.recordError(error)
            span.setStatus(.init(code: .error))
            throw error
        }
    }

    private func scopedTransaction<Result: Sendable>(
        logger: Logger, isolation: isolated (any Actor)?, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let record = ConnectionScopes.of(self)
        return try await withOpenConnection(isolation: isolation) { connection in
            guard record?.perTransaction == true else {
                try await Self.enterTenantScope(on: connection, TenantScope.current, record: record, logger: logger)
                return try await connection.withTransaction(logger: logger, isolation: isolation) { connection in try await body(connection)
                }
            }
            return try await connection.withTransaction(logger: logger, isolation: isolation) { connection in
                try await connection.setTransactionTenantScope(settings: record?.transactionSettings ?? [], logger: logger)
                return try await body(connection)
            }
        }
    }
}
