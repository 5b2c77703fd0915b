import Foundation
import Hummingbird
import NIOCore

/// The routes of ``MockOIDCIssuer``s, each under `/oidc/<name>` (see ``MockOIDCIssuer`` for
/// the paths). Discovery documents name URLs on the host the request was sent to (its `Host`).
extension MockIdPServer {
    /// Adds every issuer's routes; of issuers sharing a name, only the first is served.
    static func addOIDCRoutes(to router: Router<Context>, issuers: [MockOIDCIssuer]) {
        var served: Set<String> = []
        for issuer in issuers where served.insert(issuer.name).inserted {
            if issuer.isMultiTenant {
                router.get(RouterPath(issuer.path + "/{tenant}/v2.0" + MockOIDCIssuer.discoverySuffix)) { request, context in
                    let tenant = context.parameters.get("tenant")
                    return try await oidcResponse(issuer, context) { count in
                        try issuer.discoveryAnswer(base: base(of: request, context), tenant: tenant, count: count)
                    }
                }
                router.get(RouterPath(issuer.path + "/{tenant}/discovery/v2.0/keys")) { _, context in
                    try await oidcResponse(issuer, context) { count in try issuer.keysAnswer(count: count) }
                }
            } else {
                router.get(RouterPath(issuer.path + MockOIDCIssuer.discoverySuffix)) { request, context in
                    try await oidcResponse(issuer, context) { count in
                        try issuer.discoveryAnswer(base: base(of: request, context), tenant: nil, count: count)
                    }
                }
                router.get(RouterPath(issuer.path + "/keys")) { _, context in
                    try await oidcResponse(issuer, context) { count in try issuer.keysAnswer(count: count) }
                }
                router.get(RouterPath(issuer.path + "/authorize")) { request, context -> Response in
                    var query: [String: String] = [:]
                    for (name, value) in request.uri.queryParameters { query[String(name)] = String(value) }
                    guard let location = issuer.authorizeRedirect(query, base: base(of: request, context)) else {
                        return json(.badRequest, Data(#"{"error":"invalid_request"}"#.utf8))
                    }
                    return Response(status: .found, headers: [.location: location])
                }
                router.post(RouterPath(issuer.path + "/token")) { request, context -> Response in
                    let form = MockForm.fields(try await request.body.collect(upTo: 65_536))
                    let authorization = request.headers[.authorization]
                    let base = base(of: request, context)
                    return try await oidcResponse(issuer, context) { count in
                        try issuer.tokenAnswer(form: form, authorization: authorization, base: base, count: count)
                    }
                }
            }
        }
    }

    /// `http://` and the request's `Host` (else the address it reached).
    static func base(of request: Request, _ context: Context) -> String {
        if let authority = request.head.authority, !authority.isEmpty { return "http://" + authority }
        return "http://127.0.0.1:\(context.channel.localAddress?.port ?? 80)"
    }

    /// Runs `answer` (first counting the fetch) and sends what it says; while it says hang,
    /// waits for the hang to end and asks again, or closes the connection unanswered.
    static func oidcResponse(
        _ issuer: MockOIDCIssuer, _ context: Context, _ answer: (_ count: Bool) throws -> MockOIDCIssuer.Answer
    ) async throws -> Response {
        var count = true
        while true {
            switch try answer(count) {
            case .response(let status, let body):
                return json(.init(code: status), body)
            case .hang(let generation):
                count = false
                guard await issuer.hang(on: context.channel, generation: generation) == .faultChanged else {
                    try? await context.channel.close()
                    throw ConnectionDropped()
                }
            }
        }
    }
}
