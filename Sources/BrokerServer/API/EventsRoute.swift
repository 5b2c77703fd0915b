import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Storage

/// `GET /v1/events?after=<cursor>&limit=N` (API key, `accounts` scope; issue 23 §5): the
/// tenant's events in commit order, for backends that pull rather than take webhooks. Served
/// on the router directly: each event's `data` is the stored JSON object, written as it is.
struct EventsRoute: Sendable {
    static let operation = GeneratedRoutes.Operation(method: .get, path: "/v1/events")
    static let defaultLimit = 100
    static let maxLimit = 1_000

    let handlers: APIHandlers

    func respond(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        let cursor: EventRepository.Cursor
        if let after = query["after"].map(String.init) {
            guard let parsed = EventRepository.Cursor(after) else {
                throw BrokerError.invalidArgument("after must be a cursor this API handed out (next_cursor), e.g. '812.4051'.")
            }
            cursor = parsed
        } else {
            cursor = .start
        }
        var limit = Self.defaultLimit
        if let text = query["limit"].map(String.init) {
            guard let value = Int(text), (1...Self.maxLimit).contains(value) else {
                throw BrokerError.invalidArgument("limit must be a whole number from 1 to \(Self.maxLimit).")
            }
            limit = value
        }
        let caller = try await handlers.authenticator.authenticate(HTTPCaller(request, context: context), requiring: .accounts)
        let events = try await handlers.services.database.events.page(tenantID: caller.tenant.id, after: cursor, limit: limit)
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: Self.json(events, after: cursor))))
    }

    /// `{"events": [...], "next_cursor": "..."}`; `next_cursor` is the last event's, or `after`
    /// when the page is empty (poll again with it).
    static func json(_ events: [EventRepository.Event], after: EventRepository.Cursor) -> [UInt8] {
        var writer = JSONWriter(capacity: 256 + events.count * 256)
        writer.beginObject()
        writer.key("events")
        writer.beginArray()
        for event in events { EventJSON.write(event, into: &writer) }
        writer.endArray()
        writer.member("next_cursor", (events.last?.cursor ?? after).description)
        writer.endObject()
        return writer.bytes
    }
}

extension APIHandlers {
    // The generated entry (unregistered: ``EventsRoute`` serves this operation).
    func listEvents(_ input: Operations.ListEvents.Input) async throws -> Operations.ListEvents.Output {
        throw BrokerError(
            code: "internal_error", kind: .internalFailure, title: "Not routed here", detail: "GET /v1/events is served by EventsRoute.")
    }
}
