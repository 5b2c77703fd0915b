import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// Apple teams, app groups and clients of a tenant.
public struct AppleRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    static let teamColumns = "t.id, t.tenant_id, t.team_id, t.key_id, t.private_key_sealed, t.created_at"
    static let groupColumns = "g.id, g.tenant_id, g.team_ref, g.primary_app_id"
    static let clientColumns =
        "c.id, c.tenant_id, c.group_id, c.client_id, c.kind, c.nonce_mode, c.redirect_uris, c.return_urls, c.nonce_required, c.platforms"

    /// Creates or replaces the tenant's team key (by team id).
    public func setTeam(_ team: AppleTeam, actor: String) async throws -> AppleTeam {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                INSERT INTO apple_teams AS t (id, tenant_id, team_id, key_id, private_key_sealed)
                VALUES (\(team.id), \(team.tenantID), \(team.teamID), \(team.keyID), \(team.sealedPrivateKey))
                ON CONFLICT (tenant_id, team_id) DO UPDATE
                    SET key_id = EXCLUDED.key_id, private_key_sealed = EXCLUDED.private_key_sealed, updated_at = now()
                RETURNING \(unescaped: Self.teamColumns)
                """, logger: logger)
            guard let row = try await rows.collect().first else { throw StorageError.configuration("no team row") }
            var reader = RowReader(row)
            let saved = try Self.decodeTeam(&reader)
            try await Database.notify(.appleClients, tenantID: team.tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: team.tenantID, actor: actor, action: "apple.team.set", target: team.teamID, on: connection,
                logger: logger)
            return saved
        }
    }

    public func teams(tenantID: UUID) async throws -> [AppleTeam] {
        let rows = try await client.rows(
            "SELECT \(unescaped: Self.teamColumns) FROM apple_teams t WHERE t.tenant_id = \(tenantID) ORDER BY t.created_at",
            logger: logger)
        return try rows.map { row in
            var reader = RowReader(row)
            return try Self.decodeTeam(&reader)
        }
    }

    /// Moves the group of `primaryAppID` onto the team `teamRef` (a team transfer: the app now
    /// belongs to that team, so its sign-ins carry that team's subjects). False when the tenant
    /// has no such group.
    public func moveGroup(tenantID: UUID, primaryAppID: String, teamRef: UUID, teamID: String, actor: String) async throws -> Bool {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE apple_app_groups SET team_ref = \(teamRef)
                WHERE tenant_id = \(tenantID) AND primary_app_id = \(primaryAppID) RETURNING id
                """, logger: logger
            ).collect()
            guard !rows.isEmpty else { return false }
            try await Database.notify(.appleClients, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "apple.group.moved", target: primaryAppID, details: ["team_id": .string(teamID)],
                on: connection, logger: logger)
            return true
        }
    }

    /// Creates a group and registers its primary App ID as a client of kind `app`.
    public func addGroup(_ group: AppleAppGroup, primaryClient: AppleClient, actor: String) async throws {
        do {
            try await client.transaction(logger: logger) { connection in
                try await connection.query(
                    """
                    INSERT INTO apple_app_groups (id, tenant_id, team_ref, primary_app_id)
                    VALUES (\(group.id), \(group.tenantID), \(group.teamRef), \(group.primaryAppID))
                    """, logger: logger)
                try await Self.insertClient(primaryClient, on: connection, logger: logger)
                try await Database.notify(.appleClients, tenantID: group.tenantID, on: connection, logger: logger)
                try await AuditLogRepository.append(
                    tenantID: group.tenantID, actor: actor, action: "apple.group.add", target: group.primaryAppID,
                    on: connection, logger: logger)
            }
        } catch let error where error.postgresError?.isUniqueViolation == true {
            throw StorageConflict.appleClientExists(clientID: group.primaryAppID)
        }
    }

    public func addClient(_ appleClient: AppleClient, actor: String) async throws {
        do {
            try await client.transaction(logger: logger) { connection in
                try await Self.insertClient(appleClient, on: connection, logger: logger)
                try await Database.notify(.appleClients, tenantID: appleClient.tenantID, on: connection, logger: logger)
                try await AuditLogRepository.append(
                    tenantID: appleClient.tenantID, actor: actor, action: "apple.client.add", target: appleClient.clientID,
                    on: connection, logger: logger)
            }
        } catch let error where error.postgresError?.isUniqueViolation == true {
            throw StorageConflict.appleClientExists(clientID: appleClient.clientID)
        }
    }

    static func insertClient(_ appleClient: AppleClient, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO apple_clients (id, tenant_id, group_id, client_id, kind, nonce_mode, redirect_uris, return_urls,
                nonce_required, platforms)
            VALUES (\(appleClient.id), \(appleClient.tenantID), \(appleClient.groupID), \(appleClient.clientID),
                \(appleClient.kind.rawValue), \(appleClient.nonceMode.rawValue), \(appleClient.redirectURIs),
                \(appleClient.returnURLs), \(appleClient.nonceRequired), \(appleClient.platforms.map(\.rawValue)))
            """, logger: logger)
    }

    public func groups(tenantID: UUID) async throws -> [AppleAppGroup] {
        let rows = try await client.rows(
            "SELECT \(unescaped: Self.groupColumns) FROM apple_app_groups g WHERE g.tenant_id = \(tenantID) ORDER BY g.created_at",
            logger: logger)
        return try rows.map { row in
            var reader = RowReader(row)
            return try Self.decodeGroup(&reader)
        }
    }

    public func clients(tenantID: UUID) async throws -> [AppleClient] {
        let rows = try await client.rows(
            "SELECT \(unescaped: Self.clientColumns) FROM apple_clients c WHERE c.tenant_id = \(tenantID) ORDER BY c.created_at",
            logger: logger)
        return try rows.map { row in
            var reader = RowReader(row)
            return try Self.decodeClient(&reader)
        }
    }

    /// The statement of `resolve` (its plan is asserted by HotStatementPlanTests, decision 0014).
    static func resolveQuery(tenantID: UUID, clientID: String) -> PostgresQuery {
        """
        SELECT \(unescaped: Self.clientColumns), \(unescaped: Self.groupColumns), \(unescaped: Self.teamColumns)
        FROM apple_clients c
        JOIN apple_app_groups g ON g.id = c.group_id AND g.tenant_id = c.tenant_id
        JOIN apple_teams t ON t.id = g.team_ref AND t.tenant_id = c.tenant_id
        WHERE c.tenant_id = \(tenantID) AND c.client_id = \(clientID)
        """
    }

    /// The client with its group and team, in one query; nil when the tenant has no such client
    /// (or its group has no team).
    public func resolve(tenantID: UUID, clientID: String) async throws -> ResolvedAppleClient? {
        let rows = try await client.rows(Self.resolveQuery(tenantID: tenantID, clientID: clientID), logger: logger)
        guard let row = rows.first else { return nil }
        var reader = RowReader(row)
        return ResolvedAppleClient(
            client: try Self.decodeClient(&reader), group: try Self.decodeGroup(&reader), team: try Self.decodeTeam(&reader))
    }

    static func decodeTeam(_ reader: inout RowReader) throws -> AppleTeam {
        AppleTeam(
            id: try reader.next(), tenantID: try reader.next(), teamID: try reader.next(), keyID: try reader.next(),
            sealedPrivateKey: try reader.next(), createdAt: try reader.next())
    }

    static func decodeGroup(_ reader: inout RowReader) throws -> AppleAppGroup {
        AppleAppGroup(id: try reader.next(), tenantID: try reader.next(), teamRef: try reader.next(), primaryAppID: try reader.next())
    }

    static func decodeClient(_ reader: inout RowReader) throws -> AppleClient {
        AppleClient(
            id: try reader.next(), tenantID: try reader.next(), groupID: try reader.next(), clientID: try reader.next(),
            kind: AppleClientKind(rawValue: try reader.next(String.self)) ?? .app,
            nonceMode: NonceMode(rawValue: try reader.next(String.self)) ?? .sha256,
            redirectURIs: try reader.next(), returnURLs: try reader.next(), nonceRequired: try reader.next(),
            platforms: try reader.next([String].self).compactMap(ProviderPlatform.init(rawValue:)))
    }

    /// What `removeClient` did, or why it did nothing.
    public enum ClientRemoval: Sendable, Equatable {
        /// Removed; `groupRemoved` when it was its group's primary App ID and alone in it, and the
        /// group went with it.
        case removed(AppleClient, groupRemoved: Bool)
        /// The tenant has no such client.
        case notFound
        /// It is its group's primary App ID and the group has these other clients.
        case primaryOfGroup(others: [String])
    }

    /// Removes a client. A group's primary App ID goes only when it is alone in its group, and
    /// then takes the group with it. `policyGuard` may refuse the removal (guideline 4.8: Apple's
    /// last client of a platform), and nothing is written.
    public func removeClient(tenantID: UUID, clientID: String, actor: String, guard policyGuard: LoginPolicyGuard?) async throws
        -> ClientRemoval
    {
        try await LoginPolicyRepository.transaction(client, tenantID: tenantID, guard: policyGuard, actor: actor, logger: logger) {
            connection in
            // The group row locked: no client joins it while it may be removed.
            let rows = try await connection.query(
                """
                SELECT \(unescaped: Self.clientColumns), g.primary_app_id
                FROM apple_clients c JOIN apple_app_groups g ON g.id = c.group_id AND g.tenant_id = c.tenant_id
                WHERE c.tenant_id = \(tenantID) AND c.client_id = \(clientID)
                FOR UPDATE OF g
                """, logger: logger)
            guard let row = try await rows.collect().first else { return ClientRemoval.notFound }
            var reader = RowReader(row)
            let removed = try Self.decodeClient(&reader)
            let primaryAppID: String = try reader.next()
            var groupRemoved = false
            if removed.clientID == primaryAppID {
                let others = try await connection.query(
                    """
                    SELECT c.client_id FROM apple_clients c
                    WHERE c.group_id = \(removed.groupID) AND c.tenant_id = \(tenantID) AND c.id <> \(removed.id)
                    ORDER BY c.client_id
                    """, logger: logger)
                let names = try await others.collect().map { try $0.decode(String.self) }
                guard names.isEmpty else { return ClientRemoval.primaryOfGroup(others: names) }
                try await connection.query(
                    "DELETE FROM apple_app_groups WHERE id = \(removed.groupID) AND tenant_id = \(tenantID)", logger: logger)
                groupRemoved = true
            } else {
                try await connection.query(
                    "DELETE FROM apple_clients WHERE id = \(removed.id) AND tenant_id = \(tenantID)", logger: logger)
            }
            try await Database.notify(.appleClients, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "apple.client.remove", target: clientID,
                details: ["group_removed": .bool(groupRemoved), "kind": .string(removed.kind.rawValue)],
                on: connection, logger: logger)
            return ClientRemoval.removed(removed, groupRemoved: groupRemoved)
        }
    }

    /// Changes whether a client requires a nonce; nil when the tenant has no such client.
    public func setNonceRequired(tenantID: UUID, clientID: String, _ required: Bool, actor: String) async throws -> AppleClient? {
        try await client.transaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE apple_clients c SET nonce_required = \(required)
                WHERE c.tenant_id = \(tenantID) AND c.client_id = \(clientID)
                RETURNING \(unescaped: Self.clientColumns)
                """, logger: logger)
            guard let row = try await rows.collect().first else { return nil }
            var reader = RowReader(row)
            let updated = try Self.decodeClient(&reader)
            try await Database.notify(.appleClients, tenantID: tenantID, on: connection, logger: logger)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: required ? "apple.client.nonce_required" : "apple.client.nonce_optional",
                target: clientID, on: connection, logger: logger)
            return updated
        }
    }
}
