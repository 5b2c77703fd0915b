import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerDemo
import BrokerServer
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Storage

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the broker with a demo tenant wired to an in-process MockIdP, and print a curl per provider that signs in.",
        discussion: """
            Runs on an embedded PostgreSQL of its own (in BROKER_DEMO_DATA_DIR, default ./.broker-demo; never \
            DATABASE_URL nor the embedded default of 'broker serve', whose tenants the mock could otherwise sign in to), \
            plus a MockIdP playing Apple, Google and \
            Facebook on 127.0.0.1 (a free port unless --idp-port names one). The demo tenant 'demo' gets team DEMO000001, \
            app group com.example.demo, Google client demo-web.apps.googleusercontent.com, Facebook app 1000000000001 \
            (Limited Login on) and a fresh API key on every start. Only 'broker demo' trusts the mock; 'broker serve' never does.
            """)

    @Option(help: "Port of the in-process MockIdP on 127.0.0.1 (default 0: a free port).") var idpPort: Int = 0

    /// The demo's own data folder: `BROKER_DEMO_DATA_DIR`, default `./.broker-demo`.
    static func dataDirectory(_ environment: [String: String]) -> String {
        environment["BROKER_DEMO_DATA_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? ".broker-demo"
    }

    func run() async throws {
        try await runReporting(json: false) {
            // The mock plays Apple, Google and Facebook for every tenant of the database it runs
            // on: only the demo's own embedded one (issue 39 B7).
            if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty {
                throw BrokerError.invalidArgument(
                    "broker demo runs only on its own embedded PostgreSQL, not on DATABASE_URL: its MockIdP would sign people in to every tenant of that database.",
                    hint: "Unset DATABASE_URL for the demo (env -u DATABASE_URL broker demo); use 'broker serve' with DATABASE_URL.")
            }
            let mocks = try DemoTenant.Mocks()
            // The mock first: the broker is configured with its address, which a free port
            // makes known only once it listens.
            let (ports, announce) = AsyncStream.makeStream(of: Int.self)
            let mock = DemoPart { [idpPort] in
                defer { announce.finish() }
                do {
                    try await mocks.serve(port: idpPort) { port in announce.yield(port) }
                } catch {
                    throw ListenFailure.explain(error, address: "127.0.0.1:\(idpPort)", setting: "--idp-port (0 picks a free port)")
                }
            }
            let broker = DemoPart {
                var iterator = ports.makeAsyncIterator()
                // No port: the mock did not listen; its error ends the demo.
                guard let port = await iterator.next() else { return }
                try await runBroker(mocks: mocks, idpURL: "http://127.0.0.1:\(port)")
            }
            // Whichever ends first (Ctrl-C, which the broker's runService takes, ends the broker)
            // ends the other by graceful shutdown (the group's, in reverse order: the broker
            // before the mock), never by cancelling a server's task: cancelled while accepting a
            // connection, a SwiftNIO server can trap (apple/swift-nio #2813, #3481; decision 0071).
            // Seen with swift-nio 2.101.3 under Hummingbird 2.28.1; already reported upstream.
            // Graceful shutdown is the maintainers' advice and stays; only the reason goes when
            // #2813 is closed (docs/upstream.md, "A cancelled server traps").
            let parts = [mock, broker].map {
                ServiceGroupConfiguration.ServiceConfiguration(
                    service: $0, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup)
            }
            try await ServiceGroup(configuration: .init(services: parts, logger: Logger(label: "broker.demo"))).run()
        }
    }

    /// One of the demo's two servers, a service of the group that runs both.
    private struct DemoPart: Service {
        let body: @Sendable () async throws -> Void
        init(_ body: @escaping @Sendable () async throws -> Void) { self.body = body }
        func run() async throws { try await body() }
    }

    private func runBroker(mocks: DemoTenant.Mocks, idpURL: String) async throws {
        let own = ProcessInfo.processInfo.environment
        var environment = own.merging(DemoTenant.environment(mockBaseURL: idpURL)) { $1 }
        environment["BROKER_DATA_DIR"] = Self.dataDirectory(own)
        // Its embedded PostgreSQL's generated key, never a master key meant for a real database.
        environment["BROKER_MASTER_KEY"] = nil
        let context = try CLIContext(logLevel: .info, environment: environment)
        let configuration = context.configuration
        let secrets = SecretBox(masterKey: try context.masterKey())
        let logger = context.logger
        try await context.withDatabase(migrate: .always, serving: true) { database in
            let apiKey = try await TenantScope.acrossTenants(because: "the demo sets its tenant up as an operator would") {
                try await DemoTenant.prepare(database: database, secrets: secrets, mocks: mocks, actor: context.actor)
            }
            let services = BrokerServices(
                database: database, secrets: secrets, publicURL: configuration.publicURL,
                maxBodyBytes: configuration.maxBodyBytes, appleBaseURL: configuration.appleBaseURL,
                endpoints: configuration.providerEndpoints,
                refreshReuseInterval: configuration.refreshReuseInterval, logger: logger,
                appleCredentialChecks: configuration.appleCredentialChecks, webhookAllowInsecure: configuration.webhookAllowInsecure)
            let banner = try DemoTenant.banner(publicURL: configuration.publicURL, apiKey: apiKey, mocks: mocks, mockBaseURL: idpURL)
            let app = try buildApplication(
                services: services, host: configuration.host, port: configuration.port, limits: configuration.httpLimits,
                lifecycle: [BackgroundTasks(services: services)], logger: logger,
                beforeServing: { FileHandle.standardOutput.write(Data(banner.utf8)) })
            do {
                try await app.runService()
            } catch {
                throw ListenFailure.explain(
                    error, address: "\(configuration.host):\(configuration.port)", setting: "BROKER_PORT (or BROKER_HOST)")
            }
        }
    }
}
