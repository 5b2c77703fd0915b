import BrokerCore
import Foundation

/// One record of an import as the database takes it (issue 24): the account under its external
/// id, with its identities resolved to the tenant's provider ids and scopes, and any provider
/// refresh token sealed.
public struct ImportRow: Sendable, Equatable {
    public var externalID: String
    public var email: String?
    public var emailVerified: Bool
    public var isPrivateEmail: Bool
    public var name: PersonName
    public var status: AccountStatus
    public var createdAt: Date?
    public var identities: [ImportRowIdentity]

    public init(
        externalID: String, email: String?, emailVerified: Bool, isPrivateEmail: Bool, name: PersonName, status: AccountStatus,
        createdAt: Date?, identities: [ImportRowIdentity]
    ) {
        self.externalID = externalID
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.name = name
        self.status = status
        self.createdAt = createdAt
        self.identities = identities
    }
}

/// An identity of an ``ImportRow``: `(provider, providerScope, subject)` is its key in the tenant.
public struct ImportRowIdentity: Sendable, Equatable {
    public var provider: String
    public var providerScope: String
    public var subject: String
    public var email: String?
    public var emailVerified: Bool
    public var isPrivateEmail: Bool
    /// The provider's refresh token, sealed (``SecretBox``), with the client that obtained it.
    public var sealedRefreshToken: Data?
    public var refreshTokenClientID: String?

    public init(
        provider: String, providerScope: String, subject: String, email: String?, emailVerified: Bool, isPrivateEmail: Bool,
        sealedRefreshToken: Data? = nil, refreshTokenClientID: String? = nil
    ) {
        self.provider = provider
        self.providerScope = providerScope
        self.subject = subject
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.sealedRefreshToken = sealedRefreshToken
        self.refreshTokenClientID = refreshTokenClientID
    }

    var key: ImportIdentityKey { ImportIdentityKey(provider: provider, providerScope: providerScope, subject: subject) }
}

/// An identity's unique key, compared byte for byte as its unique index compares it
/// (``ExactText``).
struct ImportIdentityKey: Hashable, Sendable {
    let provider: ExactText
    let providerScope: ExactText
    let subject: ExactText

    init(provider: String, providerScope: String, subject: String) {
        self.provider = ExactText(provider)
        self.providerScope = ExactText(providerScope)
        self.subject = ExactText(subject)
    }
}

/// What an import did with a record.
public enum ImportOutcome: Sendable, Equatable {
    /// A new account with all the record's identities.
    case created(accountID: UUID)
    /// The account of the external id gained the identities it lacked.
    case updated(accountID: UUID, addedIdentities: Int)
    /// The account exists with every identity of the record: nothing written.
    case unchanged(accountID: UUID)
    /// Nothing written: an identity belongs to another account, or the external id names a
    /// deleted account.
    case conflict(accountID: UUID?, reason: String)

    public var accountID: UUID? {
        switch self {
        case .created(let id), .updated(let id, _), .unchanged(let id): id
        case .conflict(let id, _): id
        }
    }
}

/// Counts of a job, added to batch by batch.
public struct ImportCounts: Sendable, Equatable {
    public var records = 0
    public var created = 0
    public var updated = 0
    public var unchanged = 0
    public var conflicts = 0
    public var skipped = 0
    public var errors = 0
    /// Identities written (created accounts' and added ones).
    public var identities = 0

    public init() {}

    public mutating func add(_ outcome: ImportOutcome) {
        records += 1
        switch outcome {
        case .created: created += 1
        case .updated: updated += 1
        case .unchanged: unchanged += 1
        case .conflict: conflicts += 1
        }
    }

    public static func + (lhs: ImportCounts, rhs: ImportCounts) -> ImportCounts {
        var sum = lhs
        sum.records += rhs.records
        sum.created += rhs.created
        sum.updated += rhs.updated
        sum.unchanged += rhs.unchanged
        sum.conflicts += rhs.conflicts
        sum.skipped += rhs.skipped
        sum.errors += rhs.errors
        sum.identities += rhs.identities
        return sum
    }
}
