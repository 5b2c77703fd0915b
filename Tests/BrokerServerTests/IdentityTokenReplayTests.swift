import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import MockIdP
import PostgresNIO
import Storage
import TestSupport
import Testing

/// An identity token signs in once per tenant (decision 0018).
@Suite struct IdentityTokenReplayTests {
    func count(_ table: String, _ setup: AppleTestSetup) async throws -> Int {
        let rows = try await setup.app.database.client.query(
            PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM \(table)"), logger: TestDatabase.logger)
        var total = 0
        for try await value in rows.decode(Int.self) { total = value }
        return total
    }

    @Test func theSameTokenTwiceIsRefusedTheSecondTimeAndWritesNothing() async throws {
        try await AppleTestSetup.run { setup in
            let token = try setup.token(subject: "replayed.new.user")
            let body: [String: Any] = ["client_id": "com.acme.app", "identity_token": token]
            let first = try await setup.post("/v1/sign-in/apple", json: body)
            #expect(first.status == .ok)
            for _ in 0..<4 {
                let again = try await setup.post("/v1/sign-in/apple", json: body)
                #expect(again.status == .unauthorized)
                #expect(again.problemCode == "token_replayed")
            }
            #expect(try await count("accounts", setup) == 1)
            #expect(try await count("identities", setup) == 1)
            #expect(try await count("sessions", setup) == 1, "five posts, one session")
            // The person signs in again with a fresh token: fine.
            #expect(
                try await setup.post(
                    "/v1/sign-in/apple",
                    json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "replayed.new.user")]
                ).status == .ok)
        }
    }

    @Test func aReplayOfTheFirstTokenOfANewUserRacingItsFirstUseLeavesOneAccount() async throws {
        try await AppleTestSetup.run { setup in
            let token = try setup.token(subject: "racing.user")
            let statuses = try await withThrowingTaskGroup(of: Int.self, returning: [Int].self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token]).status.code
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == 401 }.count == 5, "\(statuses)")
            #expect(try await count("accounts", setup) == 1)
            #expect(try await count("sessions", setup) == 1)
        }
    }

    @Test func twoTokensWithOneJtiAreOneToken() async throws {
        try await AppleTestSetup.run { setup in
            let first = try setup.token(subject: "jti.user", extra: ["jti": .string("token-id-1")])
            let second = try setup.token(subject: "jti.user", email: "other@example.com", extra: ["jti": .string("token-id-1")])
            #expect(first != second)
            #expect(try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": first]).status == .ok)
            let replay = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": second])
            #expect(replay.problemCode == "token_replayed")
            let fresh = try setup.token(subject: "jti.user", extra: ["jti": .string("token-id-2")])
            #expect(try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": fresh]).status == .ok)
        }
    }

    @Test func twoTokensWithOneJtiIssuedSecondsApartAreOneToken() async throws {
        try await AppleTestSetup.run { setup in
            // Session ids are ordered by `iat` only for keys that cover it (decision 0023): a
            // `jti` key does not, so another `iat` must not make another token.
            let first = try setup.token(
                subject: "jti.apart", issuedAt: Date().addingTimeInterval(-30), extra: ["jti": .string("token-id-9")])
            let second = try setup.token(subject: "jti.apart", extra: ["jti": .string("token-id-9")])
            #expect(try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": first]).status == .ok)
            let replay = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": second])
            #expect(replay.problemCode == "token_replayed")
        }
    }

    @Test func aReturningUsersReplayIsRefusedOnTheQuietPathToo() async throws {
        try await AppleTestSetup.run { setup in
            // Two sign-ins make the identity one this process has seen (the quiet statement).
            for _ in 0..<2 {
                #expect(
                    try await setup.post(
                        "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: "quiet.user")]
                    ).status == .ok)
            }
            let token = try setup.token(subject: "quiet.user")
            #expect(try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token]).status == .ok)
            let replay = try await setup.post("/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token])
            #expect(replay.problemCode == "token_replayed")
            #expect(try await count("sessions", setup) == 3)
        }
    }
    /// Returning sign-ins arriving together are written in batches (decision 0030): a token
    /// posted six times at once among other people's sign-ins opens one session, and the
    /// others' sign-ins are not held back by it.
    @Test func aReturningUsersTokenPostedSixTimesAtOnceAmongOthersOpensOneSession() async throws {
        try await AppleTestSetup.run { setup in
            let subjects = ["replayed.user"] + (0..<10).map { "batched.user\($0)" }
            for _ in 0..<2 {
                for subject in subjects {
                    let response = try await setup.post(
                        "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": try setup.token(subject: subject)])
                    #expect(response.status == .ok)
                }
            }
            let replayed = try setup.token(subject: "replayed.user")
            var bodies: [(String, String)] = (0..<6).map { _ in ("replayed", replayed) }
            for subject in subjects.dropFirst() { bodies.append((subject, try setup.token(subject: subject))) }
            let before = try await count("sessions", setup)
            let statuses = try await withThrowingTaskGroup(of: (String, Int, String?).self, returning: [(String, Int, String?)].self) {
                group in
                for (who, token) in bodies {
                    group.addTask {
                        let response = try await setup.post(
                            "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token])
                        return (who, response.status.code, response.problemCode)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let replays = statuses.filter { $0.0 == "replayed" }
            #expect(replays.filter { $0.1 == 200 }.count == 1, "\(replays)")
            #expect(replays.filter { $0.1 == 401 && $0.2 == "token_replayed" }.count == 5, "\(replays)")
            #expect(statuses.filter { $0.0 != "replayed" }.allSatisfy { $0.1 == 200 }, "\(statuses)")
            #expect(try await count("sessions", setup) == before + 1 + subjects.count - 1)
        }
    }
}
