import Crypto
import Foundation
import JWTKit
import Synchronization

/// Apple's authorize page for the web flow (`GET /auth/authorize`), as the mock answers it: it
/// consents at once for the person set with ``MockAppleIdP/webUser`` and answers the page a
/// browser would get from Apple after consent, a form that posts itself (`form_post`) to the
/// redirect URI with `code`, `id_token` (with the request's nonce and `c_hash`), `state` and, the
/// first time that person authorizes that client, `user`. A test's browser submits the form.
extension MockAppleIdP {
    /// Who consents on the mock's authorize page.
    public struct WebUser: Sendable, Equatable {
        public var subject: String
        public var email: String
        public var isPrivateEmail: Bool
        public var givenName: String?
        public var familyName: String?

        public init(subject: String, email: String, isPrivateEmail: Bool = false, givenName: String? = nil, familyName: String? = nil) {
            self.subject = subject
            self.email = email
            self.isPrivateEmail = isPrivateEmail
            self.givenName = givenName
            self.familyName = familyName
        }
    }

    /// How the authorize page answers.
    public enum AuthorizeFault: Sendable, Equatable {
        /// Consent (no fault).
        case none
        /// The person cancels: the form carries `error=user_cancelled_authorize` and `state`.
        case cancel
        /// The id token carries another nonce than the request's.
        case wrongNonce
        /// The id token's `c_hash` is not the code's.
        case wrongCodeHash
    }

    public var webUser: WebUser {
        get { state.withLock { $0.webUser } }
        set { state.withLock { $0.webUser = newValue } }
    }

    /// Each consent on the authorize page is a new person (`mock-idp serve --web-new-person`).
    public var webNewPersonEachTime: Bool {
        get { state.withLock { $0.webNewPersonEachTime } }
        set { state.withLock { $0.webNewPersonEachTime = newValue } }
    }

    /// Each consent on the authorize page is the next of `webPeople` people in turn, so a
    /// benchmark's second round signs the first round's people in again (`mock-idp serve
    /// --web-people N`; 0: off).
    public var webPeople: Int {
        get { state.withLock { $0.webPeople } }
        set { state.withLock { $0.webPeople = newValue } }
    }

    public var authorizeFault: AuthorizeFault {
        get { state.withLock { $0.authorizeFault } }
        set { state.withLock { $0.authorizeFault = newValue } }
    }

    /// The authorize page's form fields for these query parameters (nil: the request is not one
    /// Apple would take), and where the form posts them.
    func authorizeForm(_ query: [String: String], now: Date = Date()) throws -> (action: String, fields: [(String, String)])? {
        guard let clientID = query["client_id"], !clientID.isEmpty, let redirectURI = query["redirect_uri"], !redirectURI.isEmpty,
            query["response_type"] == "code id_token", query["response_mode"] == "form_post"
        else { return nil }
        let requestState = query["state"] ?? ""
        let (user, fault, first) = state.withLock { state -> (WebUser, AuthorizeFault, Bool) in
            var user = state.webUser
            if state.webNewPersonEachTime {
                let id = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
                user = WebUser(
                    subject: "001000.\(id).0001", email: "web.\(id.prefix(12))@example.com", givenName: "Web", familyName: "Person")
                return (user, state.authorizeFault, true)
            }
            if state.webPeople > 0 {
                let index = state.webConsents % state.webPeople
                state.webConsents += 1
                let id = String(repeating: "0", count: max(0, 32 - String(index).count)) + String(index)
                user = WebUser(subject: "001001.\(id).0001", email: "web.\(index)@example.com", givenName: "Web", familyName: "Person")
            }
            let first = state.authorizedOnce.insert("\(clientID) \(user.subject)").inserted
            return (user, state.authorizeFault, first)
        }
        if fault == .cancel { return (redirectURI, [("state", requestState), ("error", "user_cancelled_authorize")]) }
        var emailClaims: [String: JWTHeaderField] = [
            "email": .string(user.email), "email_verified": .bool(true), "is_private_email": .bool(user.isPrivateEmail),
        ]
        let code = issueCode(clientID: clientID, subject: user.subject, extraClaims: emailClaims)
        // The token endpoint's id token for this code, minted now (see ``IssuedCode/idToken``).
        let exchanged = try mint(claims(subject: user.subject, audience: clientID, issuedAt: now, extra: emailClaims))
        state.withLock { $0.codes[code]?.idToken = exchanged }
        emailClaims["c_hash"] = .string(fault == .wrongCodeHash ? Self.halfHash("another code") : Self.halfHash(code))
        let nonce = fault == .wrongNonce ? "not-the-nonce" : query["nonce"]
        let idToken = try mint(
            claims(
                subject: user.subject, audience: clientID, nonce: nonce, email: user.email, isPrivateEmail: user.isPrivateEmail,
                issuedAt: now, extra: emailClaims))
        var fields = [("state", requestState), ("code", code), ("id_token", idToken)]
        if first {
            var name: [String: String] = [:]
            name["firstName"] = user.givenName
            name["lastName"] = user.familyName
            let object: [String: Any] = ["name": name, "email": user.email]
            let json = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            fields.append(("user", String(decoding: json, as: UTF8.self)))
        }
        return (redirectURI, fields)
    }

    /// The page: a form of hidden fields that posts itself to `action` (a browser with scripts
    /// off gets a button).
    static func formPage(action: String, fields: [(String, String)]) -> String {
        let inputs = fields.map { "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">" }.joined()
        return """
            <!doctype html><html><body onload="document.forms[0].submit()">\
            <form method="post" action="\(escape(action))">\(inputs)<button type="submit">Continue</button></form></body></html>
            """
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }

    /// `c_hash`: base64url of the left half of SHA-256.
    static func halfHash(_ value: String) -> String {
        base64URL(Data(Data(SHA256.hash(data: Data(value.utf8))).prefix(16)))
    }
}
