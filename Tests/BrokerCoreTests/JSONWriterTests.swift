import BrokerCore
import Foundation
import Testing

@Suite struct JSONWriterTests {
    @Test func writesNestedObjectsAndArraysWithCommasInPlace() throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("a", 1)
        writer.key("list")
        writer.beginArray()
        writer.string("x")
        writer.int(2)
        writer.bool(false)
        writer.null()
        writer.beginObject()
        writer.endObject()
        writer.endArray()
        writer.key("nested")
        writer.beginObject()
        writer.member("b", true)
        writer.member("c", nil as String?)
        writer.memberIfPresent("absent", nil as String?)
        writer.memberIfPresent("present", 7 as Int?)
        writer.endObject()
        writer.endObject()
        #expect(
            String(decoding: writer.bytes, as: UTF8.self)
                == #"{"a":1,"list":["x",2,false,null,{}],"nested":{"b":true,"c":null,"present":7}}"#)
    }

    @Test(arguments: [
        "plain", "quote \" and backslash \\", "line\nbreak\r\ttab", "\u{0}\u{1}\u{1F}\u{7F}", "ünïcødé ✓ 🍎",
        "</script>", "",
    ])
    func stringsRoundTripThroughFoundation(_ value: String) throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.member("value", value)
        writer.endObject()
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(writer.bytes)) as? [String: String])
        #expect(parsed["value"] == value)
    }

    @Test func controlCharactersAreEscapedAsUnicode() {
        var writer = JSONWriter()
        writer.string("\u{1}\u{1F}")
        #expect(String(decoding: writer.bytes, as: UTF8.self) == #""\u0001\u001f""#)
    }

    @Test func negativeAndLargeNumbers() {
        var writer = JSONWriter()
        writer.beginArray()
        writer.int(-5)
        writer.int(Int.max)
        writer.endArray()
        #expect(String(decoding: writer.bytes, as: UTF8.self) == "[-5,\(Int.max)]")
    }
}
