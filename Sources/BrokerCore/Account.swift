import Foundation
import Synchronization

public enum AccountStatus: String, Sendable, Codable {
    case active, disabled, deleted
}

/// A person's name as the provider gave it (Apple: first authorization only).
public struct PersonName: Sendable, Equatable, Codable {
    public var givenName: String?
    public var familyName: String?

    public init(givenName: String?, familyName: String?) {
        self.givenName = givenName
        self.familyName = familyName
    }

    public var isEmpty: Bool { (givenName ?? "").isEmpty && (familyName ?? "").isEmpty }
}

/// The primary account: one per person per tenant.
public struct Account: Sendable, Equatable {
    public var id: UUID
    public var tenantID: UUID
    public var name: PersonName
    public var email: String?
    public var emailVerified: Bool
    public var isPrivateEmail: Bool
    public var status: AccountStatus
    public var createdAt: Date
    public var lastSeenAt: Date?
    /// The id the product's former system gave the person (an import's `external_id`, issue 24).
    public var externalID: String?

    public init(
        id: UUID, tenantID: UUID, name: PersonName, email: String?, emailVerified: Bool, isPrivateEmail: Bool,
        status: AccountStatus, createdAt: Date, lastSeenAt: Date?, externalID: String? = nil
    ) {
        self.id = id
        self.tenantID = tenantID
        self.name = name
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.status = status
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
        self.externalID = externalID
    }
}

/// A provider identity linked to an account: (tenant, provider, scope, subject) is unique.
/// The scope says where the subject is unique: Apple's team id, Facebook's app id, empty for
/// Google (whose `sub` is global).
public struct Identity: Sendable, Equatable {
    public var id: UUID
    public var accountID: UUID
    public var provider: String
    /// Apple: the team id (`sub` is team-scoped).
    public var providerScope: String
    public var subject: String
    public var email: String?
    public var emailVerified: Bool
    public var isPrivateEmail: Bool
    public var relayEmailDeliverable: Bool
    public var name: PersonName
    public var realUserStatus: Int?
    public var hasProviderRefreshToken: Bool
    public var createdAt: Date
    public var lastSignInAt: Date?
    /// What else the provider says about the identity, e.g. Google's `hd` (hosted domain).
    public var attributes: [String: String]

    public init(
        id: UUID, accountID: UUID, provider: String, providerScope: String, subject: String, email: String?,
        emailVerified: Bool, isPrivateEmail: Bool, relayEmailDeliverable: Bool, name: PersonName, realUserStatus: Int?,
        hasProviderRefreshToken: Bool, createdAt: Date, lastSignInAt: Date?, attributes: [String: String] = [:]
    ) {
        self.attributes = attributes
        self.id = id
        self.accountID = accountID
        self.provider = provider
        self.providerScope = providerScope
        self.subject = subject
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.relayEmailDeliverable = relayEmailDeliverable
        self.name = name
        self.realUserStatus = realUserStatus
        self.hasProviderRefreshToken = hasProviderRefreshToken
        self.createdAt = createdAt
        self.lastSignInAt = lastSignInAt
    }
}

/// What the caller wants from a sign-in.
public enum SignInIntent: String, Sendable, Codable {
    /// Sign in, creating the account when the identity is new.
    case auto
    /// Only existing identities: an unknown one is `account_not_found` and creates nothing.
    case signIn = "sign_in"
    /// Create; an identity that exists already is returned with `is_new_account: false`.
    case signUp = "sign_up"
}

/// A verified provider identity to find or create, with the session to open for it.
public struct SignInRequest: Sendable {
    public var tenantID: UUID
    /// Who signed in, as the provider says it.
    public var identity: ProviderIdentity
    public var sealedProviderRefreshToken: Data?
    public var intent: SignInIntent
    public var clientID: String
    public var platform: String?
    public var session: NewSession
    /// A new identity joins the one active account with its verified email (the tenant's
    /// `auto_link_verified_email`, and an identity ``ProviderIdentity/mayAutoLinkByEmail``).
    public var autoLinkByEmail: Bool
    /// Open sessions the account may have with this one: the oldest past it are revoked
    /// (the tenant's ``SessionSettings/maxSessionsPerAccount``).
    public var maxOpenSessions: Int
    /// A relying party's authorization code, kept by the statement that opens the session, in
    /// its commit (decision 0100); nil for every other sign-in.
    public var keptCode: KeptCode?

    public init(
        tenantID: UUID, identity: ProviderIdentity, sealedProviderRefreshToken: Data?, intent: SignInIntent, clientID: String,
        platform: String?, session: NewSession, autoLinkByEmail: Bool = false,
        maxOpenSessions: Int = SessionSettings.default.maxSessionsPerAccount
    ) {
        self.autoLinkByEmail = autoLinkByEmail
        self.maxOpenSessions = max(1, maxOpenSessions)
        self.tenantID = tenantID
        self.identity = identity
        self.sealedProviderRefreshToken = sealedProviderRefreshToken
        self.intent = intent
        self.clientID = clientID
        self.platform = platform
        self.session = session
    }

    public var provider: String { identity.provider.rawValue }
    public var providerScope: String { identity.providerScope }
    public var subject: String { identity.subject }
    public var email: String? { identity.email }
    public var emailVerified: Bool { identity.emailVerified }
    public var isPrivateEmail: Bool { identity.isPrivateEmail }
    public var name: PersonName { identity.name }
    public var realUserStatus: Int? { identity.realUserStatus }
    /// The provider's extra attributes; merged into the stored ones (a posted value replaces
    /// the stored value of its name).
    public var attributes: [String: String] { identity.attributes }
}

/// A relying party's authorization code that a web callback's sign-in keeps in its own commit
/// (decision 0100): the web sign-in's state is answered and the code kept under its hash, naming
/// the session the sign-in opens, only when that session opens and the state is unexpired and
/// unanswered.
public struct KeptCode: Sendable, Equatable {
    /// The SHA-256 of the web sign-in's state.
    public var stateHash: Data
    /// The SHA-256 of the code.
    public var codeHash: Data
    /// What the token endpoint answers the code with, sealed for the tenant.
    public var grantSealed: Data
    public var expiresAt: Date
    /// The callback's clock: the state must not have expired by it.
    public var now: Date

    public init(stateHash: Data, codeHash: Data, grantSealed: Data, expiresAt: Date, now: Date) {
        self.stateHash = stateHash
        self.codeHash = codeHash
        self.grantSealed = grantSealed
        self.expiresAt = expiresAt
        self.now = now
    }
}

/// How far a provider's `email_verified` is trusted for joining accounts by email
/// (`--email-trust`).
public enum EmailTrust: String, Sendable, CaseIterable, Codable {
    /// Its emails never join accounts (Facebook; an OpenID Connect issuer by default).
    case never
    /// An email it marks verified may join accounts (Apple, except relay addresses; Google).
    case verified
}

/// A provider identity as the broker records it, whatever the provider.
public struct ProviderIdentity: Sendable, Equatable {
    public var provider: ProviderID
    /// Where `subject` is unique: Apple's team id, Facebook's app id, empty for Google.
    public var providerScope: String
    public var subject: String
    public var email: String?
    /// Whether the provider vouches for the email.
    public var emailVerified: Bool
    /// A relay address that hides the person's own (Apple's "Hide My Email").
    public var isPrivateEmail: Bool
    public var name: PersonName
    /// Apple's `real_user_status` (0 unsupported, 1 unknown, 2 likely real).
    public var realUserStatus: Int?
    /// Provider-specific facts kept with the identity, e.g. Google's `hd`.
    public var attributes: [String: String]
    /// How far the provider's `email_verified` is trusted (its type's, or the operator's for an
    /// OpenID Connect provider). Never, unless the provider says otherwise: a new provider does
    /// not inherit auto-linking by email.
    public var emailTrust: EmailTrust

    public init(
        provider: ProviderID, providerScope: String, subject: String, email: String?, emailVerified: Bool,
        isPrivateEmail: Bool, name: PersonName, realUserStatus: Int? = nil, attributes: [String: String] = [:],
        emailTrust: EmailTrust = .never
    ) {
        self.emailTrust = emailTrust
        self.provider = provider
        self.providerScope = providerScope
        self.subject = subject
        // An empty email is no email: it never blanks a stored one.
        self.email = email.flatMap { $0.isEmpty ? nil : $0 }
        self.emailVerified = emailVerified
        // A relay address is private whoever brings it (Apple without `is_private_email`, or a
        // Google account made with Hide My Email): it never joins accounts by email.
        self.isPrivateEmail = isPrivateEmail || Self.isAppleRelay(self.email)
        // Names as people typed them at the provider: trimmed, at most 200 characters, none when blank.
        self.name = PersonName(givenName: Self.clean(name.givenName), familyName: Self.clean(name.familyName))
        self.realUserStatus = realUserStatus
        self.attributes = attributes
    }

    /// Whether this identity's email may join it to an existing account (decision 0025):
    /// verified by a provider whose `email_verified` is trusted (not Facebook's: Graph does not
    /// say that an email is verified; decision 0024), and not an Apple private-relay address.
    public var mayAutoLinkByEmail: Bool {
        guard let email, emailVerified, emailTrust == .verified, !isPrivateEmail else { return false }
        return !Self.isAppleRelay(email)
    }

    /// The domains of Apple's private-relay addresses ("Hide My Email"): the first one, and
    /// `private.icloud.com`, on which Apple issues new Sign in with Apple and Hide My Email
    /// addresses since 2026. An operator adds a domain Apple announces later with
    /// `BROKER_APPLE_RELAY_DOMAINS` (``addAppleRelayDomains(_:)``), without a release.
    public static let builtInAppleRelayDomains = ["privaterelay.appleid.com", "private.icloud.com"]
    /// `@domain` in lowercase bytes, for every domain in force.
    private static let appleRelaySuffixes = Mutex<[[UInt8]]>(builtInAppleRelayDomains.map { Array(("@" + $0).utf8) })

    /// The relay domains in force: the built-in ones and those added.
    public static var appleRelayDomains: [String] {
        appleRelaySuffixes.withLock { $0.map { String(decoding: $0.dropFirst(), as: UTF8.self) } }
    }

    /// Adds relay domains for this process (lowercased; those already known are skipped). The
    /// process reads `BROKER_APPLE_RELAY_DOMAINS` once at start and calls this; every place the
    /// relay rule applies (sign-in with any provider, web sign-in, imports, linking) asks
    /// ``isAppleRelay(_:)``.
    public static func addAppleRelayDomains(_ domains: [String]) {
        appleRelaySuffixes.withLock { suffixes in
            for domain in domains {
                let suffix = Array(("@" + domain.lowercased()).utf8)
                if !suffixes.contains(suffix) { suffixes.append(suffix) }
            }
        }
    }

    /// Whether `email` is an Apple private-relay address, on any relay domain in force (the
    /// domain's case ignored). Compares the last bytes in place: an import checks every email of
    /// a file, and lowercasing a copy of each was a tenth of its CPU.
    public static func isAppleRelay(_ email: String?) -> Bool {
        guard let email else { return false }
        let bytes = email.utf8
        return appleRelaySuffixes.withLock { suffixes in
            suffixes.contains { suffix in
                bytes.count >= suffix.count
                    && zip(bytes.suffix(suffix.count), suffix).allSatisfy { byte, expected in
                        byte == expected || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") && byte | 0x20 == expected)
                    }
            }
        }
    }

    /// Control characters, line breaks and bidirectional overrides are dropped rather than
    /// refused (``FreeText/sanitized(_:)``): the name comes from the person's device or provider.
    public static func clean(_ value: String?) -> String? {
        guard let trimmed = value.map(FreeText.sanitized)?.trimmingCharacters(in: .whitespacesAndNewlines), !trimmed.isEmpty
        else { return nil }
        let bounded = FreeText.prefix(trimmed, characters: 200)
        return bounded.isEmpty ? nil : bounded
    }
}

/// The session (refresh-token family) a sign-in opens, with its first refresh token.
public struct NewSession: Sendable {
    public var id: UUID
    public var refreshTokenHash: Data
    /// Absolute end of the family.
    public var expiresAt: Date
    /// Idle expiry of the first refresh token.
    public var refreshTokenExpiresAt: Date
    /// The relying party the session is for, and the scope it was granted (decision 0082); nil
    /// for a session of the REST API.
    public var oauthClientID: String?
    public var oauthScope: String?

    public init(id: UUID, refreshTokenHash: Data, expiresAt: Date, refreshTokenExpiresAt: Date) {
        self.id = id
        self.refreshTokenHash = refreshTokenHash
        self.expiresAt = expiresAt
        self.refreshTokenExpiresAt = refreshTokenExpiresAt
    }

    /// The session's first refresh token, once its id is final (the token names the session:
    /// decision 0027), random unless `make` derives it; records the token's hash.
    public mutating func issueRefreshToken(_ make: (UUID) -> RefreshToken = RefreshToken.generate(sessionID:)) -> RefreshToken {
        let token = make(id)
        refreshTokenHash = token.hash
        return token
    }

    /// The session an identity token opens takes its id from the token's replay key (decision
    /// 0018): the sessions' primary key then refuses a second session from the same token. The
    /// id is time-ordered by the token's `iat` (decision 0023), so new sessions land at the
    /// right edge of the primary key instead of on a random page of an index that outgrows
    /// memory; the same token always gives the same `iat`, so the same id. Without `issuedAt`
    /// (a key that does not cover the issue time, such as a `jti`) the id is the key's first
    /// 128 bits.
    public mutating func identify(byReplayKey key: Data, issuedAt: Date?) {
        if let issuedAt {
            id = .timeOrdered(at: issuedAt, filling: key)
        } else {
            let bytes = Array(key.prefix(16)) + Array(repeating: 0, count: max(0, 16 - key.count))
            id = UUID(
                uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                    bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                ))
        }
    }
}

/// What a sign-in produced.
public struct SignInResult: Sendable {
    public var account: Account
    public var identity: Identity
    public var isNewAccount: Bool
    public var sessionID: UUID
    /// How a new identity joined an existing account, when it did.
    public var linkedBy: LinkedBy?
    /// A new account was created while another account of the tenant has the same email: the
    /// product may offer to link them.
    public var possibleDuplicate: Bool
    /// For a request with a ``SignInRequest/keptCode``: whether the statement that opened the
    /// session kept it (false: the state was answered or expired meanwhile, and no code was
    /// kept); nil when that statement keeps no codes, and the caller keeps it on its own.
    public var codeKept: Bool?

    public init(
        account: Account, identity: Identity, isNewAccount: Bool, sessionID: UUID, linkedBy: LinkedBy? = nil,
        possibleDuplicate: Bool = false, codeKept: Bool? = nil
    ) {
        self.codeKept = codeKept
        self.account = account
        self.identity = identity
        self.isNewAccount = isNewAccount
        self.sessionID = sessionID
        self.linkedBy = linkedBy
        self.possibleDuplicate = possibleDuplicate
    }
}

/// How an identity came to be linked to an existing account by a sign-in.
public enum LinkedBy: String, Sendable {
    /// Its provider-verified email matched the account's (tenant opt-in).
    case verifiedEmail = "verified_email"
}
