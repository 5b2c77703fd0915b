import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var identityLinks: IdentityLinkRepository { IdentityLinkRepository(client: client, logger: logger) }
}

/// Linking a provider identity to an account on the person's say-so, and unlinking it
/// (decision 0025). Nothing is ever merged or moved: an identity belongs to
/// one account, and the identities' unique key decides every race.
public struct IdentityLinkRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    public enum LinkOutcome: Sendable, Equatable {
        /// Linked now.
        case linked(Identity)
        /// It was linked to this account already: nothing changed.
        case alreadyLinked(Identity)
        /// Another account of the tenant holds it: nothing changed.
        case linkedElsewhere(accountID: UUID)
        /// The tenant has no such account.
        case accountNotFound
        /// The account is disabled or deleted.
        case accountNotActive
    }

    public enum UnlinkOutcome: Sendable, Equatable {
        /// Unlinked; the sessions opened through it were revoked.
        case unlinked(Identity, revokedSessions: Int)
        /// The tenant has no such account.
        case accountNotFound
        /// The account is disabled or deleted: nothing changed.
        case accountNotActive
        /// The account has no such identity.
        case identityNotFound
        /// It is the account's only way in.
        case lastIdentity
    }

    /// The identity token a link presented as its proof, spent by the link (decision 0031): the
    /// session id a sign-in with that token would take (its replay key, decision 0018).
    public struct SpentProof: Sendable, Equatable {
        /// The session id of the token's replay key (`NewSession.identify(byReplayKey:issuedAt:)`).
        public var sessionID: UUID
        /// The client the token was issued to (its `aud`), as a sign-in's session records it.
        public var clientID: String
        /// As long as a session the token opened would last: the key outlives the token.
        public var expiresAt: Date

        public init(sessionID: UUID, clientID: String, expiresAt: Date) {
            self.sessionID = sessionID
            self.clientID = clientID
            self.expiresAt = expiresAt
        }
    }

    /// Links the identity to the account, in one transaction: the account row is locked for
    /// share (an unlink of the same account waits), the identity inserted unless its unique key
    /// exists, and then the owner of that key decides the answer. Of two links of one identity
    /// racing, or a link racing a first sign-in, the second to reach the unique index waits for
    /// the first to commit and then sees its row: one account holds the identity, never two.
    ///
    /// A link that succeeds (linked now, or linked already) spends `proof`: it inserts, in the
    /// same transaction, the session row a sign-in with that token would have opened, revoked
    /// at once (`revoke_reason = 'link_proof'`, no identity, no refresh token). The sessions'
    /// primary key then refuses the token everywhere, at sign-in and at a second link (decision
    /// 0031); a token that already opened a session, or spent itself on a link, makes this link
    /// throw ``IdentityTokenReplayed`` and roll back: nothing of it is written.
    public func link(
        tenantID: UUID, accountID: UUID, identity: ProviderIdentity, sealedProviderRefreshToken: Data?,
        providerTokenClientID: String? = nil,
        actor: String, spending proof: SpentProof? = nil
    ) async throws -> LinkOutcome {
        do {
            return try await linkInTransaction(
                tenantID: tenantID, accountID: accountID, identity: identity, sealedProviderRefreshToken: sealedProviderRefreshToken,
                providerTokenClientID: providerTokenClientID, actor: actor, spending: proof)
        } catch let error as PostgresTransactionError where error.closureError is IdentityTokenReplayed && error.rollbackError == nil {
            throw IdentityTokenReplayed()  // rolled back: nothing of the link was written
        }
    }

    private func linkInTransaction(
        tenantID: UUID, accountID: UUID, identity: ProviderIdentity, sealedProviderRefreshToken: Data?, providerTokenClientID: String?,
        actor: String, spending proof: SpentProof?
    ) async throws -> LinkOutcome {
        try await client.transaction(logger: logger) { connection in
            let status = try await connection.query(
                "SELECT status FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID) FOR SHARE", logger: logger
            ).collect().first?.decode(String.self)
            guard let status else { return .accountNotFound }
            guard status == AccountStatus.active.rawValue else { return .accountNotActive }

            let inserted = try await connection.query(
                try Self.insertQuery(
                    tenantID: tenantID, accountID: accountID, identity: identity, sealedProviderRefreshToken: sealedProviderRefreshToken,
                    providerTokenClientID: providerTokenClientID),
                logger: logger
            ).collect().first
            if let row = inserted {
                var reader = RowReader(row)
                let linked = try AccountRepository.decodeIdentity(&reader)
                if let proof {
                    try await Self.spend(
                        proof, tenantID: tenantID, accountID: accountID, identity: identity, on: connection, logger: logger)
                }
                try await AuditLogRepository.append(
                    tenantID: tenantID, actor: actor, action: "identity.linked", target: linked.id.lowercasedString,
                    details: [
                        "account_id": .string(accountID.lowercasedString), "identity_id": .string(linked.id.lowercasedString),
                        "provider": .string(linked.provider), "linked_by": .string("account_token"),
                    ],
                    on: connection, logger: logger)
                try await EventOutbox.append(
                    tenantID: tenantID, accountID: accountID, type: "identity.linked",
                    payload: [
                        "account_id": .string(accountID.lowercasedString), "identity_id": .string(linked.id.lowercasedString),
                        "provider": .string(linked.provider), "linked_by": .string("account_token"),
                    ],
                    on: connection, logger: logger)
                return .linked(linked)
            }
            // Its key exists: committed by now (ON CONFLICT waited for any writer of it).
            guard
                let row = try await connection.query(
                    Self.ownerQuery(tenantID: tenantID, identity: identity), logger: logger
                ).collect().first
            else {
                throw StorageError.configuration("an identity's unique key conflicted but no row holds it")
            }
            var reader = RowReader(row)
            let existing = try AccountRepository.decodeIdentity(&reader)
            guard existing.accountID == accountID else {
                // Refused, so nothing is spent; but a spent proof is no proof at all: it is
                // refused as such rather than told which account holds the identity.
                if let proof, try await Self.isSpent(proof, tenantID: tenantID, on: connection, logger: logger) {
                    throw IdentityTokenReplayed()
                }
                return .linkedElsewhere(accountID: existing.accountID)
            }
            if let proof {
                try await Self.spend(proof, tenantID: tenantID, accountID: accountID, identity: identity, on: connection, logger: logger)
            }
            return .alreadyLinked(existing)
        }
    }

    /// Inserts the revoked marker session of a spent proof; throws ``IdentityTokenReplayed``
    /// (rolling the link back) when the token's session id is taken. `ON CONFLICT DO NOTHING`
    /// waits, like the primary key, for a concurrent writer of the same id (a sign-in or a link
    /// with the same token) and then sees its row.
    static func spend(
        _ proof: SpentProof, tenantID: UUID, accountID: UUID, identity: ProviderIdentity, on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        let rows = try await connection.query(
            spendQuery(proof, tenantID: tenantID, accountID: accountID, provider: identity.provider.rawValue), logger: logger
        ).collect()
        guard !rows.isEmpty else { throw IdentityTokenReplayed() }
    }

    /// Whether the proof's session id is taken: it opened a session or was spent on a link.
    static func isSpent(_ proof: SpentProof, tenantID: UUID, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await !connection.query(
            "SELECT 1 FROM sessions WHERE tenant_id = \(tenantID) AND id = \(proof.sessionID)", logger: logger
        ).collect().isEmpty
    }

    /// The statement of `spend` (its plan is asserted by HotStatementPlanTests). No identity:
    /// the row is no sign-in, so it must not move the identity's `last_sign_in_at` (read from
    /// its sessions, decision 0013); it stays with the account (an unlink does not free the
    /// token) and goes with it.
    static func spendQuery(_ proof: SpentProof, tenantID: UUID, accountID: UUID, provider: String) -> PostgresQuery {
        """
        INSERT INTO sessions (id, tenant_id, account_id, identity_id, client_id, idp, expires_at, revoked_at, revoke_reason)
        VALUES (\(proof.sessionID), \(tenantID), \(accountID), NULL, \(proof.clientID), \(provider), \(proof.expiresAt),
            now(), \(SessionRepository.linkProofReason))
        ON CONFLICT (id) DO NOTHING
        RETURNING id
        """
    }

    /// The insert of `link` (its plan is asserted by HotStatementPlanTests).
    static func insertQuery(
        tenantID: UUID, accountID: UUID, identity: ProviderIdentity, sealedProviderRefreshToken: Data?,
        providerTokenClientID: String? = nil
    ) throws -> PostgresQuery {
        let attributes = IdentityAttributes.encode(identity.attributes)
        return try """
        INSERT INTO identities AS i (id, tenant_id, account_id, provider, provider_scope, subject, email, email_verified,
            is_private_email, given_name, family_name, real_user_status, provider_refresh_token_sealed, provider_token_client_id,
            attributes)
        VALUES (\(UUID.timeOrdered()), \(tenantID), \(accountID), \(identity.provider.rawValue), \(identity.providerScope),
            \(identity.subject), \(identity.email), \(identity.emailVerified), \(identity.isPrivateEmail),
            \(identity.name.givenName), \(identity.name.familyName), \(identity.realUserStatus),
            \(sealedProviderRefreshToken), \(sealedProviderRefreshToken == nil ? nil : providerTokenClientID),
            \(attributes)::text::jsonb)
        ON CONFLICT (tenant_id, provider, provider_scope, subject) DO NOTHING
        RETURNING \(unescaped: AccountRepository.identityColumns)
        """
    }

    /// An identity by its unique key, with its account.
    static func ownerQuery(tenantID: UUID, identity: ProviderIdentity) -> PostgresQuery {
        """
        SELECT \(unescaped: AccountRepository.identityColumns) FROM identities i
        WHERE i.tenant_id = \(tenantID) AND i.provider = \(identity.provider.rawValue)
            AND i.provider_scope = \(identity.providerScope) AND i.subject = \(identity.subject)
        """
    }

    /// The account that holds the identity, if any.
    public func owner(tenantID: UUID, identity: ProviderIdentity) async throws -> UUID? {
        let rows = try await client.rows(Self.ownerQuery(tenantID: tenantID, identity: identity), logger: logger)
        guard let row = rows.first else { return nil }
        var reader = RowReader(row)
        return try AccountRepository.decodeIdentity(&reader).accountID
    }

    /// Unlinks an identity from its account, in one transaction: the account row is locked for
    /// update (two unlinks of one account cannot both see the other identity and leave none),
    /// its identities read, the sessions opened through this one revoked, the identity deleted.
    public func unlink(tenantID: UUID, accountID: UUID, identityID: UUID, actor: String) async throws -> UnlinkOutcome {
        try await client.transaction(logger: logger) { connection in
            let status = try await connection.query(
                "SELECT status FROM accounts WHERE tenant_id = \(tenantID) AND id = \(accountID) FOR UPDATE", logger: logger
            ).collect().first?.decode(String.self)
            guard let status else { return .accountNotFound }
            guard status == AccountStatus.active.rawValue else { return .accountNotActive }
            let owned = try await connection.query(
                "SELECT i.id FROM identities i WHERE i.account_id = \(accountID) AND i.tenant_id = \(tenantID)", logger: logger
            ).collect().map { try $0.decode(UUID.self) }
            guard owned.contains(identityID) else { return .identityNotFound }
            guard owned.count > 1 else { return .lastIdentity }

            let revoked = try await connection.query(
                """
                UPDATE sessions SET revoked_at = now(), revoke_reason = 'identity_unlinked'
                WHERE identity_id = \(identityID) AND tenant_id = \(tenantID) AND account_id = \(accountID) AND revoked_at IS NULL
                RETURNING id
                """, logger: logger
            ).collect().count
            guard
                let row = try await connection.query(
                    """
                    DELETE FROM identities i WHERE i.id = \(identityID) AND i.tenant_id = \(tenantID) AND i.account_id = \(accountID)
                    RETURNING \(unescaped: AccountRepository.identityColumns)
                    """, logger: logger
                ).collect().first
            else { return .identityNotFound }
            var reader = RowReader(row)
            let identity = try AccountRepository.decodeIdentity(&reader)
            try await AuditLogRepository.append(
                tenantID: tenantID, actor: actor, action: "identity.unlinked", target: identity.id.lowercasedString,
                details: [
                    "account_id": .string(accountID.lowercasedString), "identity_id": .string(identity.id.lowercasedString),
                    "provider": .string(identity.provider), "revoked_sessions": .int(revoked),
                ],
                on: connection, logger: logger)
            try await EventOutbox.append(
                tenantID: tenantID, accountID: accountID, type: "identity.unlinked",
                payload: [
                    "account_id": .string(accountID.lowercasedString), "identity_id": .string(identity.id.lowercasedString),
                    "provider": .string(identity.provider), "reason": .string("unlinked"),
                ],
                on: connection, logger: logger)
            return .unlinked(identity, revokedSessions: revoked)
        }
    }
}
