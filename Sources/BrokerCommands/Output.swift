import ArgumentParser
import BrokerApplication
import BrokerCore
import Foundation
import Storage

/// Printing for the CLI: JSON (sorted keys, ISO 8601 dates) or aligned text tables.
enum Output {
    static func json(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// Aligned columns. Every cell is escaped (``text(_:)``): a stored value cannot break its row.
    static func table(_ header: [String], _ rows: [[String]]) {
        let rows = rows.map { $0.map(text) }
        let widths = header.indices.map { column in
            ([header[column]] + rows.map { $0[column] }).map(\.count).max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        print(line(header))
        for row in rows { print(line(row)) }
    }

    /// Stored text as printed: control characters, line breaks and bidirectional overrides
    /// written as escapes (`\n`, `\u{1B}`), so no stored value can forge output (issue 20 §8).
    static func text(_ value: String) -> String {
        FreeText.escaped(value)
    }

    static func date(_ date: Date?) -> String {
        date.map { $0.formatted(.iso8601) } ?? "-"
    }

    static func stderr(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

/// Runs a command body and turns failures into a message that says what to do, and exit 1.
func runReporting(json: Bool, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as BrokerError {
        report(code: error.code, message: error.detail, hint: CLIHints.hint(for: error), json: json)
        throw ExitCode.failure
    } catch let error as DatabaseConnectFailure {
        let explained = DatabaseConnectExplanation(error)
        report(code: explained.code, message: explained.message, hint: explained.hint, json: json)
        throw ExitCode.failure
    } catch let error as StorageError {
        if case .migrationNotPermitted = error {
            report(
                code: "migration_not_permitted", message: error.description,
                hint: "Run 'broker db migrate' with the DATABASE_URL of the database's owner, then start again.", json: json)
            throw ExitCode.failure
        }
        report(code: "storage_error", message: error.description, hint: nil, json: json)
        throw ExitCode.failure
    } catch let error as ExitCode {
        throw error
    } catch let error where DatabaseFailureSummary.explained(error) != nil {
        report(
            code: "database_error", message: DatabaseFailureSummary.explained(error) ?? "",
            hint: "Run again with BROKER_LOG_LEVEL=debug for details; 'broker db status' checks the database.", json: json)
        throw ExitCode.failure
    } catch {
        report(
            code: "error", message: String(describing: error),
            hint: "Run again with BROKER_LOG_LEVEL=debug for details; 'broker db status' checks the database.", json: json)
        throw ExitCode.failure
    }
}

private func report(code: String, message: String, hint: String?, json: Bool) {
    if json {
        struct ErrorBody: Encodable {
            struct Inner: Encodable {
                let code: String
                let message: String
                let hint: String?
            }
            let error: Inner
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(ErrorBody(error: .init(code: code, message: message, hint: hint))) {
            Output.stderr(String(decoding: data, as: UTF8.self))
        }
    } else {
        Output.stderr("error: \(message)")
        if let hint { Output.stderr("hint: \(hint)") }
    }
}
