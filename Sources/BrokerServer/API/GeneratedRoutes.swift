import HTTPTypes
import Hummingbird
import OpenAPIHummingbird
import OpenAPIRuntime

/// Registers the generated server's operations on the router, except those the router serves
/// directly (see ``SignInRoute``): Hummingbird refuses a second handler for a method and
/// path. Every other operation goes through the generated code as before.
struct GeneratedRoutes: ServerTransport {
    struct Operation: Hashable {
        let method: HTTPRequest.Method
        let path: String
    }

    let router: Router<BrokerRequestContext>
    let servedDirectly: Set<Operation>
    /// Every registered (method, path), for 405 answers.
    let routes: RouteTable

    func register(
        _ handler: @Sendable @escaping (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?),
        method: HTTPRequest.Method, path: String
    ) throws {
        routes.add(method: method, path: path)
        guard !servedDirectly.contains(Operation(method: method, path: path)) else { return }
        router.register(handler, method: method, path: path)
    }
}
