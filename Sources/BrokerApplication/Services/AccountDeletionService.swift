import BrokerCore
import Foundation
import Logging
import Providers
import Storage

/// What deleting an account did.
public struct AccountDeletion: Sendable, Equatable {
    public let revokedSessions: Int
    public let deletedIdentities: Int
    public let appleRevocationsQueued: Int
}

/// Deleting accounts: `DELETE /v1/accounts/{id}` and `broker account delete` (issue 23 §2).
/// Provider-neutral: every identity goes; each Apple identity that held Apple's refresh token
/// queues one revocation, made later by ``AppleRevocationWorker`` (the deletion never waits for
/// Apple).
public struct AccountDeletionService: Sendable {
    package let database: Database
    package let secrets: SecretBox
    package let logger: Logger
    /// Called after a deletion that queued revocations (wakes this instance's worker).
    package let queued: @Sendable () -> Void

    public init(database: Database, secrets: SecretBox, logger: Logger? = nil, queued: @escaping @Sendable () -> Void = {}) {
        self.database = database
        self.secrets = secrets
        self.logger = logger ?? database.logger
        self.queued = queued
    }

    /// The reason a deletion through the API or the CLI records unless given one.
    public static let requestedReason = "requested"

    public func delete(tenantID: UUID, accountID rawID: String, reason: String = requestedReason, actor: String) async throws
        -> AccountDeletion
    {
        guard let id = UUID(uuidString: rawID) else { throw AccountService.notFound(rawID) }
        let (secrets, logger) = (secrets, logger)
        let outcome = try await database.accountDeletions.delete(tenantID: tenantID, accountID: id, reason: reason, actor: actor) {
            stored in
            try Self.revocation(of: stored, tenantID: tenantID, secrets: secrets, logger: logger)
        }
        switch outcome {
        case .accountNotFound:
            throw AccountService.notFound(rawID)
        case .deleted(let sessions, let identities, let revocations):
            logger.notice(
                "account deleted",
                metadata: [
                    "tenant_id": "\(tenantID.lowercasedString)", "account_id": "\(id.lowercasedString)", "revoked_sessions": "\(sessions)",
                    "apple_revocations_queued": "\(revocations)",
                ])
            if revocations > 0 { queued() }
            return AccountDeletion(revokedSessions: sessions, deletedIdentities: identities, appleRevocationsQueued: revocations)
        }
    }

    /// The revocation to queue for a stored token: Apple's only, of a known client, sealed again
    /// under the revocation's id. A token that does not open (sealed under a retired master key)
    /// cannot be revoked by anyone: it is dropped with the identity, and logged.
    static func revocation(of stored: AccountDeletionRepository.StoredProviderToken, tenantID: UUID, secrets: SecretBox, logger: Logger)
        throws -> AppleRevocationRepository.NewRevocation?
    {
        guard stored.provider == ProviderID.apple.rawValue else { return nil }
        guard let clientID = stored.clientID else {
            logger.warning(
                "an Apple refresh token of a deleted account names no client; it cannot be revoked",
                metadata: ["identity_id": "\(stored.identityID.lowercasedString)"])
            return nil
        }
        let token: Data
        do {
            token = try secrets.open(
                stored.sealed,
                context: AppleProvider.refreshTokenSealingContext(
                    tenantID: tenantID, teamID: stored.providerScope, subject: stored.subject),
                what: "Apple refresh token")
        } catch {
            logger.warning(
                "an Apple refresh token of a deleted account does not open; it cannot be revoked",
                metadata: ["identity_id": "\(stored.identityID.lowercasedString)", "error": "\(error)"])
            return nil
        }
        let id = UUID.timeOrdered()
        let sealed = try secrets.seal(token, context: AppleRevocationRepository.sealingContext(tenantID: tenantID, id: id))
        return .init(id: id, teamID: stored.providerScope, clientID: clientID, sealedToken: sealed)
    }
}
