import BrokerCore
import Crypto
import Foundation

/// Signing as the Standard Webhooks convention has it: the secret is `whsec_` and the base64 of
/// 32 random bytes; each delivery carries `webhook-id`, `webhook-timestamp` (Unix seconds) and
/// `webhook-signature: v1,<base64 of HMAC-SHA256 over "<id>.<timestamp>.<body>">` keyed with the
/// secret's bytes. A receiver checks the signature and that the timestamp is recent.
package struct WebhookSignature: Sendable {
    static let prefix = "whsec_"

    let key: SymmetricKey

    /// A new random secret, as the operator is shown it once.
    package static func newSecret() -> String {
        prefix + Data(SecureRandom.bytes(32)).base64EncodedString()
    }

    /// The signer of `secret` (`whsec_...`); nil when it is not one.
    package init?(secret: String) {
        guard secret.hasPrefix(Self.prefix), let bytes = Data(base64Encoded: String(secret.dropFirst(Self.prefix.count))), !bytes.isEmpty
        else { return nil }
        key = SymmetricKey(data: bytes)
    }

    /// The `webhook-signature` value for one delivery.
    package func signature(id: String, timestamp: Int, body: [UInt8]) -> String {
        var content = Data("\(id).\(timestamp).".utf8)
        content.append(contentsOf: body)
        let mac = HMAC<SHA256>.authenticationCode(for: content, using: key)
        return "v1," + Data(mac).base64EncodedString()
    }
}
