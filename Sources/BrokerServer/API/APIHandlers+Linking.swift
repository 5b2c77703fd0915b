import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import Providers

/// Linking and unlinking provider identities (served by ``IdentityLinkRoute``).
extension APIHandlers {
    // The generated entries (unregistered: ``IdentityLinkRoute`` serves these operations on the
    // router directly) only unwrap their input.
    func linkIdentity(_ input: Operations.LinkIdentity.Input) async throws -> Operations.LinkIdentity.Output {
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        let body: LinkBody
        do {
            body = try LinkBody.read(try JSONValue.parse(try JSONEncoder().encode(request)), providers: services.providers)
        } catch let error as ContractMismatch {
            throw SignInRoute.contractMismatch(error.description)
        }
        let (response, created) = try await linkIdentity(
            accountID: input.path.id, accountToken: input.headers.xAccountToken, body, as: currentCaller)
        return created ? .created(.init(body: .json(response))) : .ok(.init(body: .json(response)))
    }

    func unlinkIdentity(_ input: Operations.UnlinkIdentity.Input) async throws -> Operations.UnlinkIdentity.Output {
        .ok(
            .init(
                body: .json(
                    try await unlinkIdentity(
                        accountID: input.path.id, identityID: input.path.identityId, accountToken: input.headers.xAccountToken,
                        as: currentCaller))))
    }

    /// The link operation: API key (`accounts`), then the account token, then the proof.
    func linkIdentity(accountID rawID: String, accountToken: String?, _ body: LinkBody, as http: HTTPCaller) async throws
        -> (Components.Schemas.IdentityLinkResponse, created: Bool)
    {
        let caller = try await authenticator.authenticate(http, requiring: .accounts)
        let service = services.identityLinks
        do {
            let accountID = try await service.requireAccountToken(accountToken, tenant: caller.tenant, accountID: rawID)
            let registered = try await services.providerSettings.registered(
                body.provider, tenantID: caller.tenant.id, in: services.providers)
            let proof = try body.proof ?? Self.read(registered.descriptor, body.json).proof
            let (account, identity, created) = try await service.link(
                tenant: caller.tenant, accountID: accountID, provider: body.provider, type: registered, proof: proof, context: http.context)
            return (.init(account: .init(account), identity: .init(identity)), created)
        } catch let failure as LinkFailure {
            throw LinkProblems.problem(failure)
        } catch let failure as ProviderFailure {
            throw SignInProblems.problem(failure, tenant: caller.tenant)
        } catch let failure as SignInFailure {
            throw SignInProblems.problem(failure)
        }
    }

    /// The unlink operation: API key (`accounts`), then the account token.
    func unlinkIdentity(accountID rawID: String, identityID: String, accountToken: String?, as http: HTTPCaller) async throws
        -> Components.Schemas.IdentityUnlinkResponse
    {
        let caller = try await authenticator.authenticate(http, requiring: .accounts)
        let service = services.identityLinks
        do {
            let accountID = try await service.requireAccountToken(accountToken, tenant: caller.tenant, accountID: rawID)
            let (account, identity, revoked) = try await service.unlink(
                tenant: caller.tenant, accountID: accountID, identityID: identityID, context: http.context)
            return .init(account: .init(account), identity: .init(identity), revokedSessions: revoked)
        } catch let failure as LinkFailure {
            throw LinkProblems.problem(failure)
        }
    }
}
