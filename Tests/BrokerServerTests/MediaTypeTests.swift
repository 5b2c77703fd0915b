@testable import BrokerServer
import Foundation
import PropertyBased
import Testing

/// How a route reads a request's `Content-Type` (``MediaType``): the same answer as reading it with
/// Foundation (the text before `;`, trimmed, lowercased, compared), for any header made of the
/// characters that matter, and the forms that must and must not match.
@Suite struct MediaTypeTests {
    /// The reading `MediaType` replaced, with HTTP's whitespace (space and tab) trimmed.
    static func reference(_ contentType: String) -> String {
        contentType.prefix { $0 != ";" }.trimmingCharacters(in: CharacterSet(charactersIn: " \t")).lowercased()
    }

    @Test func itReadsAsFoundationDoesForAnyHeader() async {
        let pieces = [
            "application/json", "APPLICATION/X-WWW-FORM-URLENCODED", "application/x-www-form-urlencoded", "+json", "+JSON", " ",
            "\t", ";", "charset=utf-8", "a", "/", "json", "é", "\u{1F600}", "",
        ]
        await propertyCheck(count: 2_000, input: Gen.int(in: 0...Int(Int32.max)), Gen.int(in: 0...6)) { seed, count in
            let header = (0..<count).map { pieces[(seed >> ($0 * 4)) % pieces.count] }.joined()
            let read = Self.reference(header)
            #expect(MediaType.names(header, MediaType.form) == (read == MediaType.form), "\(header.debugDescription)")
            #expect(MediaType.names(header, MediaType.json) == (read == MediaType.json), "\(header.debugDescription)")
            #expect(MediaType.isJSON(header) == (read == MediaType.json || read.hasSuffix("+json")), "\(header.debugDescription)")
        }
    }

    @Test func theFormsThatMatchAndThoseThatDoNot() {
        for header in [
            "application/x-www-form-urlencoded", "Application/X-WWW-Form-URLEncoded; charset=UTF-8",
            " \tapplication/x-www-form-urlencoded \t;x", "application/x-www-form-urlencoded;",
        ] {
            #expect(MediaType.names(header, MediaType.form), "\(header.debugDescription)")
        }
        for header in [
            "application/x-www-form-urlencodedx", "application/x-www-form-urlencode", "application /x-www-form-urlencoded",
            "multipart/form-data", "", ";application/x-www-form-urlencoded", "application/x-www-form-urlencoded\u{00A0}",
        ] {
            #expect(!MediaType.names(header, MediaType.form), "\(header.debugDescription)")
        }
        #expect(!MediaType.names(nil, MediaType.form) && !MediaType.isJSON(nil))
        #expect(MediaType.isJSON("application/problem+JSON; charset=utf-8") && MediaType.isJSON("APPLICATION/JSON"))
        #expect(!MediaType.isJSON("+jso") && !MediaType.isJSON("application/jsonx") && !MediaType.isJSON("text/plain"))
    }
}
