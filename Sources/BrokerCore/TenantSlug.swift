/// A tenant's URL-safe identifier: lowercase letters, digits and dashes, 3–40 characters,
/// starting with a letter or digit and not ending with a dash.
public struct TenantSlug: Hashable, Sendable, CustomStringConvertible, Codable {
    public let rawValue: String

    public static let allowedLength = 3...40

    public init(_ value: String) throws(BrokerError) {
        guard Self.allowedLength.contains(value.count) else {
            throw .invalidSlug(value, reason: "it must be 3 to 40 characters long (it has \(value.count))")
        }
        for scalar in value.unicodeScalars {
            switch scalar {
            case "a"..."z", "0"..."9", "-": continue
            default:
                throw .invalidSlug(value, reason: "only lowercase letters a-z, digits and dashes are allowed")
            }
        }
        guard value.first != "-", value.last != "-" else {
            throw .invalidSlug(value, reason: "it may not start or end with a dash")
        }
        self.rawValue = value
    }

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer().decode(String.self)
        try self.init(value)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
