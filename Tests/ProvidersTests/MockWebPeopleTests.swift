import Foundation
import Synchronization
import Testing

@testable import MockIdP

/// `mock-idp serve --web-people N`, the code-flow benchmark's returning round: every consent on
/// a web authorize page is the next of N people in turn, so the second N consents are the first
/// N people again, on Apple's page and on an OpenID Connect issuer's.
@Suite struct MockWebPeopleTests {
    @Test func appleConsentsGoRoundThePeople() throws {
        let apple = try MockAppleIdP()
        apple.webPeople = 3
        let query = [
            "client_id": "com.acme.web", "redirect_uri": "https://acme.example.com/cb", "response_type": "code id_token",
            "response_mode": "form_post", "state": "s",
        ]
        var subjects: [String] = []
        for _ in 0..<7 {
            let form = try #require(try apple.authorizeForm(query))
            let code = try #require(form.fields.first { $0.0 == "code" }?.1)
            subjects.append(try #require(apple.state.withLock { $0.codes[code]?.subject }))
        }
        #expect(Set(subjects).count == 3)
        #expect(Array(subjects[3..<6]) == Array(subjects[0..<3]), "the second round is the first round's people")
        #expect(subjects[6] == subjects[0])
    }

    @Test func anIssuersConsentsGoRoundThePeople() throws {
        let flow = MockCodeFlow()
        flow.people = 2
        flow.state.withLock { $0.clients["client"] = "secret" }
        var subjects: [String] = []
        for n in 0..<4 {
            let location = try #require(
                flow.authorizeRedirect([
                    "response_type": "code", "client_id": "client", "redirect_uri": "https://acme.example.com/cb", "scope": "openid",
                    "state": "s\(n)",
                ]))
            let code = try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value)
            subjects.append(try #require(flow.state.withLock { $0.codes[code]?.user.subject }))
        }
        #expect(subjects == ["person0", "person1", "person0", "person1"])
    }
}
