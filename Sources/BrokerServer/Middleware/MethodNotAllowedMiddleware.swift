import HTTPTypes
import Hummingbird
import Synchronization

/// The routes the router serves, by path template (`/v1/accounts/{id}`) and method, filled
/// while routes are registered. Tells which methods a path allows when a request's method
/// has no route.
final class RouteTable: Sendable {
    private struct Route {
        let segments: [Substring]
        let method: HTTPRequest.Method
    }
    private let routes = Mutex<[Route]>([])

    func add(method: HTTPRequest.Method, path: String) {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        routes.withLock { $0.append(Route(segments: segments, method: method)) }
    }

    /// The methods with a route for `path`, in a stable order; empty when no template matches.
    func allowedMethods(for path: String) -> [HTTPRequest.Method] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        let methods: [HTTPRequest.Method] = routes.withLock { routes in
            let matching = routes.filter { Self.matches($0.segments, segments) }
            // The router takes a literal segment over a parameter (`/v1/accounts/import` is not
            // `/v1/accounts/{id}`): only the most literal templates that match count.
            guard let best = matching.map({ Self.literalness($0.segments) }).max(by: Self.lessLiteral) else { return [] }
            return matching.filter { Self.literalness($0.segments) == best }.map(\.method)
        }
        var unique: [HTTPRequest.Method] = []
        for method in methods where !unique.contains(method) { unique.append(method) }
        return unique.sorted { $0.rawValue < $1.rawValue }
    }

    private static func literalness(_ template: [Substring]) -> [Bool] {
        template.map { !($0.first == "{" && $0.last == "}") }
    }

    /// Whether `a` is less literal than `b`: at the first segment where they differ, `a` has the parameter.
    private static func lessLiteral(_ a: [Bool], _ b: [Bool]) -> Bool {
        for (x, y) in zip(a, b) where x != y { return !x }
        return false
    }

    private static func matches(_ template: [Substring], _ path: [Substring]) -> Bool {
        guard template.count == path.count else { return false }
        return zip(template, path).allSatisfy { template, segment in
            template.first == "{" && template.last == "}" ? !segment.isEmpty : template == segment
        }
    }
}

/// A request whose path has routes, but none for its method, is 405 `method_not_allowed` with
/// `Allow` naming the methods that have one (RFC 9110 §15.5.6), not 404.
struct MethodNotAllowedMiddleware: RouterMiddleware {
    typealias Context = BrokerRequestContext
    let routes: RouteTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let allowed = routes.allowedMethods(for: request.uri.path)
            guard !allowed.isEmpty, !allowed.contains(request.method) else { throw error }
            throw MethodNotAllowed(allowed: allowed)
        }
    }
}

/// 405 with the allowed methods, for ``ProblemMiddleware`` to render.
struct MethodNotAllowed: Error {
    let allowed: [HTTPRequest.Method]
    var allowHeader: String { allowed.map(\.rawValue).joined(separator: ", ") }
}
