/// Why an identity token was refused. `code` is stable (it becomes the problem `code`);
/// `message` never contains the token.
public struct TokenVerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: String
    public let message: String

    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    static func invalid(_ message: String) -> Self { .init("invalid_token", message) }
}
