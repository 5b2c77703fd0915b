import BrokerCore
import Foundation

extension FacebookProvider {
    /// Facebook Login as a provider type: `broker provider enable facebook --app-id ID --app-secret-file FILE [--limited-login]`.
    /// Graph does not say whether an email is verified: its emails never join accounts.
    public static let descriptor = ProviderDescriptor(
        type: .facebook, displayName: "Facebook", abilities: [.idTokens], emailTrust: .never,
        settingFlags: [
            ProviderSettingFlag("app-id", value: "ID", required: true, help: "The app id."),
            ProviderSettingFlag(
                "app-secret", value: "SECRET", required: true, help: "The app secret, read from the file (stored encrypted; never printed)."
            ),
            ProviderSettingFlag("limited-login", value: nil, help: "Also accept Limited Login tokens."),
        ],
        readProof: readProof,
        configure: { input, context in try configure(input, secrets: context.secrets) },
        tokenPolicy: { _, options in tokenPolicy(options) },
        keySet: { _, endpoints in KeySetLocation(name: "facebook", url: endpoints.facebookKeysURL) },
        describe: { configuration in
            [("app_id", configuration.appID.map(JSONValue.string) ?? .null), ("limited_login", .bool(configuration.limitedLogin))]
        },
        make: { context in
            .of(
                FacebookProvider(
                    keys: context.keySets.declare("facebook", url: context.endpoints.facebookKeysURL),
                    graph: FacebookGraphClient(
                        baseURL: context.endpoints.facebookGraphURL, httpClient: context.httpClient,
                        timeoutSeconds: context.endpoints.timeoutSeconds),
                    secrets: context.secrets))
        })

    /// `{"access_token"}` or `{"limited_login_token", "nonce"}`, never both.
    static func readProof(_ object: [String: JSONValue]) throws(ContractMismatch) -> ProviderProof {
        let access = try ContractReader.optional("access_token", in: object)
        let limited = try ContractReader.optional("limited_login_token", in: object)
        let nonce = try ContractReader.optional("nonce", in: object)
        switch (access, limited) {
        case (let access?, nil):
            return ProviderProof(accessToken: access, nonce: nonce)
        case (nil, let limited?):
            guard let nonce, !nonce.isEmpty else {
                throw ContractMismatch(description: "member 'nonce' is required with 'limited_login_token'")
            }
            return ProviderProof(idToken: limited, nonce: nonce)
        case (_?, _?):
            throw ContractMismatch(description: "send one of 'access_token' and 'limited_login_token', not both")
        case (nil, nil):
            throw ContractMismatch(description: "missing member 'access_token' or 'limited_login_token'")
        }
    }

    static func configure(_ input: ProviderSettingsInput, secrets: SecretBox) throws -> ProviderConfiguration {
        try input.requireOnly(descriptor.settingFlags, type: .facebook)
        guard let appID = try input.value("app-id"), let appSecret = try input.value("app-secret") else {
            throw BrokerError.invalidArgument(
                "Facebook needs --app-id and --app-secret-file.",
                hint: "broker provider enable facebook --tenant <slug> --app-id <ID> --app-secret-file secret.txt")
        }
        guard !appID.isEmpty, appID.count <= 32, appID.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw BrokerError.invalidArgument(
                "--app-id '\(appID.prefix(40))' is not a Facebook app id.", hint: "Pass the numeric App ID from the app's dashboard.")
        }
        guard !appSecret.isEmpty, appSecret.count <= 256, !appSecret.contains(where: { $0.isWhitespace }) else {
            throw BrokerError.invalidArgument(
                "The app secret file holds no usable secret (empty, or whitespace inside).",
                hint: "Put the App Secret from the app's dashboard (Settings > Basic) alone in the file.")
        }
        let sealed = try secrets.seal(
            Data(appSecret.utf8),
            context: ProviderConfiguration.secretContext(tenantID: input.tenantID, provider: .facebook, clientID: appID))
        return ProviderConfiguration(
            tenantID: input.tenantID, provider: .facebook, type: .facebook, platforms: input.platforms, clientIDs: [appID],
            sealedSecret: sealed, limitedLogin: input.isSet("limited-login"))
    }
}
