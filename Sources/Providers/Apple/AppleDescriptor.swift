import BrokerCore
import Foundation

extension AppleProvider {
    /// Sign in with Apple as a provider type. Configured by `broker apple ...` (teams, groups,
    /// clients), not by `broker provider enable`; `broker provider disable|enable apple` turns it
    /// off and on.
    public static let descriptor = ProviderDescriptor(
        type: .apple, displayName: "Apple",
        abilities: [.idTokens, .codeExchange, .webAuthorization, .revocation, .notifications],
        emailTrust: descriptorEmailTrust,
        readProof: readProof,
        configure: nil,
        tokenPolicy: { _, options in tokenPolicy(options) },
        keySet: { _, endpoints in KeySetLocation(name: "apple", url: Apple.keysURL(base: endpoints.appleBaseURL)) },
        setupHint: { tenant in
            "Register an Apple client (broker apple client add --tenant \(tenant) ...), or turn Apple back on: broker provider enable apple --tenant \(tenant)"
        },
        make: { context in
            .of(
                AppleProvider(
                    baseURL: context.endpoints.appleBaseURL,
                    keys: context.keySets.declare("apple", url: Apple.keysURL(base: context.endpoints.appleBaseURL)),
                    secrets: context.secrets, httpClient: context.httpClient, timeout: context.timeout,
                    callbackURL: context.endpoints.appleCallbackURL, logger: context.logger))
        })

    /// `{"client_id", "identity_token", "nonce"?, "authorization_code"?, "user"?: {"name"?: {"firstName"?, "lastName"?}, "email"?}}`.
    static func readProof(_ object: [String: JSONValue]) throws(ContractMismatch) -> ProviderProof {
        typealias R = ContractReader
        let clientID = try R.required("client_id", in: object)
        let token = try R.required("identity_token", in: object)
        let nonce = try R.optional("nonce", in: object)
        let code = try R.optional("authorization_code", in: object)
        var name = PersonName(givenName: nil, familyName: nil)
        if let user = object["user"], !user.isNull {
            guard let fields = user.object else { throw ContractMismatch(description: "member 'user' has the wrong type") }
            if let nameValue = fields["name"], !nameValue.isNull {
                guard let parts = nameValue.object else { throw ContractMismatch(description: "member 'user.name' has the wrong type") }
                name = PersonName(
                    givenName: try R.optional("firstName", in: parts, at: "user.name."),
                    familyName: try R.optional("lastName", in: parts, at: "user.name."))
            }
            _ = try R.optional("email", in: fields, at: "user.")
        }
        return ProviderProof(idToken: token, clientID: clientID, nonce: nonce, authorizationCode: code, name: name)
    }
}
