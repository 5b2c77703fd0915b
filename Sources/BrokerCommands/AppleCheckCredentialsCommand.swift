import ArgumentParser
import BrokerApplication
import BrokerCore
import Foundation
import Storage

extension AppleCommand {
    /// `broker apple check-credentials --tenant T [--now] [--json]` (issue 23 §3).
    struct CheckCredentials: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check-credentials",
            abstract: "Check the tenant's stored Apple refresh tokens with Apple now, and report.",
            discussion: """
                broker serve checks each stored Apple refresh token once per \
                BROKER_APPLE_CREDENTIAL_CHECK_INTERVAL (default a day) through Apple's refresh grant. This runs \
                the tenant's due checks now (--now: every token, due or not), at most \
                BROKER_APPLE_MAX_CALLS_PER_SECOND calls a second together with every running instance. \
                Apple's invalid_grant means the person stopped using Sign in with Apple with the app: it is \
                handled as Apple's consent-revoked notification (sessions revoked, identity unlinked, an account \
                left without identity disabled). Apple unreachable or failing is counted as failed and tried \
                again later, never taken for a revocation.
                """)
        @Option(help: "The tenant slug.") var tenant: String
        @Flag(help: "Check every stored token, not only the ones due.") var now = false
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let configuration = context.configuration
                let (actor, tenant, all) = (context.actor, tenant, now)
                let report = try await context.withDatabase { database in
                    let found = try await TenantAdmin(database: database, actor: actor).find(tenant)
                    let services = BrokerServices(
                        database: database, secrets: SecretBox(masterKey: try context.masterKey()), publicURL: configuration.publicURL,
                        appleBaseURL: configuration.appleBaseURL, endpoints: configuration.providerEndpoints)
                    return try await services.appleCredentialChecker(configuration.appleCredentialChecks).checkTenant(found.id, all: all)
                }
                struct Checked: Encodable {
                    let checked: Int
                    let still_valid: Int
                    let revoked: Int
                    let failed: Int
                }
                let output = Checked(checked: report.checked, still_valid: report.valid, revoked: report.revoked, failed: report.failed)
                if options.json {
                    try Output.json(output)
                } else {
                    print(
                        "Checked \(report.checked) Apple refresh token(s) of tenant '\(tenant)': \(report.valid) still valid, "
                            + "\(report.revoked) revoked (handled as consent-revoked), \(report.failed) failed.")
                    if report.failed > 0 {
                        print(
                            "Next: the failed ones are tried again in 10 minutes by broker serve; the log says why (Apple unreachable or refusing the client)."
                        )
                    }
                }
            }
        }
    }
}
