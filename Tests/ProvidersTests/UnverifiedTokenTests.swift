import BrokerCore
import Foundation
import Providers
import Testing

/// The subject a web callback reads its state's account status with before the token is
/// verified (decision 0039): read from a compact JWS's payload, nil for anything else.
@Suite struct UnverifiedTokenTests {
    func token(_ payload: String) -> String {
        "\(Base64URL.encode(Data(#"{"alg":"RS256"}"#.utf8))).\(Base64URL.encode(Data(payload.utf8))).c2ln"
    }

    @Test func theSubjectOfAPayload() {
        #expect(Providers.UnverifiedToken.subject(token(#"{"sub":"001234.abc","aud":"x"}"#)) == "001234.abc")
    }

    @Test func nothingForWhatIsNotACompactJWSWithASubject() {
        #expect(Providers.UnverifiedToken.subject(token(#"{"aud":"x"}"#)) == nil)
        #expect(Providers.UnverifiedToken.subject(token(#"{"sub":42}"#)) == nil)
        #expect(
            Providers.UnverifiedToken.subject(token(#"{"sub":"a","sub":"b"}"#)) == nil, "a repeated member is not JSON the broker reads")
        #expect(Providers.UnverifiedToken.subject(token("[1]")) == nil)
        #expect(Providers.UnverifiedToken.subject(token("{\"sub\":\"\(String(repeating: "a", count: 256))\"}")) == nil, "at most 255 bytes")
        #expect(Providers.UnverifiedToken.subject("no-dots") == nil)
        #expect(Providers.UnverifiedToken.subject("a.%%%.c") == nil)
        #expect(Providers.UnverifiedToken.subject("") == nil)
    }

    /// A token exchange's subject token: its issuer and audiences in one read.
    @Test func theIssuerAndAudiencesOfAPayload() {
        let both = Providers.UnverifiedToken.issuerAndAudiences(token(#"{"iss":"https://appleid.apple.com","aud":["a","b"]}"#))
        #expect(both.issuer == "https://appleid.apple.com" && both.audiences == ["a", "b"])
        let single = Providers.UnverifiedToken.issuerAndAudiences(token(#"{"iss":"i","aud":"only"}"#))
        #expect(single.issuer == "i" && single.audiences == ["only"])
        let long = Providers.UnverifiedToken.issuerAndAudiences(token("{\"iss\":\"\(String(repeating: "i", count: 256))\"}"))
        #expect(long.issuer == nil && long.audiences.isEmpty)
        let none = Providers.UnverifiedToken.issuerAndAudiences("not a token")
        #expect(none.issuer == nil && none.audiences.isEmpty)
    }
}
