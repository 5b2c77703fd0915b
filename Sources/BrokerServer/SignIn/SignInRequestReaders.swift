import BrokerAPI
import BrokerCore
import Providers

/// A body that does not match the contract, with what is wrong.
struct ContractMismatch: Error {
    let description: String
}

/// Reads members of a parsed body as the generated `Decodable` conformances read them: a
/// required member present and of its type, an optional one absent or null, an enum member one
/// of its values, members the contract does not name ignored. `JSONDecoder` cost ~15 µs of a
/// sign-in for one body (decision 0011); tests hold the readers to the generated decoders and
/// to every property of openapi.yaml. Unlike `JSONDecoder`, the strict parser underneath
/// refuses duplicate member names.
enum ContractReader {
    static func object(_ body: JSONValue) throws(ContractMismatch) -> [String: JSONValue] {
        guard let object = body.object else { throw ContractMismatch(description: "the body is not a JSON object") }
        return object
    }

    static func required(_ name: String, in object: [String: JSONValue], at path: String = "") throws(ContractMismatch) -> String {
        guard let value = object[name], !value.isNull else { throw ContractMismatch(description: "missing member '\(path)\(name)'") }
        guard let string = value.string else { throw ContractMismatch(description: "member '\(path)\(name)' has the wrong type") }
        return string
    }

    static func optional(_ name: String, in object: [String: JSONValue], at path: String = "") throws(ContractMismatch) -> String? {
        guard let value = object[name], !value.isNull else { return nil }
        guard let string = value.string else { throw ContractMismatch(description: "member '\(path)\(name)' has the wrong type") }
        return string
    }

    static func choice<Choice: RawRepresentable<String>>(_ name: String, in object: [String: JSONValue]) throws(ContractMismatch)
        -> Choice?
    {
        guard let raw = try optional(name, in: object) else { return nil }
        guard let choice = Choice(rawValue: raw) else {
            throw ContractMismatch(description: "member '\(name)' has a value the contract does not allow")
        }
        return choice
    }
}

/// A sign-in body read for its provider: the proof, the intent and the platform.
struct SignInBody: Sendable {
    var proof: ProviderProof
    var intent: SignInIntent
    var platform: String?

    /// Reads the body of `POST /v1/sign-in/{provider}` as that provider's request.
    static func read(provider: ProviderName, _ body: JSONValue) throws(ContractMismatch) -> SignInBody {
        switch provider {
        case .apple: .init(try Components.Schemas.AppleSignInRequest(json: body))
        case .google: .init(try Components.Schemas.GoogleSignInRequest(json: body))
        case .facebook: try .init(try Components.Schemas.FacebookSignInRequest(json: body))
        }
    }

    init(_ request: Components.Schemas.AppleSignInRequest) {
        proof = ProviderProof(
            idToken: request.identityToken, clientID: request.clientId, nonce: request.nonce,
            authorizationCode: request.authorizationCode,
            name: PersonName(givenName: request.user?.name?.firstName, familyName: request.user?.name?.lastName))
        intent = SignInIntent(rawValue: request.intent?.rawValue ?? "auto") ?? .auto
        platform = request.platform?.rawValue
    }

    init(_ request: Components.Schemas.GoogleSignInRequest) {
        proof = ProviderProof(idToken: request.idToken, clientID: request.clientId, nonce: request.nonce)
        intent = SignInIntent(rawValue: request.intent?.rawValue ?? "auto") ?? .auto
        platform = request.platform?.rawValue
    }

    init(_ request: Components.Schemas.FacebookSignInRequest) throws(ContractMismatch) {
        switch (request.accessToken, request.limitedLoginToken) {
        case (let access?, nil):
            proof = ProviderProof(accessToken: access, nonce: request.nonce)
        case (nil, let limited?):
            guard let nonce = request.nonce, !nonce.isEmpty else {
                throw ContractMismatch(description: "member 'nonce' is required with 'limited_login_token'")
            }
            proof = ProviderProof(idToken: limited, nonce: nonce)
        case (_?, _?):
            throw ContractMismatch(description: "send one of 'access_token' and 'limited_login_token', not both")
        case (nil, nil):
            throw ContractMismatch(description: "missing member 'access_token' or 'limited_login_token'")
        }
        intent = SignInIntent(rawValue: request.intent?.rawValue ?? "auto") ?? .auto
        platform = request.platform?.rawValue
    }
}

extension Components.Schemas.AppleSignInRequest {
    init(json body: JSONValue) throws(ContractMismatch) {
        typealias R = ContractReader
        let object = try R.object(body)
        self.init(
            clientId: try R.required("client_id", in: object),
            identityToken: try R.required("identity_token", in: object),
            nonce: try R.optional("nonce", in: object),
            authorizationCode: try R.optional("authorization_code", in: object),
            user: try Self.user(object["user"]),
            intent: try R.choice("intent", in: object),
            platform: try R.choice("platform", in: object))
    }

    private static func user(_ value: JSONValue?) throws(ContractMismatch) -> Components.Schemas.AppleUser? {
        guard let value, !value.isNull else { return nil }
        guard let user = value.object else { throw ContractMismatch(description: "member 'user' has the wrong type") }
        var name: Components.Schemas.PersonName?
        if let nameValue = user["name"], !nameValue.isNull {
            guard let fields = nameValue.object else { throw ContractMismatch(description: "member 'user.name' has the wrong type") }
            name = .init(
                firstName: try ContractReader.optional("firstName", in: fields, at: "user.name."),
                lastName: try ContractReader.optional("lastName", in: fields, at: "user.name."))
        }
        return .init(name: name, email: try ContractReader.optional("email", in: user, at: "user."))
    }
}

extension Components.Schemas.GoogleSignInRequest {
    init(json body: JSONValue) throws(ContractMismatch) {
        typealias R = ContractReader
        let object = try R.object(body)
        self.init(
            idToken: try R.required("id_token", in: object),
            clientId: try R.optional("client_id", in: object),
            nonce: try R.optional("nonce", in: object),
            intent: try R.choice("intent", in: object),
            platform: try R.choice("platform", in: object))
    }
}

extension Components.Schemas.FacebookSignInRequest {
    init(json body: JSONValue) throws(ContractMismatch) {
        typealias R = ContractReader
        let object = try R.object(body)
        self.init(
            accessToken: try R.optional("access_token", in: object),
            limitedLoginToken: try R.optional("limited_login_token", in: object),
            nonce: try R.optional("nonce", in: object),
            intent: try R.choice("intent", in: object),
            platform: try R.choice("platform", in: object))
    }
}
