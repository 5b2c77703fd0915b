import BrokerCore
import Foundation

extension GoogleProvider {
    /// Google Sign-In as a provider type: `broker provider enable google --client-id ID ... [--hosted-domain DOMAIN]`.
    public static let descriptor = ProviderDescriptor(
        type: .google, displayName: "Google", abilities: [.idTokens, .webAuthorization], emailTrust: .verified,
        settingFlags: [
            ProviderSettingFlag("client-id", value: "ID", repeatable: true, help: "An OAuth client id tokens may be issued to."),
            ProviderSettingFlag("hosted-domain", value: "DOMAIN", help: "The Workspace domain every token's hd must name."),
        ],
        readProof: readProof,
        configure: { input, _ in try configure(input) },
        tokenPolicy: { _, options in tokenPolicy(options) },
        keySet: { _, endpoints in KeySetLocation(name: "google", url: endpoints.googleKeysURL) },
        describe: { configuration in
            [("client_ids", .array(configuration.clientIDs.map(JSONValue.string))),
             ("hosted_domain", configuration.hostedDomain.map(JSONValue.string) ?? .null)]
        },
        make: { context in .of(GoogleProvider(keys: context.keySets.declare("google", url: context.endpoints.googleKeysURL))) })

    /// `{"id_token", "client_id"?, "nonce"?}`.
    static func readProof(_ object: [String: JSONValue]) throws(ContractMismatch) -> ProviderProof {
        ProviderProof(
            idToken: try ContractReader.required("id_token", in: object), clientID: try ContractReader.optional("client_id", in: object),
            nonce: try ContractReader.optional("nonce", in: object))
    }

    static func configure(_ input: ProviderSettingsInput) throws -> ProviderConfiguration {
        try input.requireOnly(descriptor.settingFlags, type: .google)
        let ids = try input.clientIDs()
        let hostedDomain = try input.value("hosted-domain")
        if let hostedDomain {
            guard ProviderSettingsInput.isDomain(hostedDomain) else {
                throw BrokerError.invalidArgument(
                    "--hosted-domain '\(hostedDomain.prefix(80))' is not a domain name.", hint: "Pass the Workspace domain, e.g. example.com.")
            }
        }
        return ProviderConfiguration(
            tenantID: input.tenantID, provider: .google, type: .google, platforms: input.platforms, clientIDs: ids,
            hostedDomain: hostedDomain?.lowercased())
    }
}
