import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Storage

/// `POST /v1/accounts/import` (issue 24), served on the router directly: each record is read by
/// the `jsonl` import reader (the same members and rules as `broker import users --from jsonl`),
/// and each result carries `account_id` and `reason` always present, which the generated
/// encoding would omit.
struct AccountImportRoute: Sendable {
    static let operation = GeneratedRoutes.Operation(method: .post, path: "/v1/accounts/import")
    /// 1,000 records of about a kilobyte each, with room.
    static let maxBodyBytes = 4 << 20

    let handlers: APIHandlers

    func respond(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        let caller = try await handlers.authenticator.authenticate(HTTPCaller(request, context: context), requiring: .accounts)
        try SignInRoute.checkContentType(request.headers[.contentType])
        var request = request
        let bytes = try await request.collectBody(upTo: Self.maxBodyBytes)
        guard let body = try? JSONValue.parse(bytes.readableBytesView, maxDepth: 16), let object = body.object else {
            throw SignInRoute.contractMismatch("the body is not a JSON object")
        }
        guard let records = object["records"]?.array else { throw SignInRoute.contractMismatch("member 'records' is not an array") }
        guard (1...ImportService.maxRecordsPerRequest).contains(records.count) else {
            throw SignInRoute.contractMismatch("'records' holds 1 to \(ImportService.maxRecordsPerRequest) records")
        }
        let results = try await handlers.importRecords(records, tenant: caller.tenant)
        var writer = JSONWriter(capacity: 160 * results.count + 32)
        writer.beginObject()
        writer.key("results")
        writer.beginArray()
        for result in results {
            writer.beginObject()
            writer.member("external_id", result.externalID)
            writer.member("status", result.status.rawValue)
            writer.member("account_id", result.accountID?.lowercasedString)
            writer.member("reason", result.reason)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: writer.bytes)))
    }
}

extension APIHandlers {
    func importRecords(_ records: [JSONValue], tenant: Tenant) async throws -> [ImportService.RecordResult] {
        try await ImportService(database: services.database, secrets: services.secrets, logger: services.database.logger)
            .importRecords(tenant: tenant, records)
    }

    /// The generated route's form of ``AccountImportRoute`` (the router serves that one).
    func importAccounts(_ input: Operations.ImportAccounts.Input) async throws -> Operations.ImportAccounts.Output {
        let caller = try await authenticator.authenticate(currentCaller, requiring: .accounts)
        guard case .json(let body) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        let records = try JSONValue.parse(try JSONEncoder().encode(body.records)).array ?? []
        let results = try await importRecords(records, tenant: caller.tenant)
        return .ok(
            .init(
                body: .json(
                    .init(
                        results: results.map {
                            .init(
                                externalId: $0.externalID, status: .init(rawValue: $0.status.rawValue) ?? .error,
                                accountId: $0.accountID?.lowercasedString, reason: $0.reason)
                        }))))
    }
}
