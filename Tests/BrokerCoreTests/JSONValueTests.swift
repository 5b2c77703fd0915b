import BrokerCore
import Foundation
import Testing

@Suite struct JSONValueTests {
    /// The same value as Foundation's parser, converted for comparison.
    static func foundation(_ text: String) throws -> JSONValue {
        func convert(_ value: Any) -> JSONValue {
            switch value {
            case is NSNull: return .null
            case let string as String: return .string(string)
            case let number as NSNumber where String(cString: number.objCType) == "c": return .bool(number.boolValue)
            case let number as NSNumber: return .number(number.doubleValue)
            case let array as [Any]: return .array(array.map(convert))
            case let object as [String: Any]: return .object(object.mapValues(convert))
            default: return .null
            }
        }
        return convert(try JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed))
    }

    @Test(arguments: [
        #"{"iss":"https://appleid.apple.com","aud":["a","b"],"exp":1795237158,"iat":1.5e9,"email_verified":"true","is_private_email":true,"n":null}"#,
        #"{"s":"quote \" backslash \\ slash \/ controls \b\f\n\r\t unicode \u00e9 \u2713 pair \ud83c\udf4e raw é 🍎"}"#,
        #"[0,-0,0.5,-12.25,1e5,1E+5,2.5e-3,1234567890123,{"a":{"b":[[]]}}]"#,
        #" { "spaced" : [ 1 , 2 ] } "#,
        #""just a string""#, "42", "true", "null",
    ])
    func matchesFoundation(_ text: String) throws {
        #expect(try JSONValue.parse(Data(text.utf8)) == Self.foundation(text))
    }

    @Test(arguments: [
        #"{"a":1,"a":2}"#, #"{"sub":"x","s\u0075b":"y"}"#, #"{"x":[{"k":1,"k":1}]}"#,
        #"{"s":"\ud83c"}"#, #"{"s":"\udf4e"}"#, #"{"s":"\ud83cx"}"#, #"{"s":"\u12"}"#, #"{"s":"\q"}"#,
        "{\"s\":\"raw\tcontrol\"}", #"{"a":01}"#, #"{"a":1e999}"#, #"{"a":-}"#, #"{"a":tru}"#, #"{"a":nul}"#,
        #"{"a":1,}"#, #"[1,]"#, #"{"a":1}x"#, "", "   ", #"{"s":"a\u0000b"}"#, #"{"a\u0000":1}"#,
    ])
    func refusesMalformedAndDuplicates(_ text: String) {
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Data(text.utf8)) }
    }

    @Test func refusesInvalidUTF8() {
        let bytes: [UInt8] = Array(#"{"s":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(bytes) }
    }

    @Test func accessors() throws {
        let value = try JSONValue.parse(Data(#"{"s":"x","n":2,"a":[true],"o":{}}"#.utf8))
        #expect(value["s"]?.string == "x" && value["n"]?.number == 2)
        #expect(value["a"]?.array == [.bool(true)] && value["o"]?.object == [:])
        #expect(value["missing"] == nil && value["s"]?.number == nil)
    }
}
