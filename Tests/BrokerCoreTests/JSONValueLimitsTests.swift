import BrokerCore
import Testing

/// Issue 20 §2: the strict parser and its readers never trap on what the network sends.
@Suite struct JSONValueLimitsTests {
    @Test func nestingIsLimitedWhateverDepthIsAskedFor() {
        let deep = Array((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(deep, maxDepth: Int.max) }
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(deep) }
        let fits = Array((String(repeating: "[", count: JSONValue.depthLimit) + String(repeating: "]", count: JSONValue.depthLimit)).utf8)
        #expect((try? JSONValue.parse(fits, maxDepth: Int.max)) != nil)
    }

    @Test func integersAreReadOnlyWhenWholeAndInRange() throws {
        func integer(_ text: String, in range: ClosedRange<Int> = Int.min...Int.max) throws -> Int? {
            try JSONValue.parse(Array(text.utf8)).integer(in: range)
        }
        #expect(try integer("1700000000") == 1_700_000_000)
        #expect(try integer("-1") == -1)
        #expect(try integer("-1", in: 0...10) == nil)
        for odd in ["1e300", "-1e300", "1.5", "9223372036854775808", "-1e19", "\"5\"", "null", "true", "[]"] {
            #expect(try integer(odd) == nil, "\(odd)")
        }
        #expect(try JSONValue.parse(Array("\"abc\"".utf8)).string(maxBytes: 3) == "abc")
        #expect(try JSONValue.parse(Array("\"abcd\"".utf8)).string(maxBytes: 3) == nil)
    }
}
