import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Storage
import Testing
import TestSupport

/// Statements that touch one account at once (issue 39 C10): four sign-ins and one deletion of
/// each of 20 accounts, released together behind a barrier. A sign-in locked the identity and
/// then the account, a deletion the account and then its identities: deadlocks answered 500 and
/// a failed deletion left the account active; a session insert met an identity the deletion had
/// just removed (`sessions_account_identity_fkey`). No answer may be a 500, every deletion
/// completes, and no session outlives its account.
@Suite struct AccountRaceTests {
    @Test(arguments: [false, true])
    func signInsAndDeletionsOfOneAccountAtOnceAreNever500(changedEmail: Bool) async throws {
        try await AppleTestSetup.run { setup in
            for round in 0..<5 {
                let people = 20
                var accounts: [String] = []
                for n in 0..<people {
                    let body = try await setup.signIn([
                        "client_id": "com.acme.app", "identity_token": try setup.token(subject: "race-\(round)-\(n)"),
                    ])
                    accounts.append(try #require(body[path: "account.id"] as? String))
                }
                let tokens = try (0..<people).map { n in
                    try (0..<4).map { k in
                        try setup.token(
                            subject: "race-\(round)-\(n)", email: changedEmail ? "new-\(n)-\(k)@example.com" : "person@example.com")
                    }
                }
                let barrier = Barrier(count: people * 5)
                let statuses = try await withThrowingTaskGroup(of: (String, Int).self) { group in
                    for n in 0..<people {
                        for token in tokens[n] {
                            group.addTask {
                                await barrier.arrive()
                                let response = try await setup.post(
                                    "/v1/sign-in/apple", json: ["client_id": "com.acme.app", "identity_token": token])
                                return ("sign-in", Int(response.status.code))
                            }
                        }
                        let account = accounts[n]
                        group.addTask {
                            await barrier.arrive()
                            let response = try await setup.client.execute(
                                uri: "/v1/accounts/\(account)", method: .delete, headers: bearer(setup.apiKey))
                            return ("delete", Int(response.status.code))
                        }
                    }
                    var all: [(String, Int)] = []
                    for try await status in group { all.append(status) }
                    return all
                }
                #expect(statuses.filter { $0.1 >= 500 }.isEmpty, "\(statuses.filter { $0.1 >= 500 })")
                #expect(statuses.filter { $0.0 == "delete" }.allSatisfy { $0.1 == 200 }, "\(statuses.filter { $0.0 == "delete" })")
                let rows = try await setup.app.database.client.query(
                    "SELECT count(*)::int FROM accounts WHERE id = ANY(\(accounts.compactMap(UUID.init(uuidString:)))) AND status <> 'deleted'"
                ).collect()
                #expect(try rows.first?.decode(Int.self) == 0, "every deletion completed")
                let live = try await setup.app.database.client.query(
                    """
                    SELECT count(*)::int FROM sessions s JOIN accounts a ON a.id = s.account_id
                    WHERE a.status = 'deleted' AND s.revoked_at IS NULL
                    """
                ).collect()
                #expect(try live.first?.decode(Int.self) == 0, "no live session of a deleted account")
            }
        }
    }
}
