import BrokerCore
import Foundation
import Storage

/// Operator actions on a tenant's Google and Facebook settings (`broker provider ...`).
/// Apple is configured with `broker apple ...`; it is listed here for the whole picture.
public struct ProviderAdmin: Sendable {
    let database: Database
    let actor: String

    public init(database: Database, actor: String) {
        self.database = database
        self.actor = actor
    }

    /// One provider of a tenant as `provider list` / `show` report it. Never carries a secret.
    public struct Status: Sendable, Encodable {
        public let provider: String
        public let enabled: Bool
        public let platforms: [String]
        public let clientIDs: [String]
        public let hostedDomain: String?
        public let appID: String?
        public let hasAppSecret: Bool
        public let limitedLogin: Bool?
        public let updatedAt: Date?
        /// Google and Facebook: attested as meeting guideline 4.8's three criteria
        /// (`broker provider attest`). Apple: null (it qualifies built in).
        public var attested: Bool?
        /// After `enable`: the attestation this change withdrew (its app, client ids or login
        /// mode changed). Not part of the JSON shape: the CLI says it on stderr.
        public var attestationWithdrawn: AttestationWithdrawal?

        enum CodingKeys: String, CodingKey {
            case provider, enabled, platforms
            case clientIDs = "client_ids"
            case hostedDomain = "hosted_domain"
            case appID = "app_id"
            case hasAppSecret = "has_app_secret"
            case limitedLogin = "limited_login"
            case updatedAt = "updated_at"
            case attested
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(provider, forKey: .provider)
            try container.encode(enabled, forKey: .enabled)
            try container.encode(platforms, forKey: .platforms)
            try container.encode(clientIDs, forKey: .clientIDs)
            // Always present, null when not set (a contract member of `{...} | null` shape).
            try container.encode(hostedDomain, forKey: .hostedDomain)
            try container.encode(appID, forKey: .appID)
            try container.encode(hasAppSecret, forKey: .hasAppSecret)
            try container.encode(limitedLogin, forKey: .limitedLogin)
            try container.encode(updatedAt, forKey: .updatedAt)
            try container.encode(attested, forKey: .attested)
        }
    }

    /// Enables Google (or replaces its settings). `platforms` empty: offered everywhere, which
    /// guideline 4.8 counts as every platform, iOS and macOS included. Refused when that breaks
    /// the rule (``PolicyAdmin/enforce(before:after:tenant:force:)``), unless `force`.
    public func enableGoogle(
        tenant slug: String, clientIDs: [String], hostedDomain: String?, platforms: [ProviderPlatform], force: Bool = false
    ) async throws -> Status {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let ids = try Self.clientIDs(clientIDs, option: "--client-id")
        if let hostedDomain {
            guard Self.isDomain(hostedDomain) else {
                throw BrokerError.invalidArgument(
                    "--hosted-domain '\(hostedDomain.prefix(80))' is not a domain name.", hint: "Pass the Workspace domain, e.g. example.com.")
            }
        }
        let (saved, withdrawn) = try await database.providerConfigs.save(
            ProviderConfiguration(
                tenantID: tenant.id, provider: .google, platforms: platforms, clientIDs: ids, hostedDomain: hostedDomain?.lowercased()),
            actor: actor,
            guard: PolicyAdmin.guard(tenant: slug, action: "provider.enable", command: "broker provider enable google", force: force))
        var status = try await attested(Self.status(saved), tenantID: tenant.id)
        status.attestationWithdrawn = withdrawn
        return status
    }

    /// Enables Facebook (or replaces its settings); the app secret is sealed at rest. Guarded
    /// by guideline 4.8 as ``enableGoogle(tenant:clientIDs:hostedDomain:platforms:force:)``.
    public func enableFacebook(
        tenant slug: String, appID: String, appSecret: String, limitedLogin: Bool, platforms: [ProviderPlatform], secrets: SecretBox,
        force: Bool = false
    ) async throws -> Status {
        let tenant = try await TenantAdmin.find(slug, in: database)
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
            Data(appSecret.utf8), context: ProviderConfiguration.secretContext(tenantID: tenant.id, provider: .facebook, clientID: appID))
        let (saved, withdrawn) = try await database.providerConfigs.save(
            ProviderConfiguration(
                tenantID: tenant.id, provider: .facebook, platforms: platforms, clientIDs: [appID], sealedSecret: sealed,
                limitedLogin: limitedLogin),
            actor: actor,
            guard: PolicyAdmin.guard(tenant: slug, action: "provider.enable", command: "broker provider enable facebook", force: force))
        var status = try await attested(Self.status(saved), tenantID: tenant.id)
        status.attestationWithdrawn = withdrawn
        return status
    }

    /// Disables Google or Facebook; its settings (and secret) are deleted and its attestation
    /// withdrawn (returned, when it had one). Refused when an attested provider is the
    /// qualifying option guideline 4.8 relies on, unless `force`.
    @discardableResult
    public func disable(tenant slug: String, provider: ProviderName, force: Bool = false) async throws -> AttestationWithdrawal? {
        let tenant = try await TenantAdmin.find(slug, in: database)
        guard provider != .apple else {
            throw BrokerError.invalidArgument(
                "Apple is enabled by its clients.", hint: "Manage them with 'broker apple show --tenant \(slug)' and 'broker apple client'.")
        }
        let policyGuard = PolicyAdmin.guard(
            tenant: slug, action: "provider.disable", command: "broker provider disable \(provider.rawValue)", force: force)
        let (deleted, withdrawn) = try await database.providerConfigs.delete(
            tenantID: tenant.id, provider: provider, actor: actor, guard: policyGuard)
        guard deleted else {
            throw BrokerError(
                code: "provider_not_enabled", kind: .notFound, title: "Provider not enabled",
                detail: "Tenant '\(slug)' has not enabled \(provider.rawValue).", hint: "See 'broker provider list --tenant \(slug)'.")
        }
        return withdrawn
    }

    /// Every provider of the tenant, enabled or not, Apple first.
    public func list(tenant slug: String) async throws -> [Status] {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let configured = try await database.providerConfigs.list(tenantID: tenant.id)
        let attested = Set(try await database.loginPolicy.attestations(tenantID: tenant.id).map(\.provider))
        let apple = try await AppleAdmin(database: database, actor: actor).show(tenant: slug)
        // Apple is offered where its clients are: the union of their platforms.
        let applePlatforms = Set(apple.clients.flatMap(\.platforms)).sorted().map(\.rawValue)
        let appleStatus = Status(
            provider: "apple", enabled: !apple.clients.isEmpty, platforms: applePlatforms, clientIDs: apple.clients.map(\.clientID),
            hostedDomain: nil, appID: nil, hasAppSecret: false, limitedLogin: nil, updatedAt: nil, attested: nil)
        return [appleStatus]
            + [ProviderName.google, .facebook].map { name in
                var status =
                    configured.first { $0.provider == name }.map(Self.status)
                    ?? Status(
                        provider: name.rawValue, enabled: false, platforms: [], clientIDs: [], hostedDomain: nil, appID: nil,
                        hasAppSecret: false, limitedLogin: name == .facebook ? false : nil, updatedAt: nil)
                status.attested = attested.contains(name)
                return status
            }
    }

    public func show(tenant slug: String, provider: ProviderName) async throws -> Status {
        guard let status = try await list(tenant: slug).first(where: { $0.provider == provider.rawValue }) else {
            throw BrokerError.invalidArgument("Unknown provider '\(provider.rawValue)'.")
        }
        return status
    }

    private func attested(_ status: Status, tenantID: UUID) async throws -> Status {
        var status = status
        status.attested = try await database.loginPolicy.attestations(tenantID: tenantID).contains { $0.provider.rawValue == status.provider }
        return status
    }

    static func status(_ configuration: ProviderConfiguration) -> Status {
        Status(
            provider: configuration.provider.rawValue, enabled: true, platforms: configuration.platforms.map(\.rawValue),
            clientIDs: configuration.provider == .google ? configuration.clientIDs : [], hostedDomain: configuration.hostedDomain,
            appID: configuration.appID, hasAppSecret: configuration.sealedSecret != nil,
            limitedLogin: configuration.provider == .facebook ? configuration.limitedLogin : nil, updatedAt: configuration.updatedAt)
    }

    static func clientIDs(_ values: [String], option: String) throws -> [String] {
        var ids: [String] = []
        for value in values {
            let id = value.trimmingCharacters(in: .whitespaces)
            try FreeText.require(id, option: option)
            guard !id.isEmpty, id.count <= 255, !id.contains(where: { $0.isWhitespace || $0.isNewline }) else {
                throw BrokerError.invalidArgument("\(option) '\(value.prefix(80))' is not a client id.", hint: "Pass the OAuth client id as the console shows it.")
            }
            if !ids.contains(id) { ids.append(id) }
        }
        guard !ids.isEmpty else {
            throw BrokerError.invalidArgument("Give at least one \(option).", hint: "Repeat \(option) for each client (iOS, Android, web).")
        }
        return ids
    }

    static func isDomain(_ text: String) -> Bool {
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        return text.count <= 253 && labels.count >= 2
            && labels.allSatisfy { label in
                !label.isEmpty && label.count <= 63 && label.first != "-" && label.last != "-"
                    && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            }
    }
}
