import Crypto
import Foundation
import Synchronization

/// Apple's user migration for team transfers, as the mock answers it: the `client_credentials`
/// grant (scope `user.migration`) gives a team an access token; `/auth/usermigrationinfo` gives
/// the sending team a person's `transfer_sub` for a target team, and gives the target team the
/// person's new `sub` and relay email for it. Subjects are derived, so a test can mint the
/// sign-in tokens of the transition window (``subjectAfterTransfer(_:to:)``,
/// ``transferSubject(of:to:)``).
extension MockAppleIdP {
    struct Transfer {
        let sourceTeam: String
        let subject: String
        let target: String
    }

    /// The `transfer_sub` of `subject` for the team `target`.
    public static func transferSubject(of subject: String, to target: String) -> String {
        "t." + digest("transfer|\(subject)|\(target)")
    }

    /// The person's `sub` in the team `target` after a transfer.
    public static func subjectAfterTransfer(_ subject: String, to target: String) -> String {
        "002" + digest("moved|\(subject)|\(target)").prefix(32) + ".0001"
    }

    /// How many calls `/auth/usermigrationinfo` answered.
    public var migrationCalls: Int { state.withLock { $0.migrationCalls } }

    /// The status `/auth/usermigrationinfo` answers (with `server_error` or `invalid_request`);
    /// nil: answer normally.
    public var migrationFault: Int? {
        get { state.withLock { $0.migrationFault } }
        set { state.withLock { $0.migrationFault = newValue } }
    }

    /// The access token of the client's team, for `client_credentials` with scope `user.migration`.
    func migrationToken(_ request: TokenRequest, clientID: String) -> TokenAnswer {
        guard request.scope?.split(separator: " ").contains("user.migration") == true else {
            return .error(status: 400, code: "invalid_scope")
        }
        guard let secret = request.client_secret, let team = Self.team(ofClientSecret: secret) else {
            return .error(status: 400, code: "invalid_client")
        }
        let token = "m" + UUID().uuidString.lowercased().filter { $0 != "-" }
        state.withLock { $0.migrationTokens[token] = team }
        return .success(
            MockJSON.object([("access_token", .string(token)), ("token_type", .string("Bearer")), ("expires_in", .int(3600))]))
    }

    /// `/auth/usermigrationinfo`: the status and JSON body.
    public func migrationInfoAnswer(_ form: [String: String], authorization: String?, now: Date = Date()) -> (Int, Data) {
        func error(_ status: Int, _ code: String) -> (Int, Data) { (status, MockJSON.object([("error", .string(code))])) }
        let fault = state.withLock { state -> Int? in
            state.migrationCalls += 1
            return state.migrationFault
        }
        if let fault { return error(fault, fault >= 500 ? "server_error" : "invalid_request") }
        guard let authorization, authorization.hasPrefix("Bearer "),
            let team = state.withLock({ $0.migrationTokens[String(authorization.dropFirst(7))] })
        else { return error(401, "invalid_token") }
        guard let clientID = form["client_id"], let secret = form["client_secret"], checkClientSecret(secret, clientID: clientID, now: now),
            Self.team(ofClientSecret: secret) == team
        else { return error(400, "invalid_client") }
        if let subject = form["sub"], let target = form["target"], !subject.isEmpty, !target.isEmpty {
            let transfer = Self.transferSubject(of: subject, to: target)
            state.withLock { $0.transfers[transfer] = Transfer(sourceTeam: team, subject: subject, target: target) }
            return (200, MockJSON.object([("transfer_sub", .string(transfer))]))
        }
        if let transfer = form["transfer_sub"] {
            guard let found = state.withLock({ $0.transfers[transfer] }), found.target == team else {
                return error(400, "invalid_request")
            }
            let subject = Self.subjectAfterTransfer(found.subject, to: team)
            return (
                200,
                MockJSON.object([
                    ("sub", .string(subject)), ("email", .string("\(subject.prefix(12))@privaterelay.appleid.com")),
                    ("is_private_email", .string("true")),
                ])
            )
        }
        return error(400, "invalid_request")
    }

    /// The team (`iss`) a client secret names, unverified (``checkClientSecret`` verifies it).
    static func team(ofClientSecret secret: String) -> String? {
        let parts = secret.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let payload = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return payload["iss"] as? String
    }

    private static func digest(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
