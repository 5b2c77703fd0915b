import ArgumentParser
import BrokerCore
import BrokerServer
import Crypto
import Foundation
import Hummingbird
import Logging
import MockIdP
import Storage

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the broker with a demo tenant wired to an in-process MockIdP, and print a curl that signs in.",
        discussion: """
            Uses the embedded default (or DATABASE_URL) like 'broker serve', plus an Apple-shaped MockIdP on \
            127.0.0.1 (a free port unless --idp-port names one). The demo tenant 'demo' gets team DEMO000001, app group com.example.demo \
            and a fresh API key on every start. Only 'broker demo' trusts the mock; 'broker serve' never does.
            """)

    @Option(help: "Port of the in-process MockIdP on 127.0.0.1 (default 0: a free port).") var idpPort: Int = 0

    static let tenant = "demo"
    static let clientID = "com.example.demo"
    static let teamID = "DEMO000001"
    static let keyID = "DEMOKEY001"

    func run() async throws {
        try await runReporting(json: false) {
            let apple = try MockAppleIdP()
            // The mock first: the broker is configured with its address, which a free port
            // makes known only once it listens.
            let (ports, announce) = AsyncStream.makeStream(of: Int.self)
            let mock = MockIdPServer.application(apple: apple, port: idpPort) { port in announce.yield(port) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    defer { announce.finish() }
                    do {
                        try await mock.run()
                    } catch {
                        throw ListenFailure.explain(error, address: "127.0.0.1:\(idpPort)", setting: "--idp-port (0 picks a free port)")
                    }
                }
                var iterator = ports.makeAsyncIterator()
                guard let port = await iterator.next() else {
                    try await group.next()
                    return
                }
                group.addTask { try await runBroker(apple: apple, idpURL: "http://127.0.0.1:\(port)") }
                // Whichever ends first (Ctrl-C ends both) ends the demo.
                try await group.next()
                group.cancelAll()
            }
        }
    }

    private func runBroker(apple: MockAppleIdP, idpURL: String) async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["BROKER_APPLE_BASE_URL"] = idpURL
        let context = try CLIContext(logLevel: .info, environment: environment)
        let configuration = context.configuration
        let secrets = SecretBox(masterKey: try context.masterKey())
        let logger = context.logger
        try await context.withDatabase(migrate: .always) { database in
            let apiKey = try await Self.prepareTenant(database: database, secrets: secrets, apple: apple, actor: context.actor)
            let services = BrokerServices(
                database: database, secrets: secrets, publicURL: configuration.publicURL,
                maxBodyBytes: configuration.maxBodyBytes, appleBaseURL: configuration.appleBaseURL,
                    endpoints: configuration.providerEndpoints,
                refreshReuseInterval: configuration.refreshReuseInterval, logger: logger)
            // The app's nonce: Apple gets its SHA-256 (in the token), the backend posts the raw value.
            let rawNonce = Base64URL.encode(SecureRandom.bytes(16))
            let hashedNonce = SHA256.hash(data: Data(rawNonce.utf8)).map { String(format: "%02x", $0) }.joined()
            let token = try apple.mint(
                apple.claims(
                    subject: "001234.demo.user", audience: Self.clientID, nonce: hashedNonce, email: "demo.user@example.com",
                    lifetime: 86_400))
            let banner = Self.banner(
                publicURL: configuration.publicURL, apiKey: apiKey, token: token, nonce: rawNonce, idpURL: idpURL)
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

    /// Creates (or updates) the demo tenant's Apple setup and returns a fresh API key.
    static func prepareTenant(database: Database, secrets: SecretBox, apple: MockAppleIdP, actor: String) async throws
        -> String
    {
        let tenants = TenantAdmin(database: database, actor: actor)
        if try await database.tenants.find(slug: tenant) == nil {
            _ = try await tenants.create(slug: tenant, name: "Demo tenant", secrets: secrets)
        }
        // A new team key each start, registered with this run's mock, so code exchange works too.
        let p8 = P256.Signing.PrivateKey()
        apple.registerTeam(teamID, keyID: keyID, publicKey: p8.publicKey)
        let appleAdmin = AppleAdmin(database: database, actor: actor)
        _ = try await appleAdmin.setTeam(
            tenant: tenant, teamID: teamID, keyID: keyID, p8PEM: p8.pemRepresentation, secrets: secrets)
        let setup = try await appleAdmin.show(tenant: tenant)
        if !setup.groups.contains(where: { $0.primaryAppID == clientID }) {
            _ = try await appleAdmin.addGroup(tenant: tenant, primaryAppID: clientID)
        }
        let (_, key) = try await APIKeyAdmin(database: database, actor: actor).create(
            tenant: tenant, name: "demo-\(Int(Date().timeIntervalSince1970))", scopes: [])
        return key
    }

    static func banner(publicURL: String, apiKey: String, token: String, nonce: String, idpURL: String) -> String {
        """

        IdentityBroker demo: tenant '\(tenant)', Apple client \(clientID), MockIdP as Apple at \(idpURL).
        API key (new on every start): \(apiKey)

        Sign in (paste this):

        curl -s -X POST \(publicURL)/v1/sign-in/apple \\
          -H 'Authorization: Bearer \(apiKey)' -H 'Content-Type: application/json' \\
          -d '{"client_id":"\(clientID)","identity_token":"\(token)","nonce":"\(nonce)","user":{"name":{"firstName":"Demo","lastName":"User"}}}'

        An identity token signs in once: pasting it again answers token_replayed (restart the demo for another).

        Then: verify the access token with \(publicURL)/t/\(tenant)/.well-known/jwks.json, refresh it with
        POST /v1/sessions/refresh, inspect it with POST /v1/sessions/introspect. Ctrl-C stops everything.

        """
    }
}
