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

    /// The provider's keys could not be fetched and none are cached: the token cannot be
    /// judged now (503, not 401).
    public static let providerUnavailable = TokenVerificationError(
        "provider_unavailable", "The provider's signing keys could not be fetched and none are cached; retry shortly.")

    /// Whether the failure is the provider's, not the token's.
    public var isProviderUnavailable: Bool { code == Self.providerUnavailable.code }
}
