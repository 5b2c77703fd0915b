import BrokerCore
import Foundation
import Storage

/// A web sign-in carried, sealed, in the `state` it hands to the provider (decision 0099): what
/// the row of `web_sign_in_states` holds, so that starting a sign-in writes nothing and its
/// callback writes the row when it claims the state. Sealed under a key of its own
/// (``SecretBox/sealUnderFreshKey(_:purpose:context:)``) and bound to its tenant: a state whose
/// tenant part was changed, or any byte of it, does not open. The person's browser and the
/// provider carry it and read nothing of it (the return URL, the caller's state, a relying
/// party's nonce and PKCE challenge).
package enum SealedWebSignInState {
    static let purpose = "web-sign-in-state"

    static func context(tenantID: UUID) -> String { "web_sign_in_state:\(tenantID.lowercasedString)" }

    /// The state's text for `state` (whose `stateHash` is ignored: it is the hash of this text).
    package static func seal(_ state: WebSignInState, secrets: SecretBox) throws -> String {
        let box = try secrets.sealUnderFreshKey(json(state), purpose: purpose, context: context(tenantID: state.tenantID))
        return WebSignInStateToken.sealed(tenantID: state.tenantID, box: box)
    }

    /// The sign-in a sealed state carries, with `stateHash` the hash of its text; nil for a text
    /// of another form, one that does not open with this broker's master key, or one whose
    /// content does not read back.
    package static func open(_ text: String, secrets: SecretBox) -> WebSignInState? {
        guard let (tenantID, box) = WebSignInStateToken.sealedBox(of: text) else { return nil }
        return open(text, tenantID: tenantID, box: box, secrets: secrets)
    }

    /// The same, for a text whose box and tenant were already read from it.
    static func open(_ text: String, tenantID: UUID, box: Data, secrets: SecretBox) -> WebSignInState? {
        guard let plaintext = secrets.openUnderFreshKey(box, purpose: purpose, context: context(tenantID: tenantID)) else { return nil }
        return read(plaintext, tenantID: tenantID, stateHash: WebSignInService.hash(text))
    }

    /// Milliseconds since 1970 a state may expire at: well past any clock, never a `Date` that
    /// PostgreSQL's `timestamptz` cannot hold.
    static let expiryRange = 0...(1 << 50)

    static func json(_ state: WebSignInState) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.member("p", state.provider)
        writer.member("c", state.clientID)
        writer.member("r", state.redirectURI)
        writer.member("u", state.returnURL)
        writer.member("i", state.intent.rawValue)
        writer.memberIfPresent("s", state.callerState)
        // A time no `Int` holds (none a clock gives) is written as 0: a state expired at once.
        writer.member("e", Int(exactly: (state.expiresAt.timeIntervalSince1970 * 1_000).rounded()) ?? 0)
        writer.memberIfPresent("ps", state.providerScope)
        if let party = state.relyingParty {
            writer.member("oc", party.clientID)
            writer.member("oq", party.request.json)
        }
        writer.endObject()
        return writer.bytes
    }

    static func read(_ plaintext: Data, tenantID: UUID, stateHash: Data) -> WebSignInState? {
        guard let object = (try? JSONValue.parse(plaintext, maxDepth: 2))?.object,
            let provider = object["p"]?.string, let clientID = object["c"]?.string, let redirectURI = object["r"]?.string,
            let returnURL = object["u"]?.string, let intent = object["i"]?.string.flatMap(SignInIntent.init(rawValue:)),
            let expiry = object["e"]?.integer(in: expiryRange)
        else { return nil }
        let optional = { (name: String) -> String?? in
            guard let value = object[name] else { return .some(nil) }
            return value.string.map { .some($0) } ?? .none
        }
        guard let callerState = optional("s"), let providerScope = optional("ps"), let partyClient = optional("oc"),
            let partyRequest = optional("oq"), (partyClient == nil) == (partyRequest == nil)
        else { return nil }
        var relyingParty: WebSignInState.RelyingParty?
        if let partyClient, let partyRequest {
            guard let request = KeptClientRequest(json: partyRequest) else { return nil }
            relyingParty = WebSignInState.RelyingParty(clientID: partyClient, request: request)
        }
        return WebSignInState(
            stateHash: stateHash, tenantID: tenantID, provider: provider, clientID: clientID, redirectURI: redirectURI,
            returnURL: returnURL, intent: intent, callerState: callerState, expiresAt: Date(timeIntervalSince1970: Double(expiry) / 1_000),
            providerScope: providerScope, relyingParty: relyingParty)
    }
}
