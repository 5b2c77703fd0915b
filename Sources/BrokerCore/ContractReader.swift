/// A body that does not match the contract, with what is wrong.
public struct ContractMismatch: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(description: String) { self.description = description }
}

/// Reads members of a parsed body as the generated `Decodable` conformances read them: a
/// required member present and of its type, an optional one absent or null, an enum member one
/// of its values, members the contract does not name ignored. `JSONDecoder` cost ~15 µs of a
/// sign-in for one body (decision 0011); tests hold the readers to the generated decoders and
/// to every property of openapi.yaml. Unlike `JSONDecoder`, the strict parser underneath
/// refuses duplicate member names.
public enum ContractReader {
    public static func object(_ body: JSONValue) throws(ContractMismatch) -> [String: JSONValue] {
        guard let object = body.object else { throw ContractMismatch(description: "the body is not a JSON object") }
        return object
    }

    public static func required(_ name: String, in object: [String: JSONValue], at path: String = "") throws(ContractMismatch) -> String {
        guard let value = object[name], !value.isNull else { throw ContractMismatch(description: "missing member '\(path)\(name)'") }
        guard let string = value.string else { throw ContractMismatch(description: "member '\(path)\(name)' has the wrong type") }
        return string
    }

    public static func optional(_ name: String, in object: [String: JSONValue], at path: String = "") throws(ContractMismatch) -> String? {
        guard let value = object[name], !value.isNull else { return nil }
        guard let string = value.string else { throw ContractMismatch(description: "member '\(path)\(name)' has the wrong type") }
        return string
    }

    public static func choice<Choice: RawRepresentable<String>>(_ name: String, in object: [String: JSONValue]) throws(ContractMismatch)
        -> Choice?
    {
        guard let raw = try optional(name, in: object) else { return nil }
        guard let choice = Choice(rawValue: raw) else {
            throw ContractMismatch(description: "member '\(name)' has a value the contract does not allow")
        }
        return choice
    }
}
