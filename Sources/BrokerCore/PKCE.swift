import Crypto
import Foundation

/// Proof Key for Code Exchange (RFC 7636) as the broker's token endpoint checks it: only the
/// `S256` method (`plain` is refused at the authorization endpoint, RFC 9700 §2.1.1).
public enum PKCE {
    /// A challenge is `BASE64URL(SHA256(verifier))`: 43 characters of the base64url alphabet.
    public static func isChallenge(_ text: String) -> Bool {
        text.utf8.count == 43 && text.utf8.allSatisfy(Base64URL.isAlphabet)
    }

    /// A verifier is 43 to 128 characters of `[A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~"`
    /// (RFC 7636 §4.1).
    public static func isVerifier(_ text: String) -> Bool {
        (43...128).contains(text.utf8.count)
            && text.utf8.allSatisfy { Base64URL.isAlphabet($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "~") }
    }

    /// Whether `verifier` is well formed and its S256 transform is `challenge`, compared in
    /// constant time.
    public static func verifies(_ verifier: String, challenge: String) -> Bool {
        guard isVerifier(verifier), isChallenge(challenge) else { return false }
        return ConstantTime.equals(Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8)))), challenge)
    }
}
