import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import MockIdP
import PostgresNIO
import Storage
import Testing

/// Issue 20 §2: a provider's answer never crashes the process. MockIdP serves mutated answers
/// over HTTP (numbers out of range, negative and fractional, wrong types, nulls, deep nesting,
/// long strings, invalid UTF-8) to the broker running in this process: a trap would end the test
/// process itself. Each answer is 503 (the provider misbehaving) or 401 (a token Graph does not
/// vouch for), and nothing is created.
@Suite struct ProviderAnswerFuzzTests {
    typealias S = ProviderTestSetup

    /// Values that fit no member of a provider's answer (or, for "string", not this one).
    static let oddValues: [(name: String, json: String)] = [
        ("1e300", "1e300"), ("-1e300", "-1e300"), ("-1", "-1"), ("1.5", "1.5"), ("2^63", "9223372036854775808"),
        ("string", #""string""#), ("null", "null"), ("true", "true"), ("object", #"{"a":1}"#), ("array", "[1,2]"),
        ("deep", String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)),
        ("64 KiB string", "\"" + String(repeating: "9", count: 65_536) + "\""),
    ]

    /// Whole bodies that are no answer at all.
    static let oddBodies: [(name: String, body: Data)] = [
        ("invalid UTF-8", Data([0x7B, 0x22, 0x64, 0x22, 0x3A, 0x22, 0xFF, 0xFE, 0xC3, 0x22, 0x7D])),
        ("deep", Data((String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)).utf8)),
        ("1 MiB string", Data(("\"" + String(repeating: "x", count: 1 << 20) + "\"").utf8)),
        ("array", Data("[]".utf8)), ("empty", Data()), ("number", Data("1e300".utf8)),
    ]

    /// A JSON object text with `members`, one of them replaced by `odd`.
    static func object(_ members: [(String, String)], replacing name: String, with odd: String) -> Data {
        Data(("{" + members.map { "\"\($0.0)\":\($0.0 == name ? odd : $0.1)" }.joined(separator: ",") + "}").utf8)
    }

    func classic(_ setup: S) -> String {
        setup.facebook.issueAccessToken(appID: S.appID, userID: "10001", name: "Ada Lovelace", email: "ada@example.com")
    }

    /// Posts a classic sign-in and checks the answer is 503 provider_unavailable or 401.
    func expectRefused(_ setup: S, _ label: String) async throws {
        let response = try await setup.post("/v1/sign-in/facebook", json: ["access_token": classic(setup)])
        #expect(response.status == .serviceUnavailable || response.status == .unauthorized, "\(label): \(response.status)")
        if response.status == .serviceUnavailable { #expect(response.problemCode == "provider_unavailable", "\(label)") }
    }

    @Test func mutatedDebugTokenAnswersAre503Or401AndCreateNothing() async throws {
        try await S.run { setup in
            let members = [
                ("app_id", "\"\(S.appID)\""), ("is_valid", "true"), ("user_id", "\"10001\""), ("expires_at", "0"),
                ("type", "\"USER\""),
            ]
            for member in ["expires_at", "user_id", "app_id", "is_valid"] {
                // `true` is the one value is_valid may have.
                for odd in Self.oddValues where !(member == "is_valid" && odd.name == "true") {
                    let data = Self.object(members, replacing: member, with: odd.json)
                    var body = Data(#"{"data":"#.utf8)
                    body.append(data)
                    body.append(Data("}".utf8))
                    setup.facebook.debugTokenFault = .answer(status: 200, body: body)
                    try await expectRefused(setup, "debug_token \(member) \(odd.name)")
                }
            }
            for odd in Self.oddValues {
                setup.facebook.debugTokenFault = .answer(status: 200, body: Data(#"{"data":\#(odd.json)}"#.utf8))
                try await expectRefused(setup, "debug_token data \(odd.name)")
            }
            for odd in Self.oddBodies {
                for status in [200, 400] {
                    setup.facebook.debugTokenFault = .answer(status: status, body: odd.body)
                    try await expectRefused(setup, "debug_token body \(odd.name) \(status)")
                }
            }
            #expect(try await setup.count("accounts") == 0)
            #expect(try await setup.count("identities") == 0)
            #expect(try await setup.count("sessions") == 0)
            // Graph behaves again: the broker is up and signs in.
            setup.facebook.debugTokenFault = .none
            #expect(try await setup.post("/v1/sign-in/facebook", json: ["access_token": classic(setup)]).status == .ok)
        }
    }

    @Test func mutatedMeAnswersAre503Or401AndCreateNothing() async throws {
        try await S.run { setup in
            let members = [("id", "\"10001\""), ("name", "\"Ada Lovelace\""), ("email", "\"ada@example.com\"")]
            for member in ["id", "name", "email"] {
                for odd in Self.oddValues where !(member != "id" && odd.name == "string") {
                    setup.facebook.meFault = .answer(status: 200, body: Self.object(members, replacing: member, with: odd.json))
                    try await expectRefused(setup, "me \(member) \(odd.name)")
                }
            }
            // An id Graph could not have sent: a huge number, one past 2^53.
            for id in ["1e300", "9007199254740993", "10001.5", "-10001"] {
                setup.facebook.meFault = .answer(status: 200, body: Self.object(members, replacing: "id", with: id))
                try await expectRefused(setup, "me id \(id)")
            }
            for odd in Self.oddBodies {
                setup.facebook.meFault = .answer(status: 200, body: odd.body)
                try await expectRefused(setup, "me body \(odd.name)")
            }
            #expect(try await setup.count("accounts") == 0)
            #expect(try await setup.count("identities") == 0)
            setup.facebook.meFault = .none
            #expect(try await setup.post("/v1/sign-in/facebook", json: ["access_token": classic(setup)]).status == .ok)
        }
    }

    @Test func mutatedAppleTokenAnswersAre503AndCreateNothing() async throws {
        try await AppleTestSetup.run { setup in
            let idToken = try setup.token(subject: "fuzz")
            let members = [
                ("access_token", "\"a\""), ("token_type", "\"Bearer\""), ("expires_in", "3600"), ("refresh_token", "\"r\""),
                ("id_token", "\"\(idToken)\""),
            ]
            var answers: [(String, Data)] = []
            for member in ["expires_in", "refresh_token", "id_token", "access_token"] {
                for odd in Self.oddValues where !(member != "expires_in" && odd.name == "string") {
                    answers.append(("\(member) \(odd.name)", Self.object(members, replacing: member, with: odd.json)))
                }
            }
            answers += Self.oddBodies.map { ("body \($0.name)", $0.body) }
            for (label, body) in answers {
                setup.apple.tokenFault = .answer(status: 200, body: body)
                let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "fuzz")
                let response = try await setup.post(
                    "/v1/sign-in/apple",
                    json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "fuzz"), "authorization_code": code])
                #expect(response.status == .serviceUnavailable, "\(label): \(response.status)")
                #expect(["apple_bad_response", "apple_unavailable"].contains(response.problemCode ?? ""), "\(label)")
            }
            var accounts = 0
            for try await count in try await setup.app.database.client.query("SELECT count(*)::int FROM accounts").decode(Int.self) {
                accounts = count
            }
            #expect(accounts == 0)
            setup.apple.tokenFault = .none
            let code = setup.apple.issueCode(clientID: "com.acme.app", subject: "fuzz")
            let good = try await setup.post(
                "/v1/sign-in/apple",
                json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "fuzz"), "authorization_code": code])
            #expect(good.status == .ok)
        }
    }
}
