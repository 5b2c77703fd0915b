import BrokerApplication
@testable import BrokerServer
import Foundation
import PropertyBased
import Providers
import Testing

/// How the OpenID Provider's route reads what a browser and a client send (issue 42 §2): forms
/// and queries with repeats kept, HTTP Basic client credentials (form-encoded inside, RFC 6749
/// §2.3.1), and the page's language.
@Suite struct OpenIDProviderRequestReadingTests {
    @Test func aFormReadsBackWhatWasEncodedWithRepeatsNamed() async {
        let alphabet = Array("aZ0 +&=%/?#é日\u{1F600}.-_~")
        await propertyCheck(count: 1_000, input: Gen.int(in: 0...Int(Int32.max)), Gen.int(in: 0...12)) { seed, length in
            let value = String((0..<length).map { alphabet[(seed &+ $0 &* 31) % alphabet.count] })
            let encoded = FormEncoding.encode([("state", value), ("scope", "openid email"), ("state", "again")])
            let (fields, repeated) = OpenIDProviderRoute.fields(OpenIDProviderRoute.formPairs(encoded))
            #expect(fields["scope"] == "openid email")
            if value.isEmpty {
                #expect(fields["state"] == "again" && repeated.isEmpty, "an empty value counts as not given")
            } else {
                #expect(fields["state"] == value, "\(encoded)")
                #expect(repeated == ["state"])
            }
        }
        // `+` is a space in a form; `%2B` is a plus.
        #expect(
            OpenIDProviderRoute.fields(OpenIDProviderRoute.formPairs("scope=openid+email&x=a%2Bb")).fields == [
                "scope": "openid email", "x": "a+b",
            ])
    }

    @Test func clientCredentialsComeOneWayOnly() throws {
        func basic(_ id: String, _ secret: String) -> String {
            "Basic " + Data("\(id):\(secret)".utf8).base64EncodedString()
        }
        let read = OpenIDProviderRoute.clientCredentials
        // Form-encoded inside the header: a secret with a colon or a percent arrives whole.
        let found = try read(basic("ibc_a", "s%3Ae%25t"), [:]).get()
        #expect(found.clientID == "ibc_a" && found.secret == "s:e%t" && found.method == .basic)
        #expect(try read(nil, ["client_id": "ibc_a", "client_secret": "x"]).get().method == .post)
        #expect(try read(nil, ["client_id": "ibc_a"]).get().method == TokenService.ClientCredentials.Method.none)
        let refused: [(String?, [String: String], String)] = [
            (basic("ibc_a", "x"), ["client_secret": "x"], "invalid_request"),
            (basic("ibc_a", "x"), ["client_id": "ibc_b"], "invalid_request"),
            ("Basic !!!", [:], "invalid_client"),
            ("Bearer abc", [:], "invalid_client"),
            ("Basic " + Data("no-colon".utf8).base64EncodedString(), [:], "invalid_client"),
            (nil, [:], "invalid_client"),
        ]
        for (header, fields, error) in refused {
            guard case .failure(let refusal) = read(header, fields) else {
                Issue.record("\(header ?? "-") \(fields) was accepted")
                continue
            }
            #expect(refusal.error == error, "\(header ?? "-") \(fields)")
        }
    }

    @Test func thePagesLanguageIsUILocalesThenAcceptLanguage() {
        let choose = SignInPageRenderer.Language.chosen
        #expect(choose(nil, nil) == .en)
        #expect(choose(nil, "ja-JP,ja;q=0.9,en;q=0.8") == .ja)
        #expect(choose(nil, "en;q=0.5, ja;q=0.8") == .ja)
        #expect(choose(nil, "fr, en;q=0.3, ja;q=0.2") == .en)
        #expect(choose(nil, "ja;q=0") == .en)
        #expect(choose("fr ja", "en") == .ja, "ui_locales first")
        #expect(choose("de", "ja") == .ja, "ui_locales without a known language falls back")
    }
}
