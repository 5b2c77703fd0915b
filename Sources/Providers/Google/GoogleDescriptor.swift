import BrokerCore
import Foundation

extension GoogleProvider {
    /// Google Sign-In as a provider type: `broker provider enable google --client-id ID ... [--hosted-domain DOMAIN]`.
    public static let descriptor = ProviderDescriptor(
        type: .google, displayName: "Google", abilities: [.idTokens, .webAuthorization], emailTrust: .verified,
        settingFlags: [
            ProviderSettingFlag(
                "client-id", value: "ID", repeatable: true, required: true, help: "An OAuth client id tokens may be issued to."),
            ProviderSettingFlag("hosted-domain", value: "DOMAIN", help: "The Workspace domain every token's hd must name."),
        ] + OIDCWebSettings.flags,
        readProof: readProof,
        configure: { input, context in try await configure(input, context: context) },
        tokenPolicy: { _, options in tokenPolicy(options) },
        keySet: { _, endpoints in KeySetLocation(name: "google", url: endpoints.googleKeysURL) },
        describe: { configuration in
            [
                ("client_ids", .array(configuration.clientIDs.map(JSONValue.string))),
                ("hosted_domain", configuration.hostedDomain.map(JSONValue.string) ?? .null),
            ]
                + (OIDCWebSettings(configuration)?.described ?? [("web_flow", .bool(false))])
        },
        make: { context in
            .of(
                GoogleProvider(
                    keys: context.keySets.declare("google", url: context.endpoints.googleKeysURL),
                    codeFlow: OIDCCodeFlow(
                        httpClient: context.httpClient, timeout: context.timeout, secrets: context.secrets,
                        defaultRedirectURI: context.endpoints.oidcCallbackURL)))
        })

    /// `{"id_token", "client_id"?, "nonce"?}`.
    static func readProof(_ object: [String: JSONValue]) throws(ContractMismatch) -> ProviderProof {
        ProviderProof(
            idToken: try ContractReader.required("id_token", in: object), clientID: try ContractReader.optional("client_id", in: object),
            nonce: try ContractReader.optional("nonce", in: object))
    }

    static func configure(_ input: ProviderSettingsInput, context: ProviderContext) async throws -> ProviderConfiguration {
        var configuration = try configure(input)
        guard OIDCWebSettings.requested(input) else { return configuration }
        let discovery: OIDCDiscovery
        do {
            discovery = try await OIDCDiscovery.fetch(
                context.endpoints.googleDiscoveryURL, issuer: Google.discoveryIssuer, httpClient: context.httpClient,
                timeout: context.timeout)
        } catch {
            throw OIDCProvider.discoveryError(error, issuer: Google.discoveryIssuer)
        }
        let web = try OIDCWebSettings.configure(input, clientID: configuration.clientIDs[0], discovery: discovery, secrets: context.secrets)
        configuration.settings["web"] = web.map { $0.settings.json }
        configuration.sealedSecret = web?.sealedSecret
        return configuration
    }

    static func configure(_ input: ProviderSettingsInput) throws -> ProviderConfiguration {
        try input.requireOnly(descriptor.settingFlags, type: .google)
        let ids = try input.clientIDs()
        let hostedDomain = try input.value("hosted-domain")
        if let hostedDomain {
            guard ProviderSettingsInput.isDomain(hostedDomain) else {
                throw BrokerError.invalidArgument(
                    "--hosted-domain '\(hostedDomain.prefix(80))' is not a domain name.",
                    hint: "Pass the Workspace domain, e.g. example.com.")
            }
        }
        return ProviderConfiguration(
            tenantID: input.tenantID, provider: .google, type: .google, platforms: input.platforms, clientIDs: ids,
            hostedDomain: hostedDomain?.lowercased())
    }
}
