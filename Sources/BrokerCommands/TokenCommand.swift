import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Logging
import Providers
import Storage

struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Debug provider tokens.", subcommands: [Verify.self])

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a provider identity token and print every check with its verdict.",
            discussion: """
                Runs the provider's own verification policy, the one sign-in uses. Exit status 0 when the \
                token is valid, 1 when it is not. Without --jwks the provider's published keys are fetched \
                (Apple: BROKER_APPLE_BASE_URL/auth/keys; Google: BROKER_GOOGLE_JWKS_URL; Facebook Limited Login: \
                BROKER_FACEBOOK_JWKS_URL; an OpenID Connect provider: its jwks_url or discovered jwks_uri). \
                With --tenant the tenant's settings of the provider decide the policy (an OpenID Connect \
                provider needs it) and, without --audience, the tenant's client ids are the accepted \
                audiences. Without --tenant and --audience the audience (and azp) is shown but not \
                compared; without --nonce the nonce is not compared.
                """)

        @Option(help: "The provider id: apple, google, facebook (a Limited Login token) or a tenant's own (with --tenant).")
        var provider: String = "apple"
        @Option(help: "The tenant whose settings of the provider decide the policy.") var tenant: String?
        @Option(help: "The token, or @FILE to read it from a file.") var token: String
        @Option(help: "A client id (Facebook: the app id) the token must be issued to (repeatable).") var audience: [String] = []
        @Option(help: "A JWKS file or URL to verify with.") var jwks: String?
        @Option(help: "Verify as of this ISO 8601 instant (e.g. 2024-11-03T10:00:00Z) instead of now.") var at: String?
        @Option(help: "The raw nonce the app generated.") var nonce: String?
        @Option(help: "Apple: how the nonce is compared, sha256 or raw (Google and Facebook put the raw nonce).")
        var nonceMode: String = "sha256"
        @Option(help: "Google: the Workspace domain the token's hd must name.") var hostedDomain: String?
        @Option(
            help:
                "Another client of the tenant the token's azp may name (repeatable; e.g. the Android client of a token issued to the web client)."
        )
        var authorizedParty: [String] = []
        @Flag(name: .long, help: "Print machine-readable JSON.") var json = false

        func run() async throws {
            try await runReporting(json: json) {
                guard let name = ProviderID(rawValue: provider) else {
                    throw BrokerError.invalidArgument(
                        "'\(provider.prefix(40))' is not a provider id.",
                        hint: "Use --provider \(InstalledProviderTypes.reservedIDs()) or a tenant's own id with --tenant.")
                }
                if hostedDomain != nil, name != .google {
                    throw BrokerError.invalidArgument("--hosted-domain applies to Google tokens only.", hint: "Add --provider google.")
                }
                let context = try CLIContext(logLevel: .error)
                let configuration = context.configuration
                let jwt = try readToken()
                let instant = try parseInstant()
                guard let mode = NonceMode(rawValue: nonceMode) else {
                    throw BrokerError.invalidArgument("--nonce-mode must be sha256 or raw.")
                }
                var logger = Logger(label: "broker.token")
                logger.logLevel = .error
                // The tenant's settings: the type of its id, and the client ids it accepts.
                var settings: ProviderConfiguration?
                var tenantAudiences: [String] = []
                if let tenant {
                    (settings, tenantAudiences) = try await context.withDatabase { database in
                        let status = try await ProviderAdmin(database: database, actor: context.actor).show(tenant: tenant, provider: name)
                        let found = try await database.providerConfigs.find(
                            tenantID: try await TenantAdmin(database: database, actor: context.actor).find(tenant).id, provider: name)
                        return (found, status.appID.map { [$0] } ?? status.clientIDs)
                    }
                } else if name.reservedType == nil {
                    throw BrokerError.invalidArgument(
                        "'\(name.rawValue)' is a tenant's own provider: its settings decide the policy.", hint: "Add --tenant <slug>.")
                }
                let type = name.reservedType ?? settings?.type ?? .oidc
                let registry = InstalledProviderTypes.registry(
                    secrets: SecretBox(masterKey: MasterKey.generate().key), endpoints: configuration.providerEndpoints, logger: logger)
                guard let descriptor = registry[type]?.descriptor else {
                    throw BrokerError.invalidArgument(
                        "Provider '\(name.rawValue)' has a type this broker does not know (\(type.rawValue)).")
                }
                let source: JWKSCache.Source
                if let jwks, jwks.hasPrefix("http://") || jwks.hasPrefix("https://") {
                    source = .url(jwks)
                } else if let jwks {
                    guard let data = FileManager.default.contents(atPath: jwks) else {
                        throw BrokerError.invalidArgument("Cannot read the JWKS file '\(jwks)'.")
                    }
                    source = .fixed(data)
                } else if let location = descriptor.keySet(settings, configuration.providerEndpoints) {
                    source = .url(location.url)
                } else {
                    throw BrokerError.invalidArgument("No key set is known for '\(name.rawValue)'.", hint: "Pass --jwks FILE|URL.")
                }
                let audiences = audience.isEmpty ? tenantAudiences : audience
                let options = TokenCheckOptions(
                    audiences: audiences.isEmpty ? nil : Set(audiences), rawNonce: nonce,
                    nonceMode: name == .apple ? mode : .raw, hostedDomain: hostedDomain ?? settings?.hostedDomain,
                    authorizedParties: authorizedParty.isEmpty || audiences.isEmpty ? nil : Set(audiences + authorizedParty))
                let (policy, expectation) = descriptor.tokenPolicy(settings, options)
                let verifier = IdentityTokenVerifier(
                    policy: policy,
                    keys: JWKSCache(source: source, logger: logger, fetchTimeout: .seconds(configuration.providerEndpoints.timeoutSeconds)))
                let report = await verifier.check(jwt, nonce: expectation, at: instant)
                try print(report)
                if !report.isValid { throw ExitCode.failure }
            }
        }

        func readToken() throws -> String {
            guard token.hasPrefix("@") else { return token.trimmingCharacters(in: .whitespacesAndNewlines) }
            let path = String(token.dropFirst())
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw BrokerError.invalidArgument("Cannot read the token file '\(path)'.")
            }
            return text.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func parseInstant() throws -> Date {
            guard let at else { return Date() }
            guard let date = ISO8601DateFormatter().date(from: at) else {
                throw BrokerError.invalidArgument("--at must be an ISO 8601 instant such as 2024-11-03T10:00:00Z.")
            }
            return date
        }

        func print(_ report: VerificationReport) throws {
            if json {
                struct Check: Encodable {
                    let check: String
                    let passed: Bool
                    let detail: String
                }
                struct Body: Encodable {
                    let valid: Bool
                    let code: String?
                    let subject: String?
                    let checks: [Check]
                }
                try Output.json(
                    Body(
                        valid: report.isValid, code: report.failure?.code, subject: report.claims?.subject,
                        checks: report.checks.map { Check(check: $0.name, passed: $0.passed, detail: $0.detail) }))
                return
            }
            for check in report.checks {
                Swift.print(
                    "\(check.passed ? "ok  " : "FAIL") \(check.name.padding(toLength: 10, withPad: " ", startingAt: 0)) \(Output.text(check.detail))"
                )
            }
            if let failure = report.failure {
                Swift.print("invalid: \(failure.code)")
            } else {
                Swift.print("valid: sub \(Output.text(report.claims?.subject ?? "-"))")
            }
        }
    }
}
