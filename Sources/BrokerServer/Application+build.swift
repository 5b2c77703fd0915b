import BrokerAPI
import BrokerApplication
import BrokerCore
import Hummingbird
import HummingbirdCore
import Logging
import OpenAPIHummingbird
import OpenAPIRuntime
import Providers
import ServiceLifecycle

/// The broker's router: middleware, then every route of openapi.yaml: the sign-in route, the
/// account read and identity linking served directly (``SignInRoute``, ``AccountRoute``,
/// ``IdentityLinkRoute``), all others through
/// the generated server code.
/// `metricsElsewhere`: `/metrics` has a listener of its own (`BROKER_METRICS_PORT`) and
/// answers 404 here.
public func buildRouter(services: BrokerServices, metricsElsewhere: Bool = false) throws -> Router<BrokerRequestContext> {
    BrokerMetrics.bootstrap()
    let router = Router(context: BrokerRequestContext.self)
    if TraceSpans.enabled {
        // A server span per request (the statements and outbound calls it makes are its
        // children); parameters that carry a code, a state or a person's id are not recorded.
        router.add(middleware: TracingMiddleware(redactingQueryParameters: TraceSpans.redactedQueryParameters))
    }
    router.add(middleware: TenantScopeMiddleware())
    router.add(middleware: EdgeHeadersMiddleware(https: services.publicURL.lowercased().hasPrefix("https://"), drain: services.drain))
    router.add(middleware: RequestMetricsMiddleware())
    router.add(middleware: ProblemMiddleware(database: services.database))
    if metricsElsewhere { router.add(middleware: MetricsElsewhereMiddleware()) }
    router.add(middleware: ClientAddressMiddleware(resolver: services.limiter.limits.clientAddresses))
    router.add(middleware: PublicRateLimitMiddleware(limiter: services.limiter))
    let routes = RouteTable()
    router.add(middleware: MethodNotAllowedMiddleware(routes: routes))
    let handlers = APIHandlers(services: services)
    router.add(middleware: APIKeyFirstMiddleware(routes: routes, authenticator: handlers.authenticator))
    router.add(
        middleware: RequestInfoMiddleware(
            maxBodyBytes: services.maxBodyBytes,
            largerBodies: [AccountImportRoute.operation.path: max(services.maxBodyBytes, AccountImportRoute.maxBodyBytes)]))
    router.add(
        middleware: StrictJSONBodyMiddleware(
            maxBodyBytes: services.maxBodyBytes, parsedByHandlerUnder: [SignInRoute.pathPrefix, AccountImportRoute.operation.path]))
    let signIn = SignInRoute(handlers: handlers, maxBodyBytes: services.maxBodyBytes)
    router.on(RouterPath(SignInRoute.routerPath), method: .post) { request, context in
        try await signIn.respond(request, context: context)
    }
    let account = AccountRoute(handlers: handlers)
    router.on(RouterPath(AccountRoute.operation.path), method: AccountRoute.operation.method) { request, context in
        try await account.respond(request, context: context)
    }
    router.on(RouterPath(AccountRoute.listOperation.path), method: AccountRoute.listOperation.method) { request, context in
        try await account.list(request, context: context)
    }
    let accountImport = AccountImportRoute(handlers: handlers)
    router.on(RouterPath(AccountImportRoute.operation.path), method: AccountImportRoute.operation.method) { request, context in
        try await accountImport.respond(request, context: context)
    }
    let links = IdentityLinkRoute(handlers: handlers, maxBodyBytes: services.maxBodyBytes)
    router.on(RouterPath(IdentityLinkRoute.linkPath), method: .post) { request, context in
        try await links.link(request, context: context)
    }
    router.on(RouterPath(IdentityLinkRoute.unlinkPath), method: .delete) { request, context in
        try await links.unlink(request, context: context)
    }
    let accountStatus = AccountStatusRoute(handlers: handlers)
    router.on(RouterPath(AccountStatusRoute.disablePath), method: .post) { request, context in
        try await accountStatus.disable(request, context: context)
    }
    router.on(RouterPath(AccountStatusRoute.enablePath), method: .post) { request, context in
        try await accountStatus.enable(request, context: context)
    }
    let loginOptions = LoginOptionsRoute(handlers: handlers)
    router.on(RouterPath(LoginOptionsRoute.operation.path), method: LoginOptionsRoute.operation.method) { request, context in
        try await loginOptions.respond(request, context: context)
    }
    let web = WebSignInRoute(handlers: handlers, maxBodyBytes: services.maxBodyBytes)
    router.on(RouterPath(WebSignInRoute.startPath), method: .post) { request, context in
        try await web.start(request, context: context)
    }
    router.on(RouterPath(WebSignInRoute.exchangePath), method: .post) { request, context in
        try await web.exchange(request, context: context)
    }
    router.on(RouterPath(WebSignInRoute.appleCallbackPath), method: .post) { request, context in
        await web.appleCallback(request, context: context)
    }
    router.on(RouterPath(WebSignInRoute.oidcCallbackPath), method: .get) { request, context in
        await web.oidcCallback(request, context: context)
    }
    let events = EventsRoute(handlers: handlers)
    router.on(RouterPath(EventsRoute.operation.path), method: .get) { request, context in
        try await events.respond(request, context: context)
    }
    let notifications = AppleNotificationRoute(services: services, maxBodyBytes: services.maxBodyBytes)
    router.on(RouterPath(AppleNotificationRoute.path), method: .post) { request, context in
        try await notifications.receive(request, context: context)
    }
    let openID = OpenIDProviderRoute(services: services, maxBodyBytes: services.maxBodyBytes)
    for method in [HTTPRequest.Method.get, .post] {
        router.on(RouterPath(OpenIDProviderRoute.authorizePath), method: method) { request, context in
            await openID.authorize(request, context: context)
        }
        router.on(RouterPath(OpenIDProviderRoute.userinfoPath), method: method) { request, context in
            await openID.userinfo(request, context: context)
        }
        router.on(RouterPath(OpenIDProviderRoute.logoutPath), method: method) { request, context in
            await openID.logout(request, context: context)
        }
    }
    router.on(RouterPath(OpenIDProviderRoute.tokenPath), method: .post) { request, context in
        await openID.token(request, context: context)
    }
    router.on(RouterPath(SignInPageRenderer.stylesheetPath), method: .get) { request, context in
        openID.stylesheet(request, context: context)
    }
    let servedDirectly =
        SignInRoute.operations + [
            AccountRoute.operation, AccountRoute.listOperation, AccountImportRoute.operation, LoginOptionsRoute.operation,
            AppleNotificationRoute.operation, EventsRoute.operation,
        ]
        + IdentityLinkRoute.operations
        + AccountStatusRoute.operations + WebSignInRoute.operations + OpenIDProviderRoute.operations
    try handlers.registerHandlers(
        on: GeneratedRoutes(router: router, servedDirectly: Set(servedDirectly), routes: routes),
        configuration: .init(dateTranscoder: ISO8601Transcoder(), jsonEncodingOptions: [.withoutEscapingSlashes]))
    return router
}

/// The whole application; `lifecycle` services (e.g. the database pool) run alongside the
/// HTTP server, `beforeServing` runs once they are up and before the port opens, and
/// `onServing` once the port is open.
/// Every request is answered by `limits.requestTimeout`; idle and half-sent connections close
/// after `limits.idleTimeout`; at most `limits.maxConnections` are served at once (decision 0015).
public func buildApplication(
    services: BrokerServices, host: String, port: Int, limits: HTTPLimits = HTTPLimits(), metricsElsewhere: Bool = false,
    lifecycle: [any Service] = [], logger: Logger, beforeServing: @escaping @Sendable () async throws -> Void = {},
    onServing: @escaping @Sendable () async -> Void = {}
) throws -> some ApplicationProtocol {
    let router = try buildRouter(services: services, metricsElsewhere: metricsElsewhere)
    let idle = limits.idleTimeout.components
    let header = limits.headerTimeout.components
    let connections = ConnectionCounts(cap: limits.maxConnectionsPerAddress, resolver: services.limiter.limits.clientAddresses)
    var app = Application(
        responder: RequestDeadlineResponder(
            inner: router.buildResponder(), timeout: limits.requestTimeout, database: services.database),
        server: HTTPServerBuilder { responder in
            EventLoopPinnedChannel(
                inner: HTTP1Channel(
                    responder: responder,
                    configuration: .init(
                        additionalChannelHandlers: [HTTPParseErrorHandler()],
                        idleTimeout: .nanoseconds(idle.seconds * 1_000_000_000 + idle.attoseconds / 1_000_000_000))),
                connections: connections,
                headerTimeout: .nanoseconds(header.seconds * 1_000_000_000 + header.attoseconds / 1_000_000_000))
        },
        configuration: .init(
            address: .hostname(host, port: port), serverName: "IdentityBroker",
            availableConnectionsDelegate: MaximumAvailableConnections(limits.maxConnections)),
        services: lifecycle,
        onServerRunning: { _ in await onServing() },
        logger: logger
    )
    app.beforeServerStarts(perform: beforeServing)
    return app
}

/// The listener of `BROKER_METRICS_PORT`: `GET /metrics` and nothing else (a port operators keep
/// off the public network).
public func buildMetricsApplication(services: BrokerServices, host: String, port: Int, logger: Logger) -> some ApplicationProtocol {
    BrokerMetrics.bootstrap()
    let router = Router()
    router.get("/metrics") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
            body: .init(byteBuffer: ByteBuffer(string: BrokerMetrics.render(keySets: services.keySets.states()))))
    }
    return Application(
        router: router, configuration: .init(address: .hostname(host, port: port), serverName: "IdentityBroker metrics"), logger: logger)
}
