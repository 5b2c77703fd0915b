import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerDemo
import BrokerServer
import Foundation
import Hummingbird
import Logging
import Storage

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the broker with a demo tenant wired to an in-process MockIdP, and print a curl per provider that signs in.",
        discussion: """
            Uses the embedded default (or DATABASE_URL) like 'broker serve', plus a MockIdP playing Apple, Google and \
            Facebook on 127.0.0.1 (a free port unless --idp-port names one). The demo tenant 'demo' gets team DEMO000001, \
            app group com.example.demo, Google client demo-web.apps.googleusercontent.com, Facebook app 1000000000001 \
            (Limited Login on) and a fresh API key on every start. Only 'broker demo' trusts the mock; 'broker serve' never does.
            """)

    @Option(help: "Port of the in-process MockIdP on 127.0.0.1 (default 0: a free port).") var idpPort: Int = 0

    func run() async throws {
        try await runReporting(json: false) {
            let mocks = try DemoTenant.Mocks()
            // The mock first: the broker is configured with its address, which a free port
            // makes known only once it listens.
            let (ports, announce) = AsyncStream.makeStream(of: Int.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { [idpPort] in
                    defer { announce.finish() }
                    do {
                        try await mocks.serve(port: idpPort) { port in announce.yield(port) }
                    } catch {
                        throw ListenFailure.explain(error, address: "127.0.0.1:\(idpPort)", setting: "--idp-port (0 picks a free port)")
                    }
                }
                var iterator = ports.makeAsyncIterator()
                guard let port = await iterator.next() else {
                    try await group.next()
                    return
                }
                group.addTask { try await runBroker(mocks: mocks, idpURL: "http://127.0.0.1:\(port)") }
                // Whichever ends first (Ctrl-C ends both) ends the demo.
                try await group.next()
                group.cancelAll()
            }
        }
    }

    private func runBroker(mocks: DemoTenant.Mocks, idpURL: String) async throws {
        let environment = ProcessInfo.processInfo.environment.merging(DemoTenant.environment(mockBaseURL: idpURL)) { $1 }
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
