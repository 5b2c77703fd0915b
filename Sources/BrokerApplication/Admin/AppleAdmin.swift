import BrokerCore
import Foundation
import JWTKit
import Storage

/// Operator actions on a tenant's Sign in with Apple setup.
public struct AppleAdmin: Sendable {
    package let database: Database
    package let actor: String

    public init(database: Database, actor: String) {
        self.database = database
        self.actor = actor
    }

    public struct Setup: Sendable {
        public let teams: [AppleTeam]
        public let groups: [AppleAppGroup]
        public let clients: [AppleClient]
    }

    /// Stores the team's key id and `.p8` (sealed). The key must be a PKCS#8 P-256 key.
    public func setTeam(tenant slug: String, teamID: String, keyID: String, p8PEM: String, secrets: SecretBox) async throws
        -> AppleTeam
    {
        let tenant = try await TenantAdmin.find(slug, in: database)
        try AppleTeam.validateIdentifier(teamID, name: "team id")
        try AppleTeam.validateIdentifier(keyID, name: "key id")
        do {
            _ = try ES256PrivateKey(pem: p8PEM)
        } catch {
            throw BrokerError.invalidArgument(
                "The private key file is not a Sign in with Apple key (a PKCS#8 P-256 key in PEM, as AuthKey_\(keyID).p8).",
                hint: "Download the key from Certificates, Identifiers & Profiles > Keys and pass that .p8 file.")
        }
        let sealed = try secrets.seal(
            Data(p8PEM.utf8), context: AppleTeam.sealingContext(tenantID: tenant.id, teamID: teamID))
        let team = AppleTeam(
            id: UUID(), tenantID: tenant.id, teamID: teamID, keyID: keyID, sealedPrivateKey: sealed, createdAt: Date())
        return try await database.apple.setTeam(team, actor: actor)
    }

    /// Creates an app group and registers its primary App ID as a client of kind `app`, offered
    /// on `platforms` (nil: iOS).
    public func addGroup(
        tenant slug: String, primaryAppID: String, teamID: String? = nil, nonceRequired: Bool = true,
        platforms: [ProviderPlatform]? = nil
    ) async throws -> AppleAppGroup {
        let tenant = try await TenantAdmin.find(slug, in: database)
        try AppleClient.validateClientID(primaryAppID)
        if let platforms { try AppleClientKind.app.validatePlatforms(platforms) }
        let team = try await team(of: tenant, teamID: teamID)
        let group = AppleAppGroup(id: UUID(), tenantID: tenant.id, teamRef: team.id, primaryAppID: primaryAppID)
        let client = AppleClient(
            id: UUID(), tenantID: tenant.id, groupID: group.id, clientID: primaryAppID, kind: .app, nonceMode: .sha256,
            redirectURIs: [], returnURLs: [], nonceRequired: nonceRequired, platforms: platforms)
        do {
            try await database.apple.addGroup(group, primaryClient: client, actor: actor)
        } catch StorageConflict.appleClientExists(let clientID) {
            throw Self.clientExists(clientID, detail: "a client id belongs to one group only", tenant: slug)
        }
        return group
    }

    /// Adds a grouped App ID or a Services ID to a group, offered on `platforms` (nil: the
    /// kind's default, ``AppleClientKind/defaultPlatforms``).
    public func addClient(
        tenant slug: String, group primaryAppID: String, clientID: String, kind: AppleClientKind, nonceMode: NonceMode,
        redirectURIs: [String], returnURLs: [String], nonceRequired: Bool = true, platforms: [ProviderPlatform]? = nil
    ) async throws -> AppleClient {
        let tenant = try await TenantAdmin.find(slug, in: database)
        try AppleClient.validateClientID(clientID)
        if let platforms { try kind.validatePlatforms(platforms) }
        for url in redirectURIs + returnURLs { try Self.validateURL(url) }
        if kind == .app, !redirectURIs.isEmpty || !returnURLs.isEmpty {
            throw BrokerError.invalidArgument(
                "Redirect and return URLs belong to Services IDs (--kind service), not App IDs.")
        }
        guard let group = try await database.apple.groups(tenantID: tenant.id).first(where: { $0.primaryAppID == primaryAppID })
        else {
            throw BrokerError(
                code: "apple_group_not_found", kind: .notFound, title: "App group not found",
                detail: "Tenant '\(slug)' has no app group with primary App ID '\(primaryAppID.prefix(155))'.",
                hint: "Create it: broker apple group add --tenant \(slug) --primary-app-id \(primaryAppID.prefix(155))")
        }
        let client = AppleClient(
            id: UUID(), tenantID: tenant.id, groupID: group.id, clientID: clientID, kind: kind, nonceMode: nonceMode,
            redirectURIs: redirectURIs, returnURLs: returnURLs, nonceRequired: nonceRequired, platforms: platforms)
        do {
            try await database.apple.addClient(client, actor: actor)
        } catch StorageConflict.appleClientExists(let clientID) {
            throw Self.clientExists(
                clientID, detail: "a client id belongs to one group only, and a Services ID may not equal an App ID", tenant: slug)
        }
        return client
    }

    /// Removes a client; returns it and whether its group went too. A group's primary App ID is
    /// refused while other clients are in the group; alone, it takes the group with it.
    /// Removing Apple's last client of iOS or macOS is refused when guideline 4.8 relies on it,
    /// unless `force`.
    public func removeClient(tenant slug: String, clientID: String, force: Bool = false) async throws
        -> (client: AppleClient, groupRemoved: Bool)
    {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let outcome = try await database.apple.removeClient(
            tenantID: tenant.id, clientID: clientID, actor: actor,
            guard: PolicyAdmin.guard(
                tenant: slug, action: "apple.client.remove", command: "broker apple client remove --client-id \(clientID)", force: force))
        switch outcome {
        case .removed(let client, let groupRemoved):
            return (client, groupRemoved)
        case .notFound:
            throw Self.clientNotFound(clientID, tenant: slug)
        case .primaryOfGroup(let others):
            throw BrokerError(
                code: "apple_primary_app_id", kind: .conflict, title: "Primary App ID of a group",
                detail:
                    "'\(clientID)' is the primary App ID of its group, which still has \(others.joined(separator: ", ")). Nothing was changed.",
                hint:
                    "Remove those first (broker apple client remove --tenant \(slug) --client-id \(others.first ?? "<CLIENT-ID>")); the primary App ID, removed alone, takes its group with it."
            )
        }
    }

    package static func clientNotFound(_ clientID: String, tenant slug: String) -> BrokerError {
        BrokerError(
            code: "apple_client_not_found", kind: .notFound, title: "Client not found",
            detail: "Tenant '\(slug)' has no Apple client '\(clientID.prefix(155))'.",
            hint: "List them: broker apple show --tenant \(slug)")
    }

    /// Turns a client's nonce requirement on or off.
    public func setNonceRequired(tenant slug: String, clientID: String, _ required: Bool) async throws -> AppleClient {
        let tenant = try await TenantAdmin.find(slug, in: database)
        guard let client = try await database.apple.setNonceRequired(tenantID: tenant.id, clientID: clientID, required, actor: actor)
        else { throw Self.clientNotFound(clientID, tenant: slug) }
        return client
    }

    /// Moves an app group onto another of the tenant's teams (after Apple transferred the app):
    /// its clients' sign-ins then resolve to that team.
    public func moveGroup(tenant slug: String, primaryAppID: String, teamID: String) async throws {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let team = try await team(of: tenant, teamID: teamID)
        guard
            try await database.apple.moveGroup(
                tenantID: tenant.id, primaryAppID: primaryAppID, teamRef: team.id, teamID: team.teamID, actor: actor)
        else {
            throw BrokerError(
                code: "apple_group_not_found", kind: .notFound, title: "App group not found",
                detail: "Tenant '\(slug)' has no app group '\(primaryAppID.prefix(120))'.",
                hint: "See the groups: broker apple show --tenant \(slug)")
        }
    }

    public func show(tenant slug: String) async throws -> Setup {
        let tenant = try await TenantAdmin.find(slug, in: database)
        async let teams = database.apple.teams(tenantID: tenant.id)
        async let groups = database.apple.groups(tenantID: tenant.id)
        async let clients = database.apple.clients(tenantID: tenant.id)
        return Setup(teams: try await teams, groups: try await groups, clients: try await clients)
    }

    package func team(of tenant: Tenant, teamID: String?) async throws -> AppleTeam {
        let teams = try await database.apple.teams(tenantID: tenant.id)
        if let teamID {
            guard let team = teams.first(where: { $0.teamID == teamID }) else {
                throw BrokerError.invalidArgument(
                    "Tenant '\(tenant.slug)' has no Apple team \(teamID.prefix(10)).",
                    hint:
                        "Set it first: broker apple team set --tenant \(tenant.slug) --team-id \(teamID.prefix(10)) --key-id <KEYID> --private-key-file key.p8"
                )
            }
            return team
        }
        guard let only = teams.first else {
            throw BrokerError(
                code: "apple_team_missing", kind: .invalidInput, title: "No Apple team",
                detail: "Tenant '\(tenant.slug)' has no Apple team yet; Apple user ids are scoped to a team.",
                hint:
                    "Set it first: broker apple team set --tenant \(tenant.slug) --team-id <TEAMID> --key-id <KEYID> --private-key-file key.p8"
            )
        }
        guard teams.count == 1 else {
            throw BrokerError.invalidArgument(
                "Tenant '\(tenant.slug)' has \(teams.count) Apple teams; say which with --team-id.")
        }
        return only
    }

    package static func validateURL(_ value: String) throws(BrokerError) {
        try FreeText.require(value, option: "--redirect-uri/--return-url")
        guard let url = URL(string: value), let scheme = url.scheme, ["https", "http"].contains(scheme), url.host != nil,
            url.fragment == nil
        else {
            throw BrokerError.invalidArgument("'\(value.prefix(200))' is not an absolute http(s) URL without a fragment.")
        }
    }

    package static func clientExists(_ clientID: String, detail: String, tenant slug: String) -> BrokerError {
        BrokerError(
            code: "apple_client_exists", kind: .conflict, title: "Client id already registered",
            detail: "'\(clientID)' is already registered for this tenant; \(detail).",
            hint: "See the tenant's Apple setup with 'broker apple show --tenant \(slug)'.")
    }
}
