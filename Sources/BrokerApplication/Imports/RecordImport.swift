import BrokerCore
import Foundation
import Storage

/// `POST /v1/accounts/import` (issue 24): for backends that dual-write during a cut-over, up to
/// 1,000 records in the `jsonl` schema, with the rules of `broker import users`, answered one
/// result per record. Each record is all or nothing; the others of the request go on.
extension ImportService {
    package static let maxRecordsPerRequest = 1_000

    package struct RecordResult: Sendable, Equatable {
        package enum Status: String, Sendable { case created, updated, unchanged, conflict, error }
        package let externalID: String?
        package let status: Status
        package let accountID: UUID?
        package let reason: String?
    }

    package func importRecords(tenant: Tenant, _ values: [JSONValue]) async throws -> [RecordResult] {
        let resolver = try await ImportProviderResolver.load(tenant: tenant, database: database, secrets: secrets, appleTeam: nil, map: [:])
        var results = [RecordResult?](repeating: nil, count: values.count)
        var rows: [ImportRow] = []
        var rowIndexes: [Int] = []
        for (index, value) in values.enumerated() {
            switch ImportSource.jsonl.item(from: value) {
            case .record(let record):
                switch resolver.resolve(record) {
                case .success(let row):
                    rows.append(row)
                    rowIndexes.append(index)
                case .failure(let failure):
                    results[index] = RecordResult(externalID: record.externalID, status: .error, accountID: nil, reason: failure.reason)
                }
            case .skipped(let externalID, let reason):
                results[index] = RecordResult(externalID: externalID, status: .error, accountID: nil, reason: reason)
            case .error(let reason):
                results[index] = RecordResult(
                    externalID: value.object?["external_id"]?.string(maxBytes: 255), status: .error, accountID: nil, reason: reason)
            }
        }
        if !rows.isEmpty {
            let outcomes = try await database.imports.write(rows, tenantID: tenant.id)
            for (position, outcome) in outcomes.enumerated() {
                let index = rowIndexes[position]
                let externalID = rows[position].externalID
                switch outcome {
                case .created(let id): results[index] = RecordResult(externalID: externalID, status: .created, accountID: id, reason: nil)
                case .updated(let id, _):
                    results[index] = RecordResult(externalID: externalID, status: .updated, accountID: id, reason: nil)
                case .unchanged(let id):
                    results[index] = RecordResult(externalID: externalID, status: .unchanged, accountID: id, reason: nil)
                case .conflict(let id, let reason):
                    results[index] = RecordResult(externalID: externalID, status: .conflict, accountID: id, reason: reason)
                }
            }
        }
        return results.map { $0 ?? RecordResult(externalID: nil, status: .error, accountID: nil, reason: "not processed") }
    }
}
