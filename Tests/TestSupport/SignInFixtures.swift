import BrokerCore
import Foundation
import PostgresNIO
import Testing

@testable import Storage

/// What the tests of the sign-in statements and batches share (`StorageTests`): sign-in
/// requests of one Apple identity, people signed in once, the quiet batch run directly, row
/// counts and the rows a plan test loads. Held here, not in a suite, so that no suite creates
/// another to reuse it.
public struct SignInFixtures: Sendable {
    public init() {}

    /// A sign-in of the Apple identity `001234.quiet` of team `TEAM000001` with a new session.
    public func request(tenantID: UUID, email: String?, givenName: String? = nil) -> SignInRequest {
        SignInRequest(
            tenantID: tenantID,
            identity: ProviderIdentity(
                provider: .apple, providerScope: "TEAM000001", subject: "001234.quiet", email: email, emailVerified: true,
                isPrivateEmail: false, name: PersonName(givenName: givenName, familyName: nil)),
            sealedProviderRefreshToken: nil, intent: .auto, clientID: "com.acme.app", platform: nil,
            session: NewSession(
                id: UUID(), refreshTokenHash: Data(RefreshToken.generate(sessionID: UUID()).hash),
                expiresAt: Date().addingTimeInterval(3_600), refreshTokenExpiresAt: Date().addingTimeInterval(1_800)))
    }

    /// A sign-in of the subject `subject` from iOS, with session `sessionID`.
    public func request(tenantID: UUID, subject: String, email: String? = "a@example.com", sessionID: UUID = UUID()) -> SignInRequest {
        var request = request(tenantID: tenantID, email: email)
        request.identity.subject = subject
        request.session.id = sessionID
        request.platform = "ios"
        return request
    }

    /// Signs each subject in once through the full statement (their first sign-in).
    public func enroll(_ subjects: [String], tenantID: UUID, _ database: Database) async throws -> [String: SignInResult] {
        var results: [String: SignInResult] = [:]
        for subject in subjects {
            let result = try #require(try await database.accounts.signIn(request(tenantID: tenantID, subject: subject)))
            results[subject] = result
        }
        return results
    }

    /// The quiet batch statement run once over `requests`, without its batcher.
    public func batch(_ requests: [SignInRequest], _ database: Database) async throws -> [QuietSignInOutcome] {
        try await AccountRepository.quietSignIns(requests, client: database.client, logger: database.logger)
    }

    /// The rows of `table`, all tenants.
    public func count(_ table: String, _ database: Database) async throws -> Int {
        let rows = try await database.client.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int8 FROM \(table)"))
        var total = 0
        for try await value in rows.decode(Int.self) { total = value }
        return total
    }

    /// The row version (`xmin`) of the identity `001234.quiet`: unchanged when nothing wrote it.
    public func identityVersion(_ database: Database) async throws -> String {
        let rows = try await database.client.query("SELECT xmin::text FROM identities WHERE subject = '001234.quiet'")
        var version = ""
        for try await value in rows.decode(String.self) { version = value }
        return version
    }

    /// The one text column of each row `sql` returns.
    public func strings(_ sql: PostgresQuery, _ database: Database) async throws -> [String] {
        var values: [String] = []
        for try await value in try await database.client.query(sql).decode(String.self) { values.append(value) }
        return values
    }

    /// The session a refresh rotated; fails the test otherwise.
    public static func rotated(_ outcome: SessionRepository.RefreshOutcome) throws -> SessionRepository.SessionInfo {
        guard case .rotated(let info) = outcome else { throw RotationFailed(outcome: outcome) }
        return info
    }

    public struct RotationFailed: Error { public let outcome: SessionRepository.RefreshOutcome }

    /// `accounts` accounts with one identity and one session each, plus a spent refresh token
    /// per session, in one tenant, with autovacuum off on those tables: loaded and never analyzed.
    public static func loadUnanalyzed(_ database: Database, tenant: Tenant, accounts: Int) async throws {
        for table in ["accounts", "identities", "sessions", "refresh_tokens"] {
            try await database.client.query(
                PostgresQuery(unsafeSQL: "ALTER TABLE \(table) SET (autovacuum_enabled = false)"), logger: TestDatabase.logger)
        }
        let id = tenant.id
        try await database.client.query(
            """
            WITH made AS (
                INSERT INTO accounts (id, tenant_id, email)
                SELECT gen_random_uuid(), \(id), 'person' || g || '@example.com' FROM generate_series(1, \(accounts)) g
                RETURNING id
            ),
            numbered AS (SELECT id, row_number() OVER () AS n FROM made),
            identity AS (
                INSERT INTO identities (id, tenant_id, account_id, provider, provider_scope, subject)
                SELECT gen_random_uuid(), \(id), m.id, 'apple', 'TEAM000001', 'subject.' || m.n FROM numbered m
                RETURNING id, account_id
            ),
            opened AS (
                INSERT INTO sessions (id, tenant_id, account_id, identity_id, idp, expires_at, refresh_token_hash,
                    refresh_token_expires_at)
                SELECT gen_random_uuid(), \(id), i.account_id, i.id, 'apple', now() + interval '1 day',
                    sha256(i.id::text::bytea), now() + interval '1 day'
                FROM identity i
                RETURNING id
            )
            INSERT INTO refresh_tokens (id, tenant_id, session_id, token_hash, expires_at, used_at)
            SELECT gen_random_uuid(), \(id), o.id, sha256(('spent' || o.id::text)::bytea), now() + interval '1 day', now()
            FROM opened o
            """, logger: TestDatabase.logger)
    }
}
