import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Storage

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the HTTP server.",
        discussion: """
            With no DATABASE_URL the broker starts (or reuses) its embedded PostgreSQL in \
            BROKER_DATA_DIR and stops it on SIGINT/SIGTERM unless another broker process still uses it. \
            Pending migrations are applied before the port opens.

            Environment (every command reads the same; docs/configuration.md has this list as tables):

            \(Setting.helpText(BrokerConfiguration.settings))
            """
    )

    @Flag(name: .long, help: "Do not apply pending migrations at start (fail instead if any are pending).")
    var noMigrate = false

    func run() async throws {
        try await runReporting(json: false) {
            let notifySocket = ServiceManagerNotify.takeSocket()
            let context = try CLIContext(logLevel: .info)
            let configuration = context.configuration
            let secrets = SecretBox(masterKey: try context.masterKey())
            let logger = context.logger
            // Before anything makes an outbound client or a router: both read the switch.
            let traces = try TraceExport.start(environment: ProcessInfo.processInfo.environment, logger: logger)
            try await context.withDatabase(migrate: noMigrate ? .require : .always, serving: true) { database in
                let services = BrokerServices(
                    database: database, secrets: secrets, publicURL: configuration.publicURL,
                    maxBodyBytes: configuration.maxBodyBytes, appleBaseURL: configuration.appleBaseURL,
                    endpoints: configuration.providerEndpoints,
                    refreshReuseInterval: configuration.refreshReuseInterval, logger: logger,
                    additionalProviderTypes: InstalledProviderTypes.additional, appleCredentialChecks: configuration.appleCredentialChecks,
                    webhookAllowInsecure: configuration.webhookAllowInsecure,
                    abuseLimits: configuration.abuseLimits)
                var lifecycle: [any Service] = [BackgroundTasks(services: services)]
                if let traces { lifecycle.append(traces) }
                if let metricsPort = configuration.metricsPort {
                    lifecycle.append(
                        buildMetricsApplication(services: services, host: configuration.host, port: metricsPort, logger: logger))
                }
                let app = try buildApplication(
                    services: services, host: configuration.host, port: configuration.port, limits: configuration.httpLimits,
                    metricsElsewhere: configuration.metricsPort != nil, lifecycle: lifecycle, logger: logger,
                    onServing: {
                        await ServiceManagerNotify.ready(socket: notifySocket, databaseAnswers: await database.ping(), logger: logger)
                    })
                logger.info(
                    "IdentityBroker serving",
                    metadata: [
                        "address": "\(configuration.host):\(configuration.port)",
                        "public_url": "\(configuration.publicURL)",
                        "metrics": "\(configuration.metricsPort.map { "\(configuration.host):\($0)" } ?? "on the API's port")",
                        "database":
                            "\(configuration.databaseURL == nil ? "embedded (\(configuration.dataDirectory.path))" : "DATABASE_URL")",
                    ])
                if try await !database.tenantWallApplies() {
                    logger.warning(
                        "serving as a database role that bypasses row-level security: the tenant wall does not apply",
                        metadata: ["hint": "connect broker serve as the role broker_serve (operator guide, 'The tenant wall')"])
                }
                do {
                    try await Self.serve(app, drain: services.drain, seconds: configuration.drainSeconds, logger: logger)
                } catch {
                    throw ListenFailure.explain(
                        error, address: "\(configuration.host):\(configuration.port)", setting: "BROKER_PORT (or BROKER_HOST)")
                }
            }
        }
    }

    /// Runs `app` until SIGTERM or SIGINT, and ends the process 14 s after the signal if it has not
    /// stopped by then (``ShutdownDeadline``). With a drain (`BROKER_DRAIN_SECONDS`), the signal
    /// starts it (``Drain``: `/readyz` 503, `Connection: close`), and the graceful shutdown
    /// follows `seconds` later, the deadline as much later; without, the shutdown starts at the
    /// signal.
    static func serve(_ app: some ApplicationProtocol, drain: Drain, seconds: Int, logger: Logger) async throws {
        guard seconds > 0 else {
            ShutdownDeadline.arm(seconds: 14, logger: logger)
            return try await app.runService()
        }
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        ShutdownDeadline.arm(seconds: 14 + seconds, logger: logger) {
            guard !drain.isDraining else { return }
            drain.begin()
            logger.notice("draining: /readyz answers 503 until the stop", metadata: ["seconds": "\(seconds)"])
            Task {
                try? await Task.sleep(for: .seconds(seconds))
                await group.triggerGracefulShutdown()
            }
        }
        try await group.run()
    }
}
