import BrokerCore

/// An identity's extra attributes as stored: a JSON object of strings (`identities.attributes`).
enum IdentityAttributes {
    static func encode(_ attributes: [String: String]) -> String? {
        guard !attributes.isEmpty else { return nil }
        var writer = JSONWriter(capacity: 64)
        writer.beginObject()
        for (name, value) in attributes.sorted(by: { $0.key < $1.key }) { writer.member(name, value) }
        writer.endObject()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func decode(_ text: String?) -> [String: String] {
        guard let text, let object = (try? JSONValue.parse(text.utf8))?.object else { return [:] }
        return object.compactMapValues(\.string)
    }
}
