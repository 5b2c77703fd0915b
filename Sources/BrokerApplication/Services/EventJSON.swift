import BrokerCore
import Foundation
import Storage

/// An event as product backends read it, the same through `GET /v1/events` and webhooks:
/// `{"id": "evt_N", "type", "account_id", "occurred_at", "data": {...}, "cursor"}`.
package enum EventJSON {
    /// Writes `event` as one object.
    package static func write(_ event: EventRepository.Event, into writer: inout JSONWriter) {
        writer.beginObject()
        members(event, into: &writer)
        writer.endObject()
    }

    /// A webhook delivery's body: the event's members and, as the Standard Webhooks convention
    /// names it, `timestamp` (when it occurred).
    package static func webhookBody(_ event: EventRepository.Event) -> [UInt8] {
        var writer = JSONWriter(capacity: 256 + event.data.utf8.count)
        writer.beginObject()
        members(event, into: &writer)
        writer.member("timestamp", event.occurredAt.iso8601String)
        writer.endObject()
        return writer.bytes
    }

    /// `evt_N`: an event's id in every body and the `webhook-id` of its deliveries.
    package static func id(_ event: EventRepository.Event) -> String { "evt_\(event.id)" }

    private static func members(_ event: EventRepository.Event, into writer: inout JSONWriter) {
        writer.member("id", id(event))
        writer.member("type", event.type)
        writer.member("account_id", event.accountID?.lowercasedString)
        writer.member("occurred_at", event.occurredAt.iso8601String)
        writer.key("data")
        writer.value((try? JSONValue.parse(Array(event.data.utf8))) ?? .object([:]))
        writer.member("cursor", event.cursor.description)
    }
}
