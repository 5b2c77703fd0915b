import Crypto
import Foundation
import JWTKit
import Synchronization

/// Classic Facebook Login as Graph answers it: apps with secrets, opaque user access tokens,
/// `GET /debug_token` (with the app access token `<app id>|<app secret>`) and `GET /me` (with the
/// user token and `appsecret_proof`). Bodies follow Graph's (v24.0) shapes.
extension MockFacebookIdP {
    /// An answer of a Graph endpoint.
    public enum GraphAnswer: Sendable, Equatable {
        case response(status: Int, body: Data)
        /// Reset the connection without answering.
        case resetConnection
        /// Do not answer (``GraphFault/hang``).
        case noAnswer
        /// The head at once, then the body one byte a second (``GraphFault/slowBody``).
        case slowBody(status: Int, body: Data)
    }

    /// Registers an app; `debug_token` accepts `"\(appID)|\(secret)"` as its access token and
    /// `/me` checks `appsecret_proof` with `secret`. Registering again replaces the secret.
    public func registerApp(appID: String, secret: String, name: String = "Mock App") {
        graph.withLock { $0.apps[appID] = GraphApp(secret: secret, name: name) }
    }

    /// A new opaque user access token for `userID` in `appID` ("EAA" and random letters).
    /// `expiresAt` nil: the token never expires (`expires_at` 0). The app need not be
    /// registered, but `/me` refuses every proof for a token of an unregistered app.
    public func issueAccessToken(
        appID: String, userID: String, name: String? = nil, email: String? = nil, expiresAt: Date? = nil,
        issuedAt: Date = Date()
    ) -> String {
        let token = "EAA" + randomAlphanumeric(96)
        let issued = IssuedAccessToken(appID: appID, userID: userID, name: name, email: email, issuedAt: issuedAt, expiresAt: expiresAt)
        graph.withLock { $0.tokens[token] = issued }
        return token
    }

    /// Forgets a token: Graph then answers for it as for an unknown token.
    public func invalidate(token: String) {
        graph.withLock { $0.tokens[token] = nil }
    }

    /// Every `appsecret_proof` `/me` received, with the access token it came with, in order.
    public var receivedProofs: [(token: String, proof: String)] { graph.withLock { $0.proofs } }

    /// The `appsecret_proof` Graph expects for `token`: lowercase hex HMAC-SHA256 keyed by the
    /// app secret.
    public static func appSecretProof(token: String, secret: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return mac.map { String(format: "%02x", $0) }.joined()
    }

    /// `GET debug_token?input_token=…&access_token=<app id>|<app secret>`.
    ///
    /// The answer describes the input token whatever app it belongs to: a token issued to
    /// another registered app is `is_valid: true` with that app's `app_id`. Graph does the same;
    /// the broker must compare `app_id` with its own app itself.
    public func debugTokenAnswer(inputToken: String?, accessToken: String?, now: Date = Date()) -> GraphAnswer {
        debugTokenAnswer(inputToken: inputToken, accessToken: accessToken, now: now, count: true)
    }

    /// `GET me?fields=…&access_token=…&appsecret_proof=…`: only the fields asked for (default
    /// `id,name`) that the mock knows (`id`, `name`, `email`).
    public func meAnswer(fields: String?, accessToken: String?, appsecretProof: String?, now: Date = Date()) -> GraphAnswer {
        meAnswer(fields: fields, accessToken: accessToken, appsecretProof: appsecretProof, now: now, count: true)
    }

    func debugTokenAnswer(inputToken: String?, accessToken: String?, now: Date, count: Bool) -> GraphAnswer {
        let (fault, apps, issued) = graph.withLock { state in
            if count { state.debugTokenCalls += 1 }
            return (state.debugTokenFault, state.apps, inputToken.flatMap { state.tokens[$0] })
        }
        if let answer = Self.transportAnswer(fault) { return answer }
        guard let accessToken, let bar = accessToken.firstIndex(of: "|"),
            let app = apps[String(accessToken[..<bar])], app.secret == accessToken[accessToken.index(after: bar)...]
        else { return Self.error(400, "Invalid OAuth access token - Cannot parse access token", type: "OAuthException", code: 190) }
        guard let inputToken, !inputToken.isEmpty else {
            return Self.error(400, "(#100) The parameter input_token is required", type: "OAuthException", code: 100)
        }
        guard let issued else {
            return Self.ok([
                "data": .object([
                    "error": .object(["code": .int(190), "message": .string("Invalid OAuth access token.")]),
                    "is_valid": .bool(false), "scopes": .array([]),
                ])
            ])
        }
        let issuedAt = Int(issued.issuedAt.timeIntervalSince1970)
        var data: [String: JWTHeaderField] = [
            "app_id": .string(issued.appID), "type": .string("USER"),
            "application": .string(apps[issued.appID]?.name ?? "Mock App"),
            "data_access_expires_at": .int(issuedAt + 90 * 86_400),
            "expires_at": .int(issued.expiresAt.map { Int($0.timeIntervalSince1970) } ?? 0),
            "is_valid": .bool(true), "issued_at": .int(issuedAt),
            "scopes": .array([.string("email"), .string("public_profile")]),
            "user_id": .string(fault == .otherUser ? "1" + issued.userID : issued.userID),
        ]
        if let expiresAt = issued.expiresAt, expiresAt <= now {
            data["is_valid"] = .bool(false)
            data["error"] = .object([
                "code": .int(190), "message": .string(Self.expiredMessage(expiresAt, now: now)), "subcode": .int(463),
            ])
        }
        return Self.ok(["data": .object(data)])
    }

    func meAnswer(fields: String?, accessToken: String?, appsecretProof: String?, now: Date, count: Bool) -> GraphAnswer {
        let (fault, secret, issued) = graph.withLock { state in
            if count {
                state.meCalls += 1
                if let appsecretProof { state.proofs.append((accessToken ?? "", appsecretProof)) }
            }
            let issued = accessToken.flatMap { state.tokens[$0] }
            return (state.meFault, issued.flatMap { state.apps[$0.appID]?.secret }, issued)
        }
        if let answer = Self.transportAnswer(fault) { return answer }
        guard let accessToken, let issued else {
            return Self.error(400, "Invalid OAuth access token - Cannot parse access token", type: "OAuthException", code: 190)
        }
        if let expiresAt = issued.expiresAt, expiresAt <= now {
            return Self.error(400, Self.expiredMessage(expiresAt, now: now), type: "OAuthException", code: 190, subcode: 463)
        }
        guard let appsecretProof else {
            return Self.error(400, "API calls from the server require an appsecret_proof argument", type: "GraphMethodException", code: 100)
        }
        guard let secret, appsecretProof == Self.appSecretProof(token: accessToken, secret: secret) else {
            return Self.error(400, "Invalid appsecret_proof provided in the API argument", type: "GraphMethodException", code: 100)
        }
        var person: [String: JWTHeaderField] = [:]
        for field in (fields ?? "id,name").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            switch field {
            case "id": person["id"] = .string(fault == .otherUser ? "1" + issued.userID : issued.userID)
            case "name": if let name = issued.name { person["name"] = .string(name) }
            case "email": if let email = issued.email { person["email"] = .string(email) }
            default: break
            }
        }
        return Self.ok(person)
    }

    /// The answer a fault puts in place of Graph's, if any.
    static func transportAnswer(_ fault: GraphFault) -> GraphAnswer? {
        switch fault {
        case .none, .otherUser:
            return nil
        case .internalError:
            return error(
                500, "An unexpected error has occurred. Please retry your request later.", type: "OAuthException", code: 2,
                transient: true)
        case .unavailable:
            return error(503, "(#2) Service temporarily unavailable", type: "OAuthException", code: 2, transient: true)
        case .resetConnection:
            return .resetConnection
        case .hang:
            return .noAnswer
        case .answer(let status, let body):
            return .response(status: status, body: body)
        case .slowBody:
            // What a valid token's answer starts with; the client never sees its end in time.
            return .slowBody(status: 200, body: Data(#"{"data":{"is_valid":true,"app_id":"0","user_id":"0","expires_at":0}}"#.utf8))
        }
    }

    static func error(
        _ status: Int, _ message: String, type: String, code: Int, subcode: Int? = nil, transient: Bool = false
    ) -> GraphAnswer {
        var error: [String: JWTHeaderField] = [
            "message": .string(message), "type": .string(type), "code": .int(code),
            "fbtrace_id": .string(randomAlphanumeric(11)),
        ]
        if let subcode { error["error_subcode"] = .int(subcode) }
        if transient { error["is_transient"] = .bool(true) }
        return response(status, ["error": .object(error)])
    }

    static func ok(_ body: [String: JWTHeaderField]) -> GraphAnswer { response(200, body) }

    static func response(_ status: Int, _ body: [String: JWTHeaderField]) -> GraphAnswer {
        // Encoding these members cannot fail; an empty object stands in if it ever did.
        .response(status: status, body: (try? MockKeyRing.json(body)) ?? Data("{}".utf8))
    }

    /// Graph's wording, in UTC: "Error validating access token: Session has expired on
    /// Tuesday, 07-Oct-25 10:00:00 UTC. The current time is …".
    static func expiredMessage(_ expiresAt: Date, now: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEEE, dd-MMM-yy HH:mm:ss zzz"
        return "Error validating access token: Session has expired on \(formatter.string(from: expiresAt)). "
            + "The current time is \(formatter.string(from: now))."
    }
}

struct GraphApp: Sendable {
    var secret: String
    var name: String
}

struct IssuedAccessToken: Sendable {
    let appID: String
    let userID: String
    let name: String?
    let email: String?
    let issuedAt: Date
    let expiresAt: Date?
}

struct GraphState: Sendable {
    var apps: [String: GraphApp] = [:]
    var tokens: [String: IssuedAccessToken] = [:]
    var proofs: [(token: String, proof: String)] = []
    var debugTokenFault = MockFacebookIdP.GraphFault.none
    var meFault = MockFacebookIdP.GraphFault.none
    var debugTokenCalls = 0
    var meCalls = 0
}

/// `count` random letters and digits.
func randomAlphanumeric(_ count: Int) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
    var generator = SystemRandomNumberGenerator()
    return String((0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
}

extension MockFacebookIdP {
    func isRegistered(appID: String) -> Bool { graph.withLock { $0.apps[appID] != nil } }

    /// A random 16-digit user id, as Graph's app-scoped ids look.
    static func randomUserID() -> String {
        "1" + String((0..<15).map { _ in "0123456789".randomElement() ?? "0" })
    }
}
