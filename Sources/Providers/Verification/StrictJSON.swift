import BrokerCore
import Foundation

/// Whether a JSON text is well-formed with no duplicate member names in any object (see
/// ``JSONValue/parse(_:maxDepth:)``, which the verifier parses tokens with). JWT libraries and
/// Foundation keep one of two duplicate members silently; an attacker can use that to make
/// two parsers disagree about a claim, so tokens with duplicates are refused.
enum StrictJSON {
    static func hasNoDuplicateMembers(_ data: Data) -> Bool {
        (try? JSONValue.parse(data)) != nil
    }
}
