import AsyncHTTPClient
import BrokerCore
import Foundation
import Logging
import Providers
import Storage

/// A parsed JSON value written back as JSON by an `Encoder`.
package struct EncodableJSON: Encodable {
    package let value: JSONValue

    package init(_ value: JSONValue) { self.value = value }

    package func encode(to encoder: any Encoder) throws {
        switch value {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let flag):
            var container = encoder.singleValueContainer()
            try container.encode(flag)
        case .number(let number):
            var container = encoder.singleValueContainer()
            try container.encode(number)
        case .string(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .array(let items):
            var container = encoder.unkeyedContainer()
            for item in items { try container.encode(EncodableJSON(item)) }
        case .object(let members):
            var container = encoder.singleValueContainer()
            try container.encode(members.mapValues(EncodableJSON.init))
        }
    }
}

/// Operator actions on a tenant's providers (`broker provider ...`), driven by the provider
/// types' descriptors. Apple is configured with `broker apple ...`; here it is listed, and
/// turned off and on.
public struct ProviderAdmin: Sendable {
    package let database: Database
    package let actor: String

    public init(database: Database, actor: String) {
        self.database = database
        self.actor = actor
    }

    /// One provider of a tenant as `provider list` / `show` report it. Never carries a secret.
    public struct Status: Sendable, Encodable {
        public let provider: String
        /// The provider's type: apple, google, facebook, oidc.
        public let type: String
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
        /// The name login options show.
        public var displayName: String?
        /// The type's own settings as `broker provider show` prints them (e.g. an OIDC issuer,
        /// its jwks_uri and algorithms), never a secret.
        public var settings: [String: JSONValue] = [:]
        /// What the type can do (id_tokens, code_exchange, ...).
        public var abilities: [String] = []
        /// After `enable`: the attestation this change withdrew (its app, client ids or login
        /// mode changed). Not part of the JSON shape: the CLI says it on stderr.
        public var attestationWithdrawn: AttestationWithdrawal?

        package init(
            provider: String, type: String, enabled: Bool, platforms: [String], clientIDs: [String], hostedDomain: String?, appID: String?,
            hasAppSecret: Bool, limitedLogin: Bool?, updatedAt: Date?, attested: Bool? = nil
        ) {
            self.provider = provider
            self.type = type
            self.enabled = enabled
            self.platforms = platforms
            self.clientIDs = clientIDs
            self.hostedDomain = hostedDomain
            self.appID = appID
            self.hasAppSecret = hasAppSecret
            self.limitedLogin = limitedLogin
            self.updatedAt = updatedAt
            self.attested = attested
        }

        package enum CodingKeys: String, CodingKey {
            case provider, type, enabled, platforms, settings, abilities
            case displayName = "display_name"
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
            try container.encode(type, forKey: .type)
            try container.encode(displayName, forKey: .displayName)
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
            try container.encode(settings.mapValues(EncodableJSON.init), forKey: .settings)
            try container.encode(abilities, forKey: .abilities)
        }
    }

    /// The provider types this admin configures (the built-ins, and any a test registers).
    public static func registry(
        secrets: SecretBox, endpoints: ProviderEndpoints = ProviderEndpoints(), httpClient: HTTPClient = .providers,
        logger: Logger = Logger(label: "broker.provider"), additional: [ProviderDescriptor] = []
    ) -> ProviderRegistry {
        var registry = ProviderRegistry.builtIn(
            ProviderContext(
                endpoints: endpoints,
                keySets: ProviderKeySets(httpClient: httpClient, logger: logger, fetchTimeout: .seconds(endpoints.timeoutSeconds)),
                secrets: secrets, httpClient: httpClient, logger: logger))
        for descriptor in additional { registry.register(descriptor) }
        return registry
    }

    /// Enables a provider of the tenant (or replaces its settings), checked by its type's
    /// descriptor (decision 0034): `values` are its settings by flag name; none, for a provider
    /// already configured, turns it back on with the settings it has. `type` defaults to a
    /// reserved id's own type, else the type the id already has. `enable apple` (no settings)
    /// turns Sign in with Apple back on. Refused when it breaks guideline 4.8
    /// (``PolicyAdmin/enforce(before:after:tenant:force:)``), unless `force`.
    public func enable(
        tenant slug: String, provider rawID: String, type rawType: String? = nil, platforms: [ProviderPlatform],
        values: [String: [String]], registry: ProviderRegistry, force: Bool = false
    ) async throws -> Status {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let provider = try Self.providerID(rawID)
        let existing = try await database.providerConfigs.find(tenantID: tenant.id, provider: provider)
        let type = try Self.type(of: provider, given: rawType, existing: existing?.type)
        let command = "broker provider enable \(provider.rawValue)"
        if type == .apple {
            guard values.values.allSatisfy(\.isEmpty), platforms.isEmpty else {
                throw BrokerError.invalidArgument(
                    "Apple takes no settings here.",
                    hint: "Configure it with 'broker apple ...'; 'broker provider enable apple' only turns it back on.")
            }
            _ = try await database.providerConfigs.setEnabled(
                true, tenantID: tenant.id, provider: .apple, actor: actor,
                guard: PolicyAdmin.guard(tenant: slug, action: "provider.enable", command: command, force: force))
            return try await show(tenant: slug, provider: .apple)
        }
        // A bare `enable <id>` of a configured provider turns it back on with its settings.
        if let existing, values.values.allSatisfy(\.isEmpty), platforms.isEmpty {
            if !existing.enabled {
                _ = try await database.providerConfigs.setEnabled(
                    true, tenantID: tenant.id, provider: provider, actor: actor,
                    guard: PolicyAdmin.guard(tenant: slug, action: "provider.enable", command: command, force: force))
            }
            return try await show(tenant: slug, provider: provider, registry: registry)
        }
        guard let registered = registry[type], let configure = registered.descriptor.configure else {
            throw BrokerError.invalidArgument(
                "Unknown provider type '\(type.rawValue.prefix(40))'.",
                hint: "Use --type \(registry.descriptors.filter { $0.configure != nil }.map(\.type.rawValue).joined(separator: ", ")).")
        }
        let input = ProviderSettingsInput(tenantID: tenant.id, provider: provider, platforms: platforms, values: values)
        var configuration = try await configure(input, registry.context)
        configuration.enabled = true
        let (saved, withdrawn): (ProviderConfiguration, AttestationWithdrawal?)
        do {
            (saved, withdrawn) = try await database.providerConfigs.save(
                configuration, actor: actor,
                guard: PolicyAdmin.guard(tenant: slug, action: "provider.enable", command: command, force: force))
        } catch let conflict as ProviderConfigConflict {
            throw Self.refusal(conflict, tenant: slug)
        }
        var status = try await attested(Self.status(saved, registry: registry), tenantID: tenant.id)
        status.attestationWithdrawn = withdrawn
        return status
    }

    /// Enables Google (or replaces its settings). `platforms` empty: offered everywhere, which
    /// guideline 4.8 counts as every platform, iOS and macOS included.
    public func enableGoogle(
        tenant slug: String, clientIDs: [String], hostedDomain: String?, platforms: [ProviderPlatform], force: Bool = false
    ) async throws -> Status {
        try await enable(
            tenant: slug, provider: "google", platforms: platforms,
            values: ["client-id": clientIDs, "hosted-domain": hostedDomain.map { [$0] } ?? []],
            registry: Self.registry(secrets: SecretBox(masterKey: MasterKey.generate().key)), force: force)
    }

    /// Enables Facebook (or replaces its settings); the app secret is sealed at rest.
    public func enableFacebook(
        tenant slug: String, appID: String, appSecret: String, limitedLogin: Bool, platforms: [ProviderPlatform], secrets: SecretBox,
        force: Bool = false
    ) async throws -> Status {
        try await enable(
            tenant: slug, provider: "facebook", platforms: platforms,
            values: ["app-id": [appID], "app-secret": [appSecret], "limited-login": limitedLogin ? ["true"] : []],
            registry: Self.registry(secrets: secrets), force: force)
    }

    /// Turns a provider of the tenant off, Apple included: its settings, identities and (for
    /// Apple) team, groups and clients stay, its attestation is withdrawn (returned, when it
    /// had one), and its sign-ins answer `provider_not_enabled`. Refused when guideline 4.8
    /// relies on it, unless `force`.
    @discardableResult
    public func disable(tenant slug: String, provider: ProviderID, force: Bool = false) async throws -> AttestationWithdrawal? {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let policyGuard = PolicyAdmin.guard(
            tenant: slug, action: "provider.disable", command: "broker provider disable \(provider.rawValue)", force: force)
        if provider != .apple, try await database.providerConfigs.find(tenantID: tenant.id, provider: provider) == nil {
            throw Self.notConfigured(provider, tenant: slug)
        }
        let (changed, withdrawn) = try await database.providerConfigs.setEnabled(
            false, tenantID: tenant.id, provider: provider, actor: actor, guard: policyGuard)
        guard changed else {
            throw BrokerError(
                code: "provider_not_enabled", kind: .conflict, title: "Provider already disabled",
                detail: "\(provider.rawValue) is already disabled for tenant '\(slug)'.",
                hint: "Turn it back on with 'broker provider enable \(provider.rawValue) --tenant \(slug)'.")
        }
        return withdrawn
    }

    /// Every provider of the tenant, enabled or not: Apple, Google and Facebook always, then the
    /// tenant's own ids.
    public func list(tenant slug: String, registry: ProviderRegistry? = nil) async throws -> [Status] {
        let registry = registry ?? Self.registry(secrets: SecretBox(masterKey: MasterKey.generate().key))
        let tenant = try await TenantAdmin.find(slug, in: database)
        let configured = try await database.providerConfigs.list(tenantID: tenant.id)
        let attested = Set(try await database.loginPolicy.attestations(tenantID: tenant.id).map(\.provider))
        let apple = try await AppleAdmin(database: database, actor: actor).show(tenant: slug)
        let appleSwitch = configured.first { $0.provider == .apple }
        // Apple is offered where its clients are: the union of their platforms.
        let applePlatforms = Set(apple.clients.flatMap(\.platforms)).sorted().map(\.rawValue)
        var appleStatus = Status(
            provider: "apple", type: "apple", enabled: !apple.clients.isEmpty && appleSwitch?.enabled != false,
            platforms: applePlatforms, clientIDs: apple.clients.map(\.clientID), hostedDomain: nil, appID: nil, hasAppSecret: false,
            limitedLogin: nil, updatedAt: appleSwitch?.updatedAt, attested: nil)
        appleStatus.displayName = "Apple"
        var statuses = [appleStatus]
        // The other reserved ids (Google, Facebook) are listed whether configured or not.
        for name in ProviderID.reserved where name != .apple {
            var status =
                configured.first { $0.provider == name }.map { Self.status($0, registry: registry) }
                ?? Status(
                    provider: name.rawValue, type: name.rawValue, enabled: false, platforms: [], clientIDs: [], hostedDomain: nil,
                    appID: nil, hasAppSecret: false, limitedLogin: name == .facebook ? false : nil, updatedAt: nil)
            status.attested = attested.contains(name)
            statuses.append(status)
        }
        for configuration in configured.sorted(by: { $0.provider < $1.provider }) where configuration.provider.reservedType == nil {
            var status = Self.status(configuration, registry: registry)
            status.attested = attested.contains(configuration.provider)
            statuses.append(status)
        }
        return statuses
    }

    public func show(tenant slug: String, provider: ProviderID, registry: ProviderRegistry? = nil) async throws -> Status {
        guard let status = try await list(tenant: slug, registry: registry).first(where: { $0.provider == provider.rawValue }) else {
            throw Self.notConfigured(provider, tenant: slug)
        }
        return status
    }

    package static func notConfigured(_ provider: ProviderID, tenant slug: String) -> BrokerError {
        BrokerError(
            code: "unknown_provider", kind: .notFound, title: "Unknown provider",
            detail: "Tenant '\(slug)' has no provider '\(provider.rawValue)'.", hint: "See 'broker provider list --tenant \(slug)'.")
    }

    /// A provider id as the operator typed it: a slug.
    package static func providerID(_ raw: String) throws -> ProviderID {
        guard let id = ProviderID(rawValue: raw) else {
            throw BrokerError.invalidArgument(
                "'\(raw.prefix(40))' is not a provider id.",
                hint: "Use 2-32 lowercase letters, digits and dashes starting with a letter, e.g. line or entra.")
        }
        return id
    }

    /// The type an id is enabled with: a reserved id is its own type; another id keeps the type
    /// it has, or takes `--type`; the built-in types other than `oidc` are only their own ids.
    package static func type(of provider: ProviderID, given rawType: String?, existing: ProviderType?) throws -> ProviderType {
        let given = rawType.map { ProviderType(rawValue: $0.lowercased()) }
        if let reserved = provider.reservedType {
            if let given, given != reserved {
                throw BrokerError.invalidArgument(
                    "The id '\(provider.rawValue)' is reserved for the \(reserved.rawValue) type.",
                    hint: "Pick another id for a \(given.rawValue) provider.")
            }
            return reserved
        }
        if let given, ProviderID.reserved.contains(where: { $0.reservedType == given }) {
            throw BrokerError.invalidArgument(
                "A \(given.rawValue) provider has the id '\(given.rawValue)'.",
                hint: "broker provider enable \(given.rawValue) --tenant <slug> ...")
        }
        if let given, let existing, given != existing {
            throw refusal(.typeChanged(provider: provider, from: existing), tenant: "<slug>")
        }
        guard let type = given ?? existing else {
            throw BrokerError.invalidArgument(
                "Give the type of the new provider '\(provider.rawValue)'.",
                hint: "For an OpenID Connect issuer: --type oidc --issuer URL --client-id ID")
        }
        return type
    }

    package static func refusal(_ conflict: ProviderConfigConflict, tenant slug: String) -> BrokerError {
        switch conflict {
        case .issuerInUse(let issuer, let other):
            BrokerError(
                code: "issuer_in_use", kind: .conflict, title: "Issuer already configured",
                detail:
                    "Provider '\(other)' of tenant '\(slug)' already has the issuer \(issuer.prefix(200)); two providers of one tenant cannot share one.",
                hint: "Change '\(other)' instead: broker provider enable \(other) --tenant \(slug) ...")
        case .typeChanged(let provider, let from):
            BrokerError(
                code: "provider_type_conflict", kind: .conflict, title: "Provider type conflict",
                detail: "Provider '\(provider.rawValue)' is a \(from.rawValue) provider; an id keeps its type.",
                hint: "Pick another id for a provider of another type.")
        }
    }

    private func attested(_ status: Status, tenantID: UUID) async throws -> Status {
        var status = status
        status.attested = try await database.loginPolicy.attestations(tenantID: tenantID).contains {
            $0.provider.rawValue == status.provider
        }
        return status
    }

    package static func status(_ configuration: ProviderConfiguration, registry: ProviderRegistry) -> Status {
        let descriptor = registry[configuration.type]?.descriptor
        var status = Status(
            provider: configuration.provider.rawValue, type: configuration.type.rawValue, enabled: configuration.enabled,
            platforms: configuration.platforms.map(\.rawValue),
            clientIDs: configuration.type == .facebook ? [] : configuration.clientIDs, hostedDomain: configuration.hostedDomain,
            appID: configuration.appID, hasAppSecret: configuration.sealedSecret != nil,
            limitedLogin: configuration.type == .facebook ? configuration.limitedLogin : nil, updatedAt: configuration.updatedAt)
        status.displayName = configuration.displayName ?? descriptor?.displayName
        status.settings = Dictionary(descriptor?.describe(configuration).map { ($0.name, $0.value) } ?? [], uniquingKeysWith: { a, _ in a })
        status.abilities = descriptor?.abilities.names ?? []
        return status
    }
}
