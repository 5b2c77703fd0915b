import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var appleCredentials: AppleCredentialRepository { AppleCredentialRepository(client: client, logger: logger) }
}

/// Apple credential-state checks (issue 23 §3; decision 0043): which stored Apple refresh
/// tokens are due, each taken by one worker with `FOR UPDATE SKIP LOCKED` and a lease (so
/// instances share the work and never check one token twice at once, and no lock is held while
/// Apple answers), and the pacing all instances share.
public struct AppleCredentialRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    /// A stored Apple refresh token due for a check.
    public struct Due: Sendable {
        public let identityID: UUID
        public let tenantID: UUID
        public let teamID: String
        public let subject: String
        public let clientID: String?
        public let sealedToken: Data
    }

    /// What a check found.
    public enum Verdict: Sendable, Equatable {
        /// Apple honours the token: check again at `next`.
        case valid(next: Date)
        /// `invalid_grant`: handled as Apple's `consent-revoked` for the identity.
        case revoked
        /// Apple unreachable, failing or refusing the client: try again at `retryAt`; nothing
        /// else changes.
        case failed(retryAt: Date)
    }

    /// Gives up to `limit` never-scheduled tokens (of `tenantID`, or of every tenant) a due time
    /// at a random point within `interval` from now, so that checks spread over the interval.
    @discardableResult
    public func schedule(tenantID: UUID? = nil, interval: TimeInterval, limit: Int = 1_000) async throws -> Int {
        try await client.rows(Self.scheduling(tenantID: tenantID, interval: interval, limit: limit), logger: logger).count
    }

    /// The statement of ``schedule(tenantID:interval:limit:)``. It and ``taking(tenantID:dueBy:)``
    /// read `identities_credential_check_idx`, whose predicate names
    /// `holds_provider_refresh_token`, not the token: a sign-in that replaces the token then
    /// updates the identity in place (decision 0093; their plans: `AppleCredentialPlanTests`).
    static func scheduling(tenantID: UUID?, interval: TimeInterval, limit: Int) -> PostgresQuery {
        """
        UPDATE identities SET credential_check_due_at = now() + random() * make_interval(secs => \(interval))
        WHERE id IN (
            SELECT i.id FROM identities i
            WHERE i.provider = 'apple' AND i.holds_provider_refresh_token AND i.credential_check_due_at IS NULL
                AND i.apple_transfer_sub IS NULL
                AND (\(tenantID)::uuid IS NULL OR i.tenant_id = \(tenantID))
            LIMIT \(limit) FOR UPDATE SKIP LOCKED)
        RETURNING id
        """
    }

    /// Makes every token of the tenant due now (`broker apple check-credentials --now`).
    public func makeDue(tenantID: UUID, at now: Date) async throws -> Int {
        try await client.rows(
            """
            UPDATE identities SET credential_check_due_at = \(now)
            WHERE tenant_id = \(tenantID) AND provider = 'apple' AND holds_provider_refresh_token AND apple_transfer_sub IS NULL
            RETURNING id
            """, logger: logger
        ).count
    }

    /// How long a taken check is leased to its worker: a worker that dies mid-call leaves the
    /// token to be checked again after it.
    public static let lease: TimeInterval = 900

    /// Identities an Apple team transfer exported are left alone until re-keyed (which drops
    /// the old team's token): Apple may refuse that token once the app moved, and a refusal must
    /// not be read as the person's consent revoked (decision 0045).
    ///
    /// Takes the most overdue token due at `dueBy` (of `tenantID`, or of every tenant) by
    /// moving its due time one lease ahead (a short transaction: no lock is held while Apple is
    /// asked), calls `check`, and records the verdict (a revocation is applied as
    /// `consent-revoked` in one transaction); nil when none was due.
    public func checkNext(tenantID: UUID? = nil, dueBy: Date, _ check: @Sendable (Due) async -> Verdict) async throws -> Verdict? {
        let rows = try await WorkerCall.bounded { [client, logger] in
            try await client.rows(Self.taking(tenantID: tenantID, dueBy: dueBy), logger: logger)
        }
        guard let row = rows.first else { return nil }
        let (id, tenant, team, subject, clientID, sealed) = try row.decode((UUID, UUID, String, String, String?, Data).self)
        let verdict = await check(
            Due(identityID: id, tenantID: tenant, teamID: team, subject: subject, clientID: clientID, sealedToken: sealed))
        return try await OutcomeWrite.retrying(
            lease: Self.lease, what: "Apple credential check of identity \(id.lowercasedString)", logger: logger
        ) {
            try await record(verdict, identityID: id, tenantID: tenant, teamID: team, subject: subject, sealed: sealed)
        }
    }

    /// The statement of ``checkNext(tenantID:dueBy:_:)``: the most overdue token, its lease taken.
    static func taking(tenantID: UUID?, dueBy: Date) -> PostgresQuery {
        """
        UPDATE identities i SET credential_check_due_at = now() + make_interval(secs => \(Self.lease))
        WHERE i.id = (
            SELECT d.id FROM identities d
            WHERE d.provider = 'apple' AND d.holds_provider_refresh_token AND d.credential_check_due_at <= \(dueBy)
                AND d.apple_transfer_sub IS NULL
                AND (\(tenantID)::uuid IS NULL OR d.tenant_id = \(tenantID))
            ORDER BY d.credential_check_due_at LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING i.id, i.tenant_id, i.provider_scope, i.subject, i.provider_token_client_id, i.provider_refresh_token_sealed
        """
    }

    /// Writes what Apple answered about the token `sealed`, if the identity still holds it.
    func record(_ verdict: Verdict, identityID id: UUID, tenantID tenant: UUID, teamID team: String, subject: String, sealed: Data)
        async throws -> Verdict
    {
        switch verdict {
        case .valid(let next), .failed(let next):
            // Only the token that was checked: a sign-in may have stored a newer one meanwhile.
            _ = try await client.rows(
                """
                UPDATE identities SET credential_check_due_at = \(next)
                WHERE tenant_id = \(tenant) AND id = \(id) AND provider_refresh_token_sealed = \(sealed)
                """, logger: logger)
        case .revoked:
            let applied = try await client.transaction(logger: logger) { connection -> Bool in
                // Revoked only if the identity still holds the token Apple refused.
                let still = try await connection.query(
                    """
                    SELECT 1 FROM identities WHERE tenant_id = \(tenant) AND id = \(id) AND provider_refresh_token_sealed = \(sealed)
                    FOR UPDATE
                    """, logger: logger
                ).collect()
                guard !still.isEmpty else { return false }
                let event = AppleNotificationRepository.Event(
                    id: "credential-check:\(id.lowercasedString):\(Int(Date().timeIntervalSince1970))", type: "consent-revoked",
                    subject: subject, eventTime: Date())
                _ = try await AppleNotificationRepository(client: client, logger: logger).applyWithReceipt(
                    event, to: .init(tenantID: tenant, teamID: team), on: connection)
                return true
            }
            // A sign-in stored a newer token meanwhile (Apple just issued it): nothing revoked.
            if !applied { return .valid(next: Date()) }
        }
        return verdict
    }

    /// A slot of the shared pacing: when it starts (the database's clock) and how long from now.
    public struct Slot: Sendable, Equatable {
        public let startsAt: Date
        public let wait: Duration
    }

    /// Takes the next free slot of `name` at `rate` calls a second, shared by every instance:
    /// slots are `1/rate` seconds apart whoever takes them. The first use creates the row and
    /// does not wait.
    public func takeSlot(_ name: String, rate: Int) async throws -> Slot {
        let step = 1.0 / Double(max(rate, 1))
        let rows = try await client.rows(
            """
            WITH ensured AS (INSERT INTO worker_pacing (name) VALUES (\(name)) ON CONFLICT (name) DO NOTHING),
            taken AS (
                UPDATE worker_pacing SET next_at = greatest(next_at, clock_timestamp()) + make_interval(secs => \(step))
                WHERE name = \(name)
                RETURNING next_at - make_interval(secs => \(step)) AS starts_at)
            SELECT starts_at, extract(epoch FROM (starts_at - clock_timestamp()))::float8 FROM taken
            """, logger: logger)
        guard let row = rows.first else { return Slot(startsAt: Date(), wait: .zero) }
        let (startsAt, seconds) = try row.decode((Date, Double).self)
        return Slot(startsAt: startsAt, wait: seconds > 0 ? .milliseconds(Int(seconds * 1_000)) : .zero)
    }
}
