import Foundation
import Hummingbird
import JWTKit
import NIOCore

/// Serves mock providers over HTTP on loopback.
///
/// Routes: Apple at `/auth/keys`, `/auth/token`, `/auth/revoke`, `/auth/usermigrationinfo`; Google's key set at
/// ``MockGoogleIdP/jwksPath``; Facebook's Limited Login key set at ``MockFacebookIdP/jwksPath``,
/// Graph (`debug_token`, `me`) under ``MockFacebookIdP/graphPath`` and the test-users admin
/// route at ``MockFacebookIdP/testUsersPath``; generic OpenID Connect issuers
/// (``MockOIDCIssuer``) under `/oidc/<name>`; ``faultsPath`` sets faults of a running mock.
public enum MockIdPServer {
    /// The request context of ``router(apple:google:facebook:oidc:)``: it keeps the connection,
    /// so that a fault can reset or close it.
    public struct Context: RequestContext {
        public var coreContext: CoreRequestContextStorage
        let channel: any Channel

        public init(source: ApplicationRequestContextSource) {
            coreContext = .init(source: source)
            channel = source.channel
        }
    }

    /// Apple's routes only (as before Google and Facebook were added).
    public static func router(apple: MockAppleIdP) -> Router<BasicRequestContext> {
        let router = Router()
        addAppleRoutes(to: router, apple: apple)
        return router
    }

    /// The routes of every provider given; a nil provider is not served. `oidc`: OpenID Connect
    /// issuers, each under `/oidc/<name>` (names must differ: of issuers sharing one, only the
    /// first is served).
    public static func router(
        apple: MockAppleIdP?, google: MockGoogleIdP?, facebook: MockFacebookIdP?, oidc: [MockOIDCIssuer] = []
    ) -> Router<Context> {
        let router = Router(context: Context.self)
        if let apple { addAppleRoutes(to: router, apple: apple) }
        if let google {
            router.get(RouterPath(MockGoogleIdP.jwksPath)) { _, _ -> Response in try keysResponse(google.keys) }
            router.get(RouterPath(MockGoogleIdP.discoveryPath)) { request, context -> Response in
                json(.ok, try google.discoveryDocument(base: base(of: request, context)))
            }
            router.get(RouterPath(MockGoogleIdP.authorizePath)) { request, _ -> Response in
                var query: [String: String] = [:]
                for (name, value) in request.uri.queryParameters { query[String(name)] = String(value) }
                guard let location = google.web.authorizeRedirect(query) else {
                    return json(.badRequest, Data(#"{"error":"invalid_request"}"#.utf8))
                }
                return Response(status: .found, headers: [.location: location])
            }
            router.post(RouterPath(MockGoogleIdP.tokenPath)) { request, _ -> Response in
                let form = MockForm.fields(try await request.body.collect(upTo: 65_536))
                let answer = try google.tokenAnswer(form: form, authorization: request.headers[.authorization])
                return json(.init(code: answer.status), answer.body)
            }
        }
        if let facebook { addFacebookRoutes(to: router, facebook: facebook) }
        addOIDCRoutes(to: router, issuers: oidc)
        addFaultRoute(to: router, apple: apple, google: google, facebook: facebook, oidc: oidc)
        return router
    }

    /// An application listening on 127.0.0.1:`port` (0 picks a free port; `onRunning` tells
    /// which), serving Apple only.
    public static func application(
        apple: MockAppleIdP, port: Int, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: router(apple: apple),
            configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "MockIdP"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) }
        )
    }

    /// An application listening on 127.0.0.1:`port` serving every provider given, and the
    /// OpenID Connect issuers `oidc` (``router(apple:google:facebook:oidc:)``).
    public static func application(
        apple: MockAppleIdP?, google: MockGoogleIdP?, facebook: MockFacebookIdP?, oidc: [MockOIDCIssuer] = [], port: Int,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: router(apple: apple, google: google, facebook: facebook, oidc: oidc),
            configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "MockIdP"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) }
        )
    }

    static func addAppleRoutes<C: RequestContext>(to router: Router<C>, apple: MockAppleIdP) {
        router.get("/auth/keys") { _, _ -> Response in try keysResponse(apple.keys) }
        router.get("/auth/authorize") { request, _ -> Response in
            var query: [String: String] = [:]
            for (name, value) in request.uri.queryParameters { query[String(name)] = String(value) }
            guard let form = try apple.authorizeForm(query) else {
                return json(.badRequest, try MockAppleIdP.json(["error": .string("invalid_request")]))
            }
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: MockAppleIdP.formPage(action: form.action, fields: form.fields))))
        }
        router.post("/auth/token") { request, _ -> Response in
            let form = MockForm.fields(try await request.body.collect(upTo: 65_536))
            if form["grant_type"] == "refresh_token" { await apple.pass(.refreshGrant) }
            if form["grant_type"] == "authorization_code" { await apple.pass(.codeGrant) }
            switch apple.tokenFault {
            case .answer(let status, let body):
                apple.countCodeExchange()
                return json(.init(code: status), body)
            case .slowBody:
                apple.countCodeExchange()
                return slowResponse(200, Data(#"{"access_token":"a","token_type":"Bearer","expires_in":3600}"#.utf8))
            case .none, .omitIDToken, .otherSubject:
                break
            }
            switch apple.answer(MockAppleIdP.TokenRequest(form: form)) {
            case .success(let body):
                return json(.ok, body)
            case .error(let status, let code):
                return json(.init(code: status), MockJSON.object([("error", .string(code))]))
            }
        }
        router.post("/auth/usermigrationinfo") { request, _ -> Response in
            let form = MockForm.fields(try await request.body.collect(upTo: 65_536))
            let (status, body) = apple.migrationInfoAnswer(form, authorization: request.headers[.authorization])
            return json(.init(code: status), body)
        }
        router.post("/auth/revoke") { request, _ -> Response in
            let form = MockForm.fields(try await request.body.collect(upTo: 65_536))
            await apple.pass(.revoke)
            let (status, error) = apple.revokeAnswer(form)
            guard let error else { return Response(status: .init(code: status)) }
            return json(.init(code: status), MockJSON.object([("error", .string(error))]))
        }
    }

    static func addFacebookRoutes(to router: Router<Context>, facebook: MockFacebookIdP) {
        router.get(RouterPath(MockFacebookIdP.jwksPath)) { _, _ -> Response in try keysResponse(facebook.keys) }
        // Graph with or without a version segment (`/facebook/graph/v24.0/me`).
        for base in [MockFacebookIdP.graphPath, MockFacebookIdP.graphPath + "/{version}"] {
            router.get(RouterPath(base + "/debug_token")) { request, context -> Response in
                let query = request.uri.queryParameters
                let (input, access) = (query["input_token"].map(String.init), query["access_token"].map(String.init))
                return try await graphResponse(context) { first in
                    facebook.debugTokenAnswer(inputToken: input, accessToken: access, now: Date(), count: first)
                }
            }
            router.get(RouterPath(base + "/me")) { request, context -> Response in
                let query = request.uri.queryParameters
                let (fields, access, proof) = (
                    query["fields"].map(String.init), query["access_token"].map(String.init), query["appsecret_proof"].map(String.init)
                )
                return try await graphResponse(context) { first in
                    facebook.meAnswer(fields: fields, accessToken: access, appsecretProof: proof, now: Date(), count: first)
                }
            }
        }
        router.post(RouterPath(MockFacebookIdP.testUsersPath)) { request, _ -> Response in
            let body = try await request.body.collect(upTo: 65_536)
            guard let user = try? JSONDecoder().decode(TestUserRequest.self, from: Data(body.readableBytesView)) else {
                return graphError(400, "Expected a JSON object with app_id and optional user_id, name, email, expires_in", code: 100)
            }
            guard facebook.isRegistered(appID: user.app_id) else {
                return graphError(400, "Unknown app id \(user.app_id.prefix(64))", code: 100)
            }
            let userID = user.user_id ?? MockFacebookIdP.randomUserID()
            let expiresAt = user.expires_in.map { Date().addingTimeInterval(TimeInterval($0)) }
            let token = facebook.issueAccessToken(
                appID: user.app_id, userID: userID, name: user.name, email: user.email, expiresAt: expiresAt)
            return json(
                .ok,
                try MockKeyRing.json([
                    "access_token": .string(token), "app_id": .string(user.app_id), "user_id": .string(userID),
                    "expires_at": .int(expiresAt.map { Int($0.timeIntervalSince1970) } ?? 0),
                ]))
        }
    }

    /// Runs `answer` (first with `true`, then again while it says `.noAnswer`) and sends what it says.
    static func graphResponse(_ context: Context, _ answer: (_ first: Bool) -> MockFacebookIdP.GraphAnswer) async throws -> Response {
        let deadline = ContinuousClock.now + .seconds(600)
        var first = true
        while true {
            switch answer(first) {
            case .response(let status, let body):
                return json(.init(code: status), body)
            case .slowBody(let status, let body):
                return slowResponse(status, body)
            case .resetConnection:
                await reset(context.channel)
                throw ConnectionDropped()
            case .noAnswer:
                first = false
                guard ContinuousClock.now < deadline else {
                    try? await context.channel.close()
                    throw ConnectionDropped()
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Closes the connection with SO_LINGER 0, so the peer gets a TCP reset.
    static func reset(_ channel: any Channel) async {
        if let socket = channel as? any SocketOptionProvider {
            try? await socket.unsafeSetSocketOption(level: .socket, name: .so_linger, value: Linger(onOff: 1, seconds: 0)).get()
        }
        try? await channel.close()
    }

    /// `struct linger` (two C ints on Linux and Darwin).
    struct Linger: Sendable {
        var onOff: CInt
        var seconds: CInt
    }

    struct ConnectionDropped: Error {}

    struct TestUserRequest: Decodable {
        var app_id: String
        var user_id: String?
        var name: String?
        var email: String?
        /// Seconds until the token expires (negative: already expired); absent: never.
        var expires_in: Int?
    }

    static func keysResponse(_ keys: MockKeyRing) throws -> Response {
        let answer = try keys.keysServed()
        return answer.slow ? slowResponse(answer.status, answer.body) : json(.init(code: answer.status), answer.body)
    }

    /// The head (with the body's length) at once, then the body one byte a second: a provider
    /// whose answer trickles in. Ends when the client goes away.
    static func slowResponse(_ status: Int, _ body: Data) -> Response {
        Response(
            status: .init(code: status), headers: [.contentType: "application/json"],
            body: ResponseBody(contentLength: body.count) { writer in
                for byte in body {
                    try await writer.write(ByteBuffer(bytes: [byte]))
                    try await Task.sleep(for: .seconds(1))
                }
                try await writer.finish(nil)
            })
    }

    static func graphError(_ status: Int, _ message: String, code: Int) -> Response {
        switch MockFacebookIdP.error(status, message, type: "OAuthException", code: code) {
        case .response(let status, let body): json(.init(code: status), body)
        default: Response(status: .init(code: status))
        }
    }

    static func json(_ status: HTTPResponse.Status, _ body: Data) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
