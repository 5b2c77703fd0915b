import Foundation
import JWTKit

/// What every mock provider does with its signing keys (``MockKeyRing``): rotate them, publish
/// them, fail their key set on request, and mint tokens with them, valid or forged.
public protocol MockTokenIssuer: AnyObject, Sendable {
    var keys: MockKeyRing { get }
}

extension MockTokenIssuer {
    public typealias KeysFault = MockKeysFault

    /// The kid new tokens are signed with.
    public var currentKeyID: String { keys.current.kid }

    /// Adds a new signing key; new tokens use it. `keepOld`: keep publishing earlier keys
    /// (providers publish two to four at once). Returns the new kid.
    @discardableResult
    public func rotateKeys(keepOld: Bool = true) throws -> String {
        try keys.rotate(keepOld: keepOld)
    }

    /// Signs new tokens with a fresh key that is not published yet: a token then names a kid
    /// the verifier does not know until the key set is fetched again.
    public func rotateKeysUnpublished() throws -> (kid: String, publish: @Sendable () -> Void) {
        try keys.rotateUnpublished()
    }

    /// The JWKS document the key set endpoint serves.
    public func jwksJSON() throws -> Data {
        try keys.jwksJSON()
    }

    /// How the key set endpoint answers.
    public var keysFault: KeysFault {
        get { keys.fault }
        set { keys.fault = newValue }
    }

    /// How many times the key set was asked.
    public var keyFetches: Int { keys.fetches }

    /// The key set endpoint's answer: status and body (counts the fetch).
    public func keysAnswer() throws -> (status: Int, body: Data) {
        try keys.keysAnswer()
    }

    /// Mints a token with exactly these claims (and extra header fields).
    public func mint(
        _ claims: [String: JWTHeaderField], header extraHeader: [String: JWTHeaderField] = [:],
        forgery: TokenForgery = .valid
    ) throws -> String {
        try keys.mint(claims, header: extraHeader, forgery: forgery)
    }

    /// Mints from raw JSON texts (for tokens with duplicate members and other malformed JSON).
    public func mint(rawHeader: Data, rawPayload: Data, forgery: TokenForgery = .valid) throws -> String {
        try keys.mint(rawHeader: rawHeader, rawPayload: rawPayload, forgery: forgery)
    }
}
