import BrokerApplication
import BrokerCore
import HTTPTypes
import Hummingbird

/// The caller of one HTTP request as the application layer takes it: the `Authorization`
/// header's value and an explicit ``OperationContext`` (request id, remote address, logger).
/// Routes served on the router make it from the request they hold; handlers generated from
/// openapi.yaml, which get only their typed input, from the ``RequestInfo`` the middleware keeps.
struct HTTPCaller: Sendable {
    let authorization: String?
    let context: OperationContext

    init(_ request: Request, context: BrokerRequestContext) {
        self.authorization = request.headers[.authorization]
        self.context = OperationContext(
            requestID: context.id, remoteAddress: context.clientAddress, logger: context.logger)
    }

    init(_ info: RequestInfo) {
        self.authorization = info.headers[.authorization]
        self.context = OperationContext(requestID: info.requestID, remoteAddress: info.remoteAddress, logger: info.logger)
    }

    /// The caller of the generated handler running now. Outside a request (never on the
    /// router) a caller without credentials.
    static func current(_ fallback: @autoclosure () -> OperationContext) -> HTTPCaller {
        if let info = RequestInfo.current { return HTTPCaller(info) }
        return HTTPCaller(authorization: nil, context: fallback())
    }

    private init(authorization: String?, context: OperationContext) {
        self.authorization = authorization
        self.context = context
    }
}

extension APIKeyAuthenticator {
    /// Authenticates the caller's API key; the key must carry `scope`.
    func authenticate(_ caller: HTTPCaller, requiring scope: APIKeyScope) async throws -> AuthenticatedCaller {
        try await authenticate(authorization: caller.authorization, requiring: scope, context: caller.context)
    }
}
