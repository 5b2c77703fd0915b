import HTTPTypes
import Hummingbird
import OpenAPIHummingbird
import OpenAPIRuntime

/// Registers the generated server's operations on the router, except those the router serves
/// directly (see ``AppleSignInRoute``): Hummingbird refuses a second handler for a method and
/// path. Every other operation goes through the generated code as before.
struct GeneratedRoutes: ServerTransport {
    struct Operation: Hashable {
        let method: HTTPRequest.Method
        let path: String
    }

    let router: Router<BrokerRequestContext>
    let servedDirectly: Set<Operation>

    func register(
        _ handler: @Sendable @escaping (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?),
        method: HTTPRequest.Method, path: String
    ) throws {
        guard !servedDirectly.contains(Operation(method: method, path: path)) else { return }
        router.register(handler, method: method, path: path)
    }
}
