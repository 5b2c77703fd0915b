import BrokerAPI
import BrokerCore

/// The sign-in request read from a parsed body, field by field as the generated `Decodable`
/// conformance reads it: `client_id` and `identity_token` required strings, every other member
/// optional (absent or null), `intent` and `platform` one of their enum values, members the
/// contract does not name ignored. `JSONDecoder` cost ~15 µs of a sign-in for this one body
/// (decision 0011); a test holds the two to the same results. Unlike `JSONDecoder`, the strict
/// parser refuses duplicate member names.
extension Components.Schemas.AppleSignInRequest {
    struct Mismatch: Error {
        let description: String
    }

    init(json body: JSONValue) throws(Mismatch) {
        guard let object = body.object else { throw Mismatch(description: "the body is not a JSON object") }
        self.init(
            clientId: try Self.required("client_id", in: object),
            identityToken: try Self.required("identity_token", in: object),
            nonce: try Self.optional("nonce", in: object),
            authorizationCode: try Self.optional("authorization_code", in: object),
            user: try Self.user(object["user"]),
            intent: try Self.choice("intent", in: object),
            platform: try Self.choice("platform", in: object))
    }

    private static func required(_ name: String, in object: [String: JSONValue], at path: String = "") throws(Mismatch) -> String {
        guard let value = object[name], !value.isNull else { throw Mismatch(description: "missing member '\(path)\(name)'") }
        guard let string = value.string else { throw Mismatch(description: "member '\(path)\(name)' has the wrong type") }
        return string
    }

    private static func optional(_ name: String, in object: [String: JSONValue], at path: String = "") throws(Mismatch) -> String? {
        guard let value = object[name], !value.isNull else { return nil }
        guard let string = value.string else { throw Mismatch(description: "member '\(path)\(name)' has the wrong type") }
        return string
    }

    private static func choice<Choice: RawRepresentable<String>>(_ name: String, in object: [String: JSONValue]) throws(Mismatch)
        -> Choice?
    {
        guard let raw = try optional(name, in: object) else { return nil }
        guard let choice = Choice(rawValue: raw) else {
            throw Mismatch(description: "member '\(name)' has a value the contract does not allow")
        }
        return choice
    }

    private static func user(_ value: JSONValue?) throws(Mismatch) -> Components.Schemas.AppleUser? {
        guard let value, !value.isNull else { return nil }
        guard let user = value.object else { throw Mismatch(description: "member 'user' has the wrong type") }
        var name: Components.Schemas.PersonName?
        if let nameValue = user["name"], !nameValue.isNull {
            guard let fields = nameValue.object else { throw Mismatch(description: "member 'user.name' has the wrong type") }
            name = .init(
                firstName: try optional("firstName", in: fields, at: "user.name."),
                lastName: try optional("lastName", in: fields, at: "user.name."))
        }
        return .init(name: name, email: try optional("email", in: user, at: "user."))
    }
}
