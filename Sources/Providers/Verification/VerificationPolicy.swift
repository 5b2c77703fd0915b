import Foundation

/// What a provider's identity tokens must satisfy (DESIGN.md "Verifier rules").
public struct VerificationPolicy: Sendable {
    /// `iss` must be one of these exactly.
    public var issuers: Set<String>
    /// Allowed `alg` values; anything else (`none`, HS256, …) is refused before any key is used.
    public var algorithms: Set<String>
    /// `aud` must name one of these; an `aud` array must contain one and nothing untrusted.
    public var audiences: Set<String>
    /// Allowed clock difference for `iat`, `nbf` and `exp`.
    public var clockSkew: TimeInterval
    /// Tokens longer than this are refused unread.
    public var maxTokenBytes: Int

    public init(
        issuers: Set<String>, algorithms: Set<String> = ["RS256"], audiences: Set<String>,
        clockSkew: TimeInterval = 60, maxTokenBytes: Int = 16_384
    ) {
        self.issuers = issuers
        self.algorithms = algorithms
        self.audiences = audiences
        self.clockSkew = clockSkew
        self.maxTokenBytes = maxTokenBytes
    }
}

/// How the token's `nonce` is compared with the raw nonce the backend sends.
public enum NonceMode: String, Sendable, Codable, CaseIterable {
    /// The app sent SHA-256(raw nonce), hex, to the provider (Apple's documented practice).
    case sha256
    /// The app sent the raw nonce as is.
    case raw
}

/// The nonce a verification expects.
public struct NonceExpectation: Sendable {
    public var rawNonce: String?
    public var mode: NonceMode

    public init(rawNonce: String?, mode: NonceMode) {
        self.rawNonce = rawNonce
        self.mode = mode
    }

    public static let none = NonceExpectation(rawNonce: nil, mode: .sha256)
}
