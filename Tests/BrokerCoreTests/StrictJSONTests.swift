import BrokerCore
import Foundation
import Testing

/// The strict rules of `JSONValue.parse`, which the verifier reads a token's header and payload
/// with: well-formed JSON, no duplicate member names, nesting capped.
@Suite struct StrictJSONTests {
    func accepts(_ text: String) -> Bool { (try? JSONValue.parse(Data(text.utf8))) != nil }

    @Test(arguments: [
        #"{}"#,
        #"[]"#,
        #"{"a":1}"#,
        #" { "a" : 1 , "b" : [ ] } "#,
        "{\n\t\"a\":\r\n1}\n",
        #"{"a":{"b":[1,2,{"c":true,"d":false,"e":null}]},"f":"x\"y","g":-1.5e+3}"#,
        #"{"a":{"a":{"a":1}}}"#,
        #"[{"a":1},{"a":2}]"#,
        #"{"x":{"k":1},"y":{"k":2}}"#,
        #"{"a\u0062":1,"b":2}"#,
        #"{"s":"a\\b","t":"\u00e9\n","u":"é"}"#,
        #""just a string""#,
        #"42"#,
        #"true"#,
        #"[0,-0,0.5,-12.25,1e5,1E+5,2.5e-3,1234567890123]"#,
    ])
    func validJSONIsAccepted(_ text: String) {
        #expect(accepts(text))
        #expect((try? JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)) != nil)
    }

    @Test(arguments: [
        #"{"a":1,"a":2}"#,
        #"{"a":1,"a":1}"#,
        #"{"a":{"b":1,"b":2}}"#,
        #"[{"a":1,"a":1}]"#,
        #"{"a":[{"x":1},{"y":{"z":1,"z":2}}]}"#,
        #"{"a":[[[{"deep":1,"deep":2}]]]}"#,
        #"{"sub":"x","s\u0075b":"y"}"#,
        #"{"\u0073\u0075\u0062":"x","sub":"y"}"#,
        #"{"a\/b":1,"a/b":2}"#,
        #"{"é":1,"\u00e9":2}"#,
    ])
    func duplicatesAtAnyDepthAreRefused(_ text: String) {
        #expect(!accepts(text))
    }

    @Test(arguments: [
        #"{"a":1}x"#,
        #"{"a":1}{}"#,
        #"{"a":1},"#,
        #"{"a":1}}"#,
        #"[1]]"#,
        #"{"a":1} 2"#,
        "{\"a\":1}\u{0}",
    ])
    func trailingGarbageIsRefused(_ text: String) {
        #expect(!accepts(text))
    }

    @Test(arguments: [
        "",
        " ",
        #"{"#,
        #"{"a"}"#,
        #"{"a":}"#,
        #"{"a":1,}"#,
        #"{a:1}"#,
        #"{"a":1 "b":2}"#,
        #"{"a":"unterminated}"#,
        "{\"a\":\"raw\ncontrol\"}",
        #"[1,]"#,
        #"{"a":tru}"#,
        #"{"a":undefined}"#,
        #"{"a\u00zz":1}"#,
        #"{"a":01}"#,
        #"{"a":+1}"#,
        #"{"a":.5}"#,
        #"{"a":1.}"#,
        #"{"a":1e}"#,
        #"{"a":-}"#,
        #"{"a":NaN}"#,
        #"{"a":Infinity}"#,
        #"{"a":inf}"#,
        #"{"a":0x10}"#,
        #"{"a":truefalse}"#,
    ])
    func malformedJSONIsRefused(_ text: String) {
        #expect(!accepts(text))
    }

    @Test func nestingIsCapped() {
        let shallow = String(repeating: "[", count: 31) + String(repeating: "]", count: 31)
        #expect(accepts(shallow))
        let deep = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(!accepts(deep))
        let deepObjects = String(repeating: #"{"a":"#, count: 64) + "1" + String(repeating: "}", count: 64)
        #expect(!accepts(deepObjects))
    }
}
