import BrokerApplication
import BrokerAPI
import BrokerCore
import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /v1/accounts/{id}` served on the router directly: the contract makes `account.name`
/// always present (`null` when no name is known), which the generated `Codable` conformance
/// cannot write (it omits nil members). Same authentication, errors and body as the
/// generated route otherwise; the body is written by
/// ``Components/Schemas/AccountDetails/json``.
struct AccountRoute: Sendable {
    static let operation = GeneratedRoutes.Operation(method: .get, path: "/v1/accounts/{id}")
    /// `GET /v1/accounts?external_id=X`: `{"accounts": [...]}` with the same account bodies.
    static let listOperation = GeneratedRoutes.Operation(method: .get, path: "/v1/accounts")

    let handlers: APIHandlers

    func respond(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        let details = try await handlers.accountDetails(id: context.parameters.get("id") ?? "", as: HTTPCaller(request, context: context))
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: details.json)))
    }

    func list(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        let found = try await handlers.accountsByExternalID(
            request.uri.queryParameters.get("external_id"), as: HTTPCaller(request, context: context))
        var writer = JSONWriter(capacity: 1_024 * max(1, found.count))
        writer.beginObject()
        writer.key("accounts")
        writer.beginArray()
        for details in found { details.write(to: &writer) }
        writer.endArray()
        writer.endObject()
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: writer.bytes)))
    }
}
