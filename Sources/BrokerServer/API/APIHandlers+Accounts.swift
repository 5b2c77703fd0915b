import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import Storage

/// Accounts and their identities.
extension APIHandlers {
    static func accountNotFound(_ id: String) -> BrokerError {
        BrokerError(
            code: "account_not_found", kind: .notFound, title: "Account not found",
            detail: "This tenant has no account '\(id.prefix(60))'.")
    }

    func getAccount(_ input: Operations.GetAccount.Input) async throws -> Operations.GetAccount.Output {
        .ok(.init(body: .json(try await accountDetails(id: input.path.id, as: currentCaller))))
    }

    /// The account and its identities (served by ``AccountRoute``, which writes `name: null`).
    func accountDetails(id rawID: String, as http: HTTPCaller) async throws -> Components.Schemas.AccountDetails {
        let caller = try await authenticator.authenticate(http, requiring: .accounts)
        guard let id = UUID(uuidString: rawID),
            let (account, identities) = try await services.database.accounts.find(tenantID: caller.tenant.id, accountID: id)
        else { throw Self.accountNotFound(rawID) }
        return .init(account: .init(account), identities: identities.map { .init($0) })
    }

    func findAccounts(_ input: Operations.FindAccounts.Input) async throws -> Operations.FindAccounts.Output {
        .ok(.init(body: .json(.init(accounts: try await accountsByExternalID(input.query.externalId, as: currentCaller)))))
    }

    /// `GET /v1/accounts?external_id=X` (issue 24): the account imported under that id, as a
    /// list of zero or one (served by ``AccountRoute``).
    func accountsByExternalID(_ externalID: String?, as http: HTTPCaller) async throws -> [Components.Schemas.AccountDetails] {
        let caller = try await authenticator.authenticate(http, requiring: .accounts)
        guard let externalID, !externalID.isEmpty, externalID.utf8.count <= 255 else {
            throw BrokerError(
                code: "invalid_request", kind: .invalidInput, title: "Invalid request",
                detail: "Give the account's external id: GET /v1/accounts?external_id=X (1 to 255 bytes).")
        }
        guard let id = try await services.database.accounts.accountID(tenantID: caller.tenant.id, externalID: externalID),
            let (account, identities) = try await services.database.accounts.find(tenantID: caller.tenant.id, accountID: id)
        else { return [] }
        return [.init(account: .init(account), identities: identities.map { .init($0) })]
    }

    /// `DELETE /v1/accounts/{id}`: the deletion of issue 23 §2 (the actor of the audit row is
    /// the API key's prefix). The answer does not wait for Apple.
    func deleteAccount(_ input: Operations.DeleteAccount.Input) async throws -> Operations.DeleteAccount.Output {
        let caller = try await authenticator.authenticate(currentCaller, requiring: .accounts)
        let deletion = try await services.accountDeletions.delete(
            tenantID: caller.tenant.id, accountID: input.path.id, actor: caller.apiKey.prefix)
        return .ok(.init(body: .json(.init(deleted: true, appleRevocationsQueued: deletion.appleRevocationsQueued))))
    }

    func signOutAccount(_ input: Operations.SignOutAccount.Input) async throws -> Operations.SignOutAccount.Output {
        let caller = try await authenticator.authenticate(currentCaller, requiring: .accounts)
        guard let id = UUID(uuidString: input.path.id),
            let count = try await services.database.sessions.revokeAll(
                tenantID: caller.tenant.id, accountID: id, reason: "signed_out")
        else { throw Self.accountNotFound(input.path.id) }
        return .ok(.init(body: .json(.init(revokedSessions: count))))
    }

    /// `GET /v1/accounts/{id}/sessions` (issue 42 §3): the account's open sessions, never a token.
    func listAccountSessions(_ input: Operations.ListAccountSessions.Input) async throws -> Operations.ListAccountSessions.Output {
        let caller = try await authenticator.authenticate(currentCaller, requiring: .accounts)
        guard let id = UUID(uuidString: input.path.id),
            let sessions = try await services.database.sessions.openSessions(tenantID: caller.tenant.id, accountID: id)
        else { throw Self.accountNotFound(input.path.id) }
        return .ok(
            .init(
                body: .json(
                    .init(
                        sessions: sessions.map {
                            .init(
                                id: $0.id.lowercasedString, provider: $0.idp, clientId: $0.clientID, platform: $0.platform,
                                createdAt: $0.createdAt, lastUsedAt: $0.lastRefreshedAt, expiresAt: $0.expiresAt)
                        }))))
    }

    /// `DELETE /v1/accounts/{id}/sessions/{session_id}` (issue 42 §3): one device signed out;
    /// the audit row names the API key's prefix.
    func revokeAccountSession(_ input: Operations.RevokeAccountSession.Input) async throws -> Operations.RevokeAccountSession.Output {
        let caller = try await authenticator.authenticate(currentCaller, requiring: .accounts)
        guard let id = UUID(uuidString: input.path.id) else { throw Self.accountNotFound(input.path.id) }
        let notFound = BrokerError(
            code: "session_not_found", kind: .notFound, title: "Session not found",
            detail: "The account has no open session '\(input.path.sessionId.prefix(60))'.")
        guard let sessionID = UUID(uuidString: input.path.sessionId) else { throw notFound }
        switch try await services.database.sessions.endSession(
            tenantID: caller.tenant.id, accountID: id, sessionID: sessionID, actor: caller.apiKey.prefix)
        {
        case .ended: return .ok(.init(body: .json(.init(revoked: true))))
        case .noAccount: throw Self.accountNotFound(input.path.id)
        case .noOpenSession: throw notFound
        }
    }
}
