import BrokerApplication
import BrokerCore
@testable import BrokerServer
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Providers
import Storage
import TestSupport
import Testing

/// Decision 0099 across an upgrade: a sign-in a broker of an earlier version started has its
/// state stored as a row, in the form of decision 0092 (it names its tenant) or the one before
/// (it names none). Its callback, arriving at this version, still completes it through the
/// whole browser flow, and a replay of it is refused.
@Suite(.timeLimit(.minutes(5))) struct WebSignInUpgradeTests {
    enum EarlierForm: CaseIterable, Sendable {
        case namesItsTenant
        case random
    }

    @Test(arguments: EarlierForm.allCases)
    func aStateStoredByAnEarlierVersionCompletesOnce(form: EarlierForm) async throws {
        try await AppleTestSetup.run { setup in
            let service = setup.app.services.webSignIn
            let authorize = try await AppleWebSignInTests.start(setup, state: "before-upgrade")
            let query = WebBrowser.query(authorize)
            let sealedText = try #require(query["state"])
            let nonce = try #require(query["nonce"])
            // The same sign-in, as the earlier version kept it: a row under the hash of its state.
            let stored =
                switch form {
                case .namesItsTenant: WebSignInStateToken.make(tenantID: setup.tenant.id)
                case .random: Base64URL.encode(SecureRandom.bytes(32))
                }
            #expect(WebSignInStateToken.sealedBox(of: stored) == nil)
            var row = try #require(SealedWebSignInState.open(sealedText, secrets: service.secrets))
            row.stateHash = WebSignInService.hash(stored)
            try await TenantScope.tenant(setup.tenant.id) { try await setup.app.database.webSignIns.createState(row) }
            let request = service.request(for: stored)
            let earlier =
                authorize
                .replacingOccurrences(of: "state=\(sealedText)", with: "state=\(stored)")
                .replacingOccurrences(of: "nonce=\(nonce)", with: "nonce=\(request.nonce)")
            #expect(WebBrowser.query(earlier)["state"] == stored)

            let form = try #require(WebBrowser.form(in: try await WebBrowser.get(earlier).body))
            let back = try await AppleWebSignInTests.browser(setup).submit(action: form.action, fields: form.fields)
            let returned = WebBrowser.query(try #require(back.location))
            #expect(returned["state"] == "before-upgrade")
            let code = try #require(returned["code"], "\(returned)")
            let exchanged = try await AppleWebSignInTests.exchange(setup, code: code)
            #expect(exchanged.status == .ok, "\(String(buffer: exchanged.body))")

            // Replayed after it completed (its code exchanged): refused, nothing more written.
            let replay = try await AppleWebSignInTests.browser(setup).submit(action: form.action, fields: form.fields)
            #expect(replay.status == 400)
            let rows = try await setup.app.database.client.query("SELECT count(*)::int8 FROM web_sign_in_states")
            for try await count in rows.decode(Int.self) { #expect(count == 1, "the earlier version's row alone") }
        }
    }
}
