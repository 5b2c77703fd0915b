import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Providers

/// `POST /v1/accounts/{id}/identities` and `DELETE /v1/accounts/{id}/identities/{identity_id}`,
/// served on the router directly like ``SignInRoute``: the body is a provider proof read by that
/// provider's sign-in reader (the same members, the same checks), and the responses carry
/// `account.name` always present, which the generated encoding would omit. The contract is
/// openapi.yaml's all the same (ContractCoverageTests).
struct IdentityLinkRoute: Sendable {
    static let linkPath = "/v1/accounts/:id/identities"
    static let unlinkPath = "/v1/accounts/:id/identities/:identity_id"
    static let operations: [GeneratedRoutes.Operation] = [
        .init(method: .post, path: "/v1/accounts/{id}/identities"),
        .init(method: .delete, path: "/v1/accounts/{id}/identities/{identity_id}"),
    ]

    let handlers: APIHandlers
    let maxBodyBytes: Int

    func link(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        try SignInRoute.checkContentType(request.headers[.contentType])
        var request = request
        let bytes = try await request.collectBody(upTo: maxBodyBytes)
        let body: LinkBody
        do {
            body = try LinkBody.read(try JSONValue.parse(bytes.readableBytesView), providers: handlers.services.providers)
        } catch let error as ContractMismatch {
            throw SignInRoute.contractMismatch(error.description)
        } catch {
            throw SignInRoute.contractMismatch("the body is not valid JSON (or repeats a member name)")
        }
        let (response, created) = try await handlers.linkIdentity(
            accountID: context.parameters.get("id") ?? "", accountToken: Self.accountToken(in: request.headers), body,
            as: HTTPCaller(request, context: context))
        return Self.json(response.json, status: created ? .created : .ok)
    }

    func unlink(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        let response = try await handlers.unlinkIdentity(
            accountID: context.parameters.get("id") ?? "", identityID: context.parameters.get("identity_id") ?? "",
            accountToken: Self.accountToken(in: request.headers), as: HTTPCaller(request, context: context))
        return Self.json(response.json, status: .ok)
    }

    /// The `X-Account-Token` header (names compare case-insensitively).
    static func accountToken(in headers: HTTPFields) -> String? {
        headers.first { $0.name.canonicalName == "x-account-token" }?.value
    }

    static func json(_ bytes: [UInt8], status: HTTPResponse.Status) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// A link body: `provider`, then that provider's sign-in members. A reserved id's proof is
/// read at once (a body that does not match the contract is refused before the API key is
/// looked at); any other id's type is the calling tenant's to say, so its proof is read after.
struct LinkBody: Sendable {
    var provider: ProviderID
    var json: JSONValue
    var proof: ProviderProof?

    static func read(_ body: JSONValue, providers: ProviderRegistry) throws(ContractMismatch) -> LinkBody {
        let object = try ContractReader.object(body)
        let name = try ContractReader.required("provider", in: object)
        guard let provider = ProviderID(rawValue: name) else {
            throw ContractMismatch(description: "member 'provider' is not a provider id")
        }
        var proof: ProviderProof?
        if let reserved = provider.reservedType, let registered = providers[reserved] {
            proof = try SignInBody.read(registered.descriptor, body).proof
        }
        return LinkBody(provider: provider, json: body, proof: proof)
    }
}

extension Components.Schemas.IdentityLinkResponse {
    /// Written like the sign-in response: `account.name` always present.
    var json: [UInt8] { IdentityLinkRoute.json(account: account, identity: identity) }
}

extension Components.Schemas.IdentityUnlinkResponse {
    var json: [UInt8] {
        IdentityLinkRoute.json(account: account, identity: identity) { $0.member("revoked_sessions", revokedSessions) }
    }
}

extension IdentityLinkRoute {
    /// `{"account", "identity", ...}`: the members both responses share, then `more`.
    static func json(
        account: Components.Schemas.Account, identity: Components.Schemas.IdentityInfo, more: (inout JSONWriter) -> Void = { _ in }
    ) -> [UInt8] {
        var writer = JSONWriter(capacity: 1_024)
        writer.beginObject()
        writer.key("account")
        account.write(to: &writer)
        writer.key("identity")
        identity.write(to: &writer)
        more(&writer)
        writer.endObject()
        return writer.bytes
    }
}
