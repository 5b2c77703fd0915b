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
    /// The relying party that asked for the sign-in at the tenant's authorization endpoint
    /// (decision 0082), and what it asked for; nil for a web sign-in of the REST API. The
    /// return URL is then the client's redirect URI, and the caller's state the client's.
    public var relyingParty: RelyingParty?

    public struct RelyingParty: Sendable, Equatable {
        public var clientID: String
        public var request: KeptClientRequest

        public init(clientID: String, request: KeptClientRequest) {
            self.clientID = clientID
            self.request = request
        }
    }

    public init(
        stateHash: Data, tenantID: UUID, provider: String, clientID: String, redirectURI: String, returnURL: String,
        intent: SignInIntent, callerState: String?, expiresAt: Date, providerScope: String? = nil, relyingParty: RelyingParty? = nil
    ) {
        self.providerScope = providerScope
        self.relyingParty = relyingParty
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

/// What became of a state its callback could not claim (decision 0069).
public struct WebSignInRepeat: Sendable, Equatable {
    public enum Answer: Sendable, Equatable {
        /// Another callback claimed it and has not answered yet.
        case inFlight
        /// Its claim lapsed unanswered (the callback's process stopped): it can be claimed again.
        case unclaimed
        /// Answered with the broker code derived from the state; `unexchanged` while that code
        /// still waits for its exchange.
        case code(unexchanged: Bool)
        /// Answered with this error.
        case error(String)
    }

    public let provider: String
    public let returnURL: String
    public let callerState: String?
    public let answer: Answer
    /// What the relying party asked for, when one did (decision 0082).
    public var relyingParty: KeptClientRequest? = nil
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

/// The states of web sign-ins and the broker codes that end them (decision 0038). A callback
/// claims its state (decision 0069), and answers it in the statement that keeps the sign-in
/// under its code (one commit) or by recording its error; a state is answered once, and a code
/// is taken once, by `DELETE ... RETURNING`: two exchanges of one code never both succeed.
public struct WebSignInRepository: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// Sealed states' claims written in batches (decision 0102); nil when batching is off.
    var sealedClaims: SealedClaims? = nil

    /// Writes a state as a broker before decision 0099 did when a sign-in started (tests of the
    /// callbacks of sign-ins started before an upgrade): no request writes one ahead of its
    /// callback any more.
    public func createState(_ state: WebSignInState) async throws {
        _ = try await client.rows(
            """
            INSERT INTO web_sign_in_states
                (state_hash, tenant_id, provider, client_id, redirect_uri, return_url, intent, caller_state, expires_at, provider_scope,
                oauth_client_id, oauth_request)
            VALUES (\(state.stateHash), \(state.tenantID), \(state.provider), \(state.clientID), \(state.redirectURI),
                \(state.returnURL), \(state.intent.rawValue), \(state.callerState), \(state.expiresAt), \(state.providerScope),
                \(state.relyingParty?.clientID), \(state.relyingParty?.request.json))
            """, logger: logger)
    }

    /// Claims the state with this hash for one callback until `claimUntil` and returns it, with,
    /// read in the same statement when `subject` is given and the state knows its provider
    /// scope, the status of the account of that subject's identity. Nil when the state is
    /// unknown, expired, answered, or claimed by another callback still in flight (decision
    /// 0069): ``repeatOf(hash:tenantID:now:codeHash:)`` tells which. The subject may come from a token
    /// not yet verified: the status is for the caller to use once the token verified and names
    /// this subject.
    ///
    /// `tenantID`: the tenant the state's text names (``WebSignInStateToken``), in whose scope the
    /// state is read; nil for a state of the older form, read across tenants.
    public func claimState(hash: Data, tenantID: UUID?, now: Date, claimUntil: Date, subject: String?) async throws
        -> (state: WebSignInState, account: SubjectAccountStatus?)?
    {
        try await Self.inScope(of: tenantID) {
            try await client.rows(ClaimStateStatement(hash: hash, now: now, claimUntil: claimUntil, subject: subject), logger: logger).first
        }
    }

    /// Claims a sealed state (decision 0099) as ``claimState(hash:tenantID:now:claimUntil:subject:)``
    /// claims a stored one: its first claim writes the sign-in the state carries, claimed until
    /// `claimUntil`; a later one finds that row and claims it only when nobody answered it and its
    /// claim lapsed. Nil as there; ``repeatOf(hash:tenantID:now:codeHash:)`` then tells which.
    /// The caller has opened the state and checked that it has not expired.
    /// The claims of callbacks that arrive together go in one statement (decision 0102).
    public func claimSealedState(_ state: WebSignInState, now: Date, claimUntil: Date, subject: String?) async throws
        -> (state: WebSignInState, account: SubjectAccountStatus?)?
    {
        let element = SealedClaim(state: state, now: now, claimUntil: claimUntil, subject: subject)
        if let sealedClaims { return try await sealedClaims.run(element).get() }
        return try await TenantScope.tenant(state.tenantID) { try await Self.claimSealed([element], client: client, logger: logger)[0] }
    }

    /// Runs `body` in the scope of the state's tenant (decision 0092) or, for a state of the
    /// older form that names none, across tenants: the state is the only key such a callback
    /// has, and it says which tenant the sign-in is for.
    private static func inScope<T>(of tenantID: UUID?, _ body: () async throws -> T) async throws -> T {
        if let tenantID { return try await TenantScope.tenant(tenantID, body) }
        return try await TenantScope.acrossTenants(because: "a callback's state of the older form names its tenant once read", body)
    }

    /// What became of a state a callback could not claim (decision 0069); nil when it is unknown
    /// or expired. `codeHash`: the hash of the broker code derived from the state, to tell
    /// whether it still waits for its exchange.
    public func repeatOf(hash: Data, tenantID: UUID?, now: Date, codeHash: Data) async throws -> WebSignInRepeat? {
        try await Self.inScope(of: tenantID) {
            // Through `rows`, like every statement: in the state's tenant scope, on an open
            // connection (decisions 0055, 0056).
            let rows = try await client.rows(
                """
                SELECT s.provider, s.return_url, s.caller_state, s.code_issued, s.error, COALESCE(s.claimed_until > \(now), false),
                    s.oauth_request,
                    EXISTS (SELECT 1 FROM web_sign_in_codes c
                        WHERE c.code_hash = \(codeHash) AND c.tenant_id = s.tenant_id AND c.expires_at > \(now)
                            AND c.redeemed_at IS NULL)
                FROM web_sign_in_states s WHERE s.state_hash = \(hash) AND s.expires_at > \(now)
                """, logger: logger)
            for row in rows {
                let (provider, returnURL, callerState, codeIssued, error, inFlight, oauthRequest, codeOpen) = try row.decode(
                    (String, String, String?, Bool, String?, Bool, String?, Bool).self)
                let answer: WebSignInRepeat.Answer =
                    if codeIssued { .code(unexchanged: codeOpen) } else if let error { .error(error) } else {
                        inFlight ? .inFlight : .unclaimed
                    }
                return WebSignInRepeat(
                    provider: provider, returnURL: returnURL, callerState: callerState, answer: answer,
                    relyingParty: oauthRequest.flatMap(KeptClientRequest.init(json:)))
            }
            return nil
        }
    }

    /// Records the error a callback sent the person back with, and ends its claim: a repeat is
    /// sent back with the same error (decision 0069). A state already answered is left alone.
    public func answerState(hash: Data, tenantID: UUID, error: String) async throws {
        try await TenantScope.tenant(tenantID) {
            _ = try await client.rows(
                """
                UPDATE web_sign_in_states SET error = \(error), claimed_until = NULL
                WHERE state_hash = \(hash) AND NOT code_issued AND error IS NULL
                """, logger: logger)
        }
    }

    /// Answers the state with a code and keeps the verified sign-in under the hash of that broker
    /// code, in one statement and one commit; false when the state was answered (or expired)
    /// meanwhile, and then nothing is kept. The code belongs to the state's tenant and provider.
    public func takeState(
        hash: Data, tenantID: UUID, keepingGrant sealed: Data, codeHash: Data, codeExpiresAt: Date, sessionID: UUID? = nil, now: Date
    ) async throws -> Bool {
        try await TenantScope.tenant(tenantID) {
            let statement = TakeStateStatement(
                hash: hash, codeHash: codeHash, sealed: sealed, codeExpiresAt: codeExpiresAt, now: now, sessionID: sessionID)
            return try await !client.rows(statement, logger: logger).isEmpty
        }
    }

    /// Takes the sign-in kept under this code hash for this tenant and provider, unexpired at
    /// `now`. A code of another tenant or provider, or a relying party's authorization code, is
    /// left alone (nil): only its own caller spends it. An expired one is removed (nil).
    public func takeGrant(codeHash: Data, tenantID: UUID, provider: String, now: Date) async throws -> Data? {
        let rows = try await client.rows(
            """
            DELETE FROM web_sign_in_codes
            WHERE code_hash = \(codeHash) AND tenant_id = \(tenantID) AND provider = \(provider) AND oauth_client_id IS NULL
            RETURNING grant_sealed, expires_at
            """, logger: logger)
        guard let row = rows.first else { return nil }
        var reader = RowReader(row)
        let sealed: Data = try reader.next()
        let expiresAt: Date = try reader.next()
        return expiresAt > now ? sealed : nil
    }

    /// How long a state's row stays past its expiry (decision 0099): longer than any two
    /// instances' clocks disagree.
    public static let expiredStateKept: TimeInterval = 300

    /// Removes codes that expired before `now`, and states that expired ``expiredStateKept``
    /// before it; returns how many.
    @discardableResult
    public func deleteExpired(before now: Date) async throws -> Int {
        try await TenantScope.acrossTenants(because: "expired states and codes of every tenant are swept together") {
            // A state stays a while past its expiry: a sealed one (decision 0099) is refused by
            // the clock of the instance its callback reaches, and while its row is there a replay
            // is refused by the row too, whichever instance's clock is behind.
            let states = try await client.rows(
                "DELETE FROM web_sign_in_states WHERE expires_at < \(now.addingTimeInterval(-Self.expiredStateKept)) RETURNING 1",
                logger: logger)
            // A redeemed authorization code stays an hour past its expiry: a second use within it
            // still ends the session the first opened (decision 0082). The session of a code
            // that expired unredeemed ends with it: nobody holds its tokens (decision 0085).
            let codes = try await client.rows(
                """
                WITH gone AS (
                    DELETE FROM web_sign_in_codes
                    WHERE expires_at < \(now) AND (redeemed_at IS NULL OR expires_at < \(now.addingTimeInterval(-Self.redeemedCodeKept)))
                    RETURNING tenant_id, session_id, redeemed_at IS NULL AS unredeemed
                ), ended AS (
                    UPDATE sessions s SET revoked_at = now(), revoke_reason = 'authorization_code_not_redeemed'
                    FROM gone g
                    WHERE g.unredeemed AND s.id = g.session_id AND s.tenant_id = g.tenant_id AND s.revoked_at IS NULL
                    RETURNING 1
                )
                SELECT 1 FROM gone
                """, logger: logger)
            return states.count + codes.count
        }
    }
}
