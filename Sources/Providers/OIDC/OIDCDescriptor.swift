import BrokerCore
import Foundation

extension OIDCProvider {
    /// Any conforming OpenID Connect issuer (LINE, Yahoo! JAPAN ID, Microsoft Entra ID, ...):
    /// `broker provider enable <id> --type oidc --issuer URL --client-id ID ...` (decision 0035).
    public static let descriptor = ProviderDescriptor(
        type: .oidc, displayName: "OpenID Connect", abilities: [.idTokens, .webAuthorization], emailTrust: .never,
        settingFlags: [
            ProviderSettingFlag(
                "issuer", value: "URL", required: true,
                help: "The issuer URL, exactly as its tokens' iss ({tid} for a multi-tenant issuer)."),
            ProviderSettingFlag("client-id", value: "ID", repeatable: true, required: true, help: "A client id tokens may be issued to."),
            ProviderSettingFlag("display-name", value: "TEXT", help: "The name login options show."),
            ProviderSettingFlag("jwks-url", value: "URL", help: "The key set URL, instead of discovery's jwks_uri."),
            ProviderSettingFlag("algorithms", value: "LIST", help: "Accepted signing algorithms, comma-separated (asymmetric only)."),
            ProviderSettingFlag("email-trust", value: "never|verified", help: "Whether email_verified may join accounts (default never)."),
            ProviderSettingFlag("allowed-tid", value: "TID", repeatable: true, help: "A tenant id a {tid} issuer accepts."),
            ProviderSettingFlag("nonce-required", value: nil, help: "Refuse sign-ins without the raw nonce."),
        ] + OIDCWebSettings.flags,
        readProof: readProof,
        configure: { input, context in try await configure(input, context: context) },
        tokenPolicy: { configuration, options in
            guard let configuration, let settings = OIDCSettings(configuration) else {
                // No tenant's settings: nothing may verify (token verify needs --tenant for OIDC).
                return (VerificationPolicy(issuers: [], algorithms: [], audiences: options.audiences), .none)
            }
            return settings.policy(options)
        },
        keySet: { configuration, _ in
            guard let configuration, let settings = OIDCSettings(configuration), let url = settings.keysURL else { return nil }
            return KeySetLocation(name: settings.issuer, url: url)
        },
        describe: { configuration in
            guard let settings = OIDCSettings(configuration) else { return [] }
            return [
                ("issuer", .string(settings.issuer)), ("client_ids", .array(configuration.clientIDs.map(JSONValue.string))),
                ("display_name", settings.displayName.map(JSONValue.string) ?? .null),
                ("jwks_url", settings.jwksURL.map(JSONValue.string) ?? .null),
                ("jwks_uri", settings.discoveredJWKSURI.map(JSONValue.string) ?? .null),
                ("discovered_algorithms", settings.discoveredAlgorithms.map { .array($0.map(JSONValue.string)) } ?? .null),
                ("algorithms", .array(settings.acceptedAlgorithms.sorted().map(JSONValue.string))),
                ("email_trust", .string(settings.emailTrust.rawValue)),
                ("allowed_tids", .array(settings.allowedTenantIDs.map(JSONValue.string))),
                ("nonce_required", .bool(settings.nonceRequired)),
            ] + (OIDCWebSettings(configuration)?.described ?? [("web_flow", .bool(false))])
        },
        make: { context in
            .of(
                OIDCProvider(
                    keySets: context.keySets,
                    codeFlow: OIDCCodeFlow(
                        httpClient: context.httpClient, timeout: context.timeout, secrets: context.secrets,
                        defaultRedirectURI: context.endpoints.oidcCallbackURL)))
        })

    /// `{"id_token", "nonce"?, "client_id"?, "name"?: {"given_name"?, "family_name"?}}`.
    static func readProof(_ object: [String: JSONValue]) throws(ContractMismatch) -> ProviderProof {
        var name = PersonName(givenName: nil, familyName: nil)
        if let value = object["name"], !value.isNull {
            guard let parts = value.object else { throw ContractMismatch(description: "member 'name' has the wrong type") }
            name = PersonName(
                givenName: try ContractReader.optional("given_name", in: parts, at: "name."),
                familyName: try ContractReader.optional("family_name", in: parts, at: "name."))
        }
        return ProviderProof(
            idToken: try ContractReader.required("id_token", in: object), clientID: try ContractReader.optional("client_id", in: object),
            nonce: try ContractReader.optional("nonce", in: object), name: name)
    }

    static func configure(_ input: ProviderSettingsInput, context: ProviderContext) async throws -> ProviderConfiguration {
        try input.requireOnly(descriptor.settingFlags, type: .oidc)
        guard let issuer = try input.value("issuer") else {
            throw BrokerError.invalidArgument(
                "An oidc provider needs --issuer.",
                hint: "Pass the issuer URL exactly as its tokens' iss, e.g. --issuer https://access.line.me")
        }
        guard OIDCSettings.isAcceptableURL(issuer), !issuer.contains("?"), !issuer.contains("#") else {
            throw BrokerError.invalidArgument(
                "--issuer '\(issuer.prefix(120))' is not an https:// URL (http:// only on a loopback address).",
                hint: "Pass the issuer exactly as its tokens' iss, e.g. https://access.line.me")
        }
        let clientIDs = try input.clientIDs()
        var settings = OIDCSettings(issuer: issuer)
        if let jwksURL = try input.value("jwks-url") {
            guard OIDCSettings.isAcceptableURL(jwksURL) else {
                throw BrokerError.invalidArgument(
                    "--jwks-url '\(jwksURL.prefix(120))' is not an https:// URL (http:// only on a loopback address).")
            }
            settings.jwksURL = jwksURL
        }
        if let list = try input.value("algorithms") {
            let names = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let unsupported = names.filter { !OIDCSettings.supportedAlgorithms.contains($0) }
            guard !names.isEmpty, unsupported.isEmpty else {
                throw BrokerError.invalidArgument(
                    "--algorithms names \(unsupported.isEmpty ? "nothing" : unsupported.map { "'\($0.prefix(20))'" }.joined(separator: ", ")) the broker accepts.",
                    hint:
                        "Use asymmetric algorithms only: \(OIDCSettings.supportedAlgorithms.joined(separator: ", ")). none and HS* are never accepted."
                )
            }
            settings.algorithms = names
        }
        if let trust = try input.value("email-trust") {
            guard let parsed = EmailTrust(rawValue: trust) else {
                throw BrokerError.invalidArgument("--email-trust must be never or verified.")
            }
            settings.emailTrust = parsed
        }
        let tids = input.list("allowed-tid")
        guard tids.isEmpty || settings.isMultiTenant else {
            throw BrokerError.invalidArgument("--allowed-tid needs an issuer with {tid} in it (a multi-tenant issuer).")
        }
        for tid in tids where !IssuerTemplate.isTenantID(tid) {
            throw BrokerError.invalidArgument("--allowed-tid '\(tid.prefix(80))' is not a tenant id.")
        }
        settings.allowedTenantIDs = tids
        settings.nonceRequired = input.isSet("nonce-required")
        if let displayName = try input.value("display-name") {
            try FreeText.require(displayName, option: "--display-name")
            let trimmed = displayName.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, FreeText.fits(trimmed, characters: 60) else {
                throw BrokerError.invalidArgument("--display-name must be 1 to 60 characters.")
            }
            settings.displayName = trimmed
        }
        // Discovery names the key set (unless --jwks-url does) and the web flow's endpoints.
        var discovery: OIDCDiscovery?
        if settings.jwksURL == nil || OIDCWebSettings.requested(input) {
            do {
                discovery = try await OIDCDiscovery.fetch(issuer: issuer, httpClient: context.httpClient, timeout: context.timeout)
            } catch {
                throw discoveryError(error, issuer: issuer)
            }
        }
        if settings.jwksURL == nil, let discovery {
            settings.discoveredJWKSURI = discovery.jwksURI
            settings.discoveredAlgorithms = discovery.algorithms
        }
        let web = try OIDCWebSettings.configure(input, clientID: clientIDs[0], discovery: discovery, secrets: context.secrets)
        guard !settings.acceptedAlgorithms.isEmpty || web?.settings.acceptsHS256 == true else {
            throw BrokerError.invalidArgument(
                "No signing algorithm is left to accept (discovery lists \(settings.discoveredAlgorithms?.joined(separator: ", ") ?? "none"); --algorithms \(settings.algorithms?.joined(separator: ",") ?? "not given")).",
                hint:
                    "The broker accepts \(OIDCSettings.supportedAlgorithms.joined(separator: ", ")); HS256 tokens (LINE web login) arrive only through the web flow (--client-secret-file, --return-url)."
            )
        }
        var json = settings.json
        json["web"] = web?.settings.json
        return ProviderConfiguration(
            tenantID: input.tenantID, provider: input.provider, type: .oidc, platforms: input.platforms, clientIDs: clientIDs,
            settings: json, sealedSecret: web?.sealedSecret)
    }

    static func discoveryError(_ failure: OIDCDiscoveryFailure, issuer: String) -> BrokerError {
        switch failure {
        case .unreachable(let url, let reason):
            BrokerError(
                code: "discovery_failed", kind: .unavailable, title: "Discovery failed",
                detail: "Could not read \(url.prefix(200)): \(reason.prefix(200)). Nothing was stored.",
                hint: "Check the issuer URL and outbound HTTPS to it, or pass --jwks-url to skip discovery.")
        case .malformed(let url):
            BrokerError(
                code: "discovery_failed", kind: .invalidInput, title: "Discovery failed",
                detail: "\(url.prefix(200)) is not a discovery document with issuer and jwks_uri. Nothing was stored.",
                hint: "Check the issuer URL, or pass --jwks-url to skip discovery.")
        case .issuerMismatch(let expected, let found):
            BrokerError(
                code: "issuer_mismatch", kind: .invalidInput, title: "Issuer mismatch",
                detail:
                    "The discovery document names issuer '\(found)', not '\(expected.prefix(200))' (OpenID Connect Discovery §4.3). Nothing was stored.",
                hint: "Pass --issuer exactly as the document (and the tokens' iss) spells it.")
        case .insecureKeysURL(let url):
            BrokerError(
                code: "discovery_failed", kind: .invalidInput, title: "Discovery failed",
                detail: "The discovery document's jwks_uri '\(url)' is not https://. Nothing was stored.")
        case .insecureEndpoint(let name, let url):
            BrokerError(
                code: "discovery_failed", kind: .invalidInput, title: "Discovery failed",
                detail: "The discovery document's \(name) '\(url)' is not https://. Nothing was stored.")
        }
    }
}
