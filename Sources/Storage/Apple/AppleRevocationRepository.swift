import BrokerCore
import Foundation
import Logging
import PostgresNIO

extension Database {
    public var appleRevocations: AppleRevocationRepository { AppleRevocationRepository(client: client, logger: logger) }
}

/// The queue of Apple refresh-token revocations (issue 23 §2; decision 0040). A deletion writes
/// rows in its own transaction; workers of every instance take due rows one at a time with
/// `FOR UPDATE SKIP LOCKED` and a lease (the row's due time moved ahead), so each call is made
/// by one instance, no lock is held while Apple answers, and a worker that dies mid-call leaves
/// the row to be taken again when the lease runs out.
public struct AppleRevocationRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    public enum Status: String, Sendable, CaseIterable {
        case pending, failed, done
    }

    /// A revocation to queue: the token sealed under ``sealingContext(tenantID:id:)``.
    public struct NewRevocation: Sendable {
        public let id: UUID
        public let teamID: String
        public let clientID: String
        public let sealedToken: Data

        public init(id: UUID, teamID: String, clientID: String, sealedToken: Data) {
            self.id = id
            self.teamID = teamID
            self.clientID = clientID
            self.sealedToken = sealedToken
        }
    }

    /// A queued revocation as operators see it (never the token).
    public struct Revocation: Sendable, Equatable {
        public let id: UUID
        public let tenantID: UUID
        public let accountID: UUID
        public let teamID: String
        public let clientID: String
        public let status: Status
        public let attempts: Int
        public let nextAttemptAt: Date
        public let lastError: String?
        public let createdAt: Date
        public let doneAt: Date?
    }

    /// A due revocation taken by a worker, with its sealed token.
    public struct Due: Sendable {
        public let revocation: Revocation
        public let sealedToken: Data
    }

    /// What the worker's call to Apple came to.
    public enum Result: Sendable, Equatable {
        /// Apple took the token: the row is done and the token dropped.
        case revoked
        /// Try again at `retryAt`, or give up (`failed`) when `retryAt` is nil.
        case failed(error: String, retryAt: Date?)
        /// The broker stopped mid-call (issue 39 D11): what Apple did is unknown; the lease is
        /// given back (due now, no attempt counted) and the next worker calls again (Apple
        /// answers a revoked token's revocation with 200).
        case interrupted
    }

    /// The context a queued token is sealed under: a token moved to another row does not open.
    public static func sealingContext(tenantID: UUID, id: UUID) -> String {
        "apple_revocation:\(tenantID.lowercasedString):\(id.lowercasedString)"
    }

    static func insert(_ revocation: NewRevocation, tenantID: UUID, accountID: UUID, on connection: PostgresConnection, logger: Logger)
        async throws
    {
        try await connection.query(
            """
            INSERT INTO apple_revocations (id, tenant_id, account_id, team_id, client_id, token_sealed)
            VALUES (\(revocation.id), \(tenantID), \(accountID), \(revocation.teamID), \(revocation.clientID), \(revocation.sealedToken))
            """, logger: logger)
    }

    /// How long a taken revocation is leased to its worker: one that dies mid-call leaves the
    /// row to be taken again after it (Apple's revoke is idempotent).
    public static let lease: TimeInterval = 900

    /// Takes the most overdue pending revocation (of any tenant) due at `now` by moving its due
    /// time one lease ahead (a short transaction: no lock is held while Apple answers), calls
    /// `work` with it, and records the result; false when none was due.
    public func processNext(now: Date, _ work: @Sendable (Due) async -> Result) async throws -> Bool {
        let rows = try await WorkerCall.bounded { [client, logger] in
            try await client.rows(
                """
                UPDATE apple_revocations r SET next_attempt_at = \(now.addingTimeInterval(Self.lease)), updated_at = now()
                WHERE r.id = (
                    SELECT d.id FROM apple_revocations d
                    WHERE d.status = 'pending' AND d.next_attempt_at <= \(now)
                    ORDER BY d.next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED)
                RETURNING \(unescaped: qualified(Self.columns, alias: "r")), r.token_sealed
                """, logger: logger)
        }
        guard let row = rows.first else { return false }
        var reader = RowReader(row)
        let revocation = try Self.decode(&reader)
        guard let sealed = try reader.next(Data?.self) else { return true }
        let result = await work(Due(revocation: revocation, sealedToken: sealed))
        try await OutcomeWrite.retrying(lease: Self.lease, what: "Apple revocation \(revocation.id.lowercasedString)", logger: logger) {
            try await record(result, of: revocation)
        }
        return true
    }

    /// Writes what the call to Apple came to, with its audit row, to a row still pending (an
    /// operator's retry or another worker after a lease ran out may have settled it).
    func record(_ result: Result, of revocation: Revocation) async throws {
        let tenant = revocation.tenantID
        try await client.transaction(logger: logger) { connection in
            switch result {
            case .revoked:
                try await connection.query(
                    """
                    UPDATE apple_revocations SET status = 'done', token_sealed = NULL, attempts = attempts + 1, last_error = NULL,
                        done_at = now(), updated_at = now()
                    WHERE id = \(revocation.id) AND tenant_id = \(tenant) AND status = 'pending'
                    """, logger: logger)
                try await AuditLogRepository.append(
                    tenantID: tenant, actor: "broker", action: "apple.revocation_done", target: revocation.id.lowercasedString,
                    details: ["account_id": .string(revocation.accountID.lowercasedString), "client_id": .string(revocation.clientID)],
                    on: connection, logger: logger)
            case .interrupted:
                try await connection.query(
                    """
                    UPDATE apple_revocations SET next_attempt_at = now(), updated_at = now()
                    WHERE id = \(revocation.id) AND tenant_id = \(tenant) AND status = 'pending'
                    """, logger: logger)
            case .failed(let error, let retryAt?):
                try await connection.query(
                    """
                    UPDATE apple_revocations SET attempts = attempts + 1, last_error = \(error), next_attempt_at = \(retryAt),
                        updated_at = now()
                    WHERE id = \(revocation.id) AND tenant_id = \(tenant) AND status = 'pending'
                    """, logger: logger)
            case .failed(let error, nil):
                try await connection.query(
                    """
                    UPDATE apple_revocations SET status = 'failed', attempts = attempts + 1, last_error = \(error), updated_at = now()
                    WHERE id = \(revocation.id) AND tenant_id = \(tenant) AND status = 'pending'
                    """, logger: logger)
                try await AuditLogRepository.append(
                    tenantID: tenant, actor: "broker", action: "apple.revocation_failed", target: revocation.id.lowercasedString,
                    details: [
                        "account_id": .string(revocation.accountID.lowercasedString), "client_id": .string(revocation.clientID),
                        "error": .string(error),
                    ],
                    on: connection, logger: logger)
            }
        }
    }

    /// The tenant's revocations, oldest first, optionally of one status.
    public func list(tenantID: UUID, status: Status? = nil, limit: Int = 1_000) async throws -> [Revocation] {
        let rows = try await client.rows(
            """
            SELECT \(unescaped: Self.columns) FROM apple_revocations
            WHERE tenant_id = \(tenantID) AND (\(status?.rawValue)::text IS NULL OR status = \(status?.rawValue))
            ORDER BY created_at, id LIMIT \(limit)
            """, logger: logger)
        return try rows.map { row in
            var reader = RowReader(row)
            return try Self.decode(&reader)
        }
    }

    /// Puts failed revocations of the tenant (or the one `id`, failed or pending) back in the
    /// queue, due now, with their attempts counted from zero. Returns the ids requeued.
    public func retry(tenantID: UUID, id: UUID?, actor: String) async throws -> [UUID] {
        try await client.transaction(logger: logger) { connection in
            let ids = try await connection.query(
                """
                UPDATE apple_revocations SET status = 'pending', attempts = 0, next_attempt_at = now(), updated_at = now()
                WHERE tenant_id = \(tenantID) AND status <> 'done'
                    AND (\(id)::uuid IS NULL AND status = 'failed' OR id = \(id))
                RETURNING id
                """, logger: logger
            ).collect().map { try $0.decode(UUID.self) }
            if !ids.isEmpty {
                try await AuditLogRepository.append(
                    tenantID: tenantID, actor: actor, action: "apple.revocation_retried", target: id?.lowercasedString,
                    details: ["requeued": .int(ids.count)], on: connection, logger: logger)
            }
            return ids
        }
    }

    /// The revocation `id` of the tenant; nil when it has none.
    public func find(tenantID: UUID, id: UUID) async throws -> Revocation? {
        let rows = try await client.rows(
            "SELECT \(unescaped: Self.columns) FROM apple_revocations WHERE tenant_id = \(tenantID) AND id = \(id)", logger: logger)
        guard let row = rows.first else { return nil }
        var reader = RowReader(row)
        return try Self.decode(&reader)
    }

    static let columns =
        "id, tenant_id, account_id, team_id, client_id, status, attempts, next_attempt_at, last_error, created_at, done_at"

    static func decode(_ reader: inout RowReader) throws -> Revocation {
        Revocation(
            id: try reader.next(UUID.self), tenantID: try reader.next(UUID.self), accountID: try reader.next(UUID.self),
            teamID: try reader.next(String.self), clientID: try reader.next(String.self),
            status: Status(rawValue: try reader.next(String.self)) ?? .pending, attempts: try reader.next(Int.self),
            nextAttemptAt: try reader.next(Date.self), lastError: try reader.next(String?.self), createdAt: try reader.next(Date.self),
            doneAt: try reader.next(Date?.self))
    }
}
