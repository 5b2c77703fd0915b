import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// `POST /v1/accounts/{id}/disable` and `POST /v1/accounts/{id}/enable`, served on the router
/// directly like ``AccountRoute``: the body is `GET /v1/accounts/{id}`'s, with `account.name`
/// always present, which the generated encoding would omit. Both go through
/// ``AccountService``, as `broker account disable|enable` does.
struct AccountStatusRoute: Sendable {
    static let disablePath = "/v1/accounts/:id/disable"
    static let enablePath = "/v1/accounts/:id/enable"
    static let operations: [GeneratedRoutes.Operation] = [
        .init(method: .post, path: "/v1/accounts/{id}/disable"),
        .init(method: .post, path: "/v1/accounts/{id}/enable"),
    ]

    let handlers: APIHandlers

    func disable(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        Self.json(
            try await handlers.setAccountStatus(
                id: context.parameters.get("id") ?? "", disabled: true, as: HTTPCaller(request, context: context)))
    }

    func enable(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        Self.json(
            try await handlers.setAccountStatus(
                id: context.parameters.get("id") ?? "", disabled: false, as: HTTPCaller(request, context: context)))
    }

    static func json(_ details: Components.Schemas.AccountDetails) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: details.json)))
    }
}

/// Disabling and enabling accounts (served by ``AccountStatusRoute``).
extension APIHandlers {
    // The generated entries (unregistered: ``AccountStatusRoute`` serves these operations).
    func disableAccount(_ input: Operations.DisableAccount.Input) async throws -> Operations.DisableAccount.Output {
        .ok(.init(body: .json(try await setAccountStatus(id: input.path.id, disabled: true, as: currentCaller))))
    }

    func enableAccount(_ input: Operations.EnableAccount.Input) async throws -> Operations.EnableAccount.Output {
        .ok(.init(body: .json(try await setAccountStatus(id: input.path.id, disabled: false, as: currentCaller))))
    }

    /// API key (`accounts`), then the change; the actor of the audit row is the key's prefix.
    func setAccountStatus(id rawID: String, disabled: Bool, as http: HTTPCaller) async throws -> Components.Schemas.AccountDetails {
        let caller = try await authenticator.authenticate(http, requiring: .accounts)
        let service = AccountService(database: services.database)
        let change =
            disabled
            ? try await service.disable(tenantID: caller.tenant.id, accountID: rawID, actor: caller.apiKey.prefix)
            : try await service.enable(tenantID: caller.tenant.id, accountID: rawID, actor: caller.apiKey.prefix)
        if change.changed {
            http.context.logger.info(
                disabled ? "account disabled" : "account enabled",
                metadata: ["account_id": "\(change.view.account.id.lowercasedString)", "revoked_sessions": "\(change.revokedSessions)"])
        }
        return .init(account: .init(change.view.account), identities: change.view.identities.map { .init($0) })
    }
}
