import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// A web sign-in between its start and the provider's callback (`web_sign_in_states`): found by
/// the SHA-256 of its state, single use.
public struct WebSignInState: Sendable, Equatable {
    public var stateHash: Data
    public var tenantID: UUID
    public var provider: String
    public var clientID: String
    public var redirectURI: String
    public var returnURL: String
    public var intent: SignInIntent
    /// The caller's own opaque `state`, handed back on the return URL.
    public var callerState: String?
    public var expiresAt: Date
    /// The provider scope of the identity the sign-in will verify, when it is known at the
    /// start (Apple: the Services ID's team).
    public var providerScope: String?

    public init(
        stateHash: Data, tenantID: UUID, provider: String, clientID: String, redirectURI: String, returnURL: String,
        intent: SignInIntent, callerState: String?, expiresAt: Date, providerScope: String? = nil
    ) {
        self.providerScope = providerScope
        self.stateHash = stateHash
        self.tenantID = tenantID
        self.provider = provider
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.returnURL = returnURL
        self.intent = intent
        self.callerState = callerState
        self.expiresAt = expiresAt
    }
}

/// The status of the account of the identity `(state's provider, state's provider scope,
/// subject)` at the moment a state was read; `status` nil: no such identity.
public struct SubjectAccountStatus: Sendable, Equatable {
    public let subject: String
    public let status: AccountStatus?

    public init(subject: String, status: AccountStatus?) {
        self.subject = subject
        self.status = status
    }
}

/// The states of web sign-ins and the broker codes that end them (decision 0038). Each is
/// taken once, by `DELETE ... RETURNING`: two callbacks with one state, or two exchanges of one
/// code, never both succeed. A callback reads its state first and takes it in the statement
/// that keeps the sign-in under its code (one commit).
public struct WebSignInRepository: Sendable {
    let client: PostgresClient
    let logger: Logger

    public func createState(_ state: WebSignInState) async throws {
        _ = try await client.rows(
            """
            INSERT INTO web_sign_in_states
                (state_hash, tenant_id, provider, client_id, redirect_uri, return_url, intent, caller_state, expires_at, provider_scope)
            VALUES (\(state.stateHash), \(state.tenantID), \(state.provider), \(state.clientID), \(state.redirectURI),
                \(state.returnURL), \(state.intent.rawValue), \(state.callerState), \(state.expiresAt), \(state.providerScope))
            """, logger: logger)
    }

    /// The state with this hash, unexpired at `now`; nil when it is unknown, taken or expired.
    public func findState(hash: Data, now: Date) async throws -> WebSignInState? {
        try await findState(hash: hash, now: now, subject: nil)?.state
    }

    /// The state with this hash, unexpired at `now` (nil when it is unknown, taken or expired),
    /// and, read in the same statement when `subject` is given and the state knows its provider
    /// scope, the status of the account of that subject's identity. The subject may come from a
    /// token not yet verified: the status is for the caller to use once the token verified and
    /// names this subject.
    public func findState(hash: Data, now: Date, subject: String?) async throws -> (state: WebSignInState, account: SubjectAccountStatus?)? {
        try await TenantScope.acrossTenants(because: "a callback's state names its tenant before the tenant is known") {
            // The state is the only key the callback has: it says which tenant the sign-in is for.
            try await client.rows(FindStateStatement(hash: hash, now: now, subject: subject), logger: logger).first
        }
    }

    /// Removes the state (a callback that ended in an error spends it).
    public func deleteState(hash: Data) async throws {
        try await TenantScope.acrossTenants(because: "a callback's state names its tenant before the tenant is known") {
            _ = try await client.rows("DELETE FROM web_sign_in_states WHERE state_hash = \(hash)", logger: logger)
        }
    }

    /// Takes the state and keeps the verified sign-in under the hash of its broker code, in one
    /// statement and one commit; false when the state was taken (or expired) meanwhile, and then
    /// nothing is kept. The code belongs to the state's tenant and provider.
    public func takeState(hash: Data, keepingGrant sealed: Data, codeHash: Data, codeExpiresAt: Date, now: Date) async throws -> Bool {
        try await TenantScope.acrossTenants(because: "a callback's state names its tenant before the tenant is known") {
            let statement = TakeStateStatement(hash: hash, codeHash: codeHash, sealed: sealed, codeExpiresAt: codeExpiresAt, now: now)
            return try await !client.rows(statement, logger: logger).isEmpty
        }
    }

    /// Takes the sign-in kept under this code hash for this tenant and provider, unexpired at
    /// `now`. A code of another tenant or provider is left alone (nil): only its own caller
    /// spends it. An expired one is removed (nil).
    public func takeGrant(codeHash: Data, tenantID: UUID, provider: String, now: Date) async throws -> Data? {
        let rows = try await client.rows(
            """
            DELETE FROM web_sign_in_codes
            WHERE code_hash = \(codeHash) AND tenant_id = \(tenantID) AND provider = \(provider)
            RETURNING grant_sealed, expires_at
            """, logger: logger)
        guard let row = rows.first else { return nil }
        var reader = RowReader(row)
        let sealed: Data = try reader.next()
        let expiresAt: Date = try reader.next()
        return expiresAt > now ? sealed : nil
    }

    /// Removes states and codes that expired before `now`; returns how many.
    @discardableResult
    public func deleteExpired(before now: Date) async throws -> Int {
        try await TenantScope.acrossTenants(because: "expired states and codes of every tenant are swept together") {
            let states = try await client.rows(
                "DELETE FROM web_sign_in_states WHERE expires_at < \(now) RETURNING 1", logger: logger)
            let codes = try await client.rows(
                "DELETE FROM web_sign_in_codes WHERE expires_at < \(now) RETURNING 1", logger: logger)
            return states.count + codes.count
        }
    }
}
