import ArgumentParser
import BrokerApplication
import BrokerCore
import Foundation

/// `broker client ...`: the relying parties of a tenant's OpenID Provider (issue 42 §1,
/// decision 0081).
struct ClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client",
        abstract: "Register, list, show and remove the apps that sign people in through a tenant's OpenID Provider endpoints.",
        discussion: """
            A client is one of the product's own apps (a relying party) using the tenant's \
            authorization code flow at {BROKER_PUBLIC_URL}/t/{tenant}. A confidential client (a web \
            backend) gets a secret, printed once and stored only as a hash; it authenticates with \
            client_secret_basic or client_secret_post. A public client (--public: a mobile or \
            single-page app) has no secret and must use PKCE. Redirect URIs are compared exactly, \
            character for character: https, http only on 127.0.0.1 or [::1] with --allow-loopback \
            (a public client's loopback port is not compared, RFC 8252 §7.3), and for a public \
            client a private-use scheme in reverse domain order (com.example.app:/callback). \
            Every change is in the audit log. docs/openid-provider.md has the whole picture.
            """,
        subcommands: [Create.self, List.self, Show.self, Remove.self, RotateSecret.self]
    )

    /// The client as `--json` prints it (never a secret, never its hash).
    struct ClientJSON: Encodable {
        let client_id: String
        let name: String
        let type: String
        let redirect_uris: [String]
        let post_logout_redirect_uris: [String]
        let allow_loopback: Bool
        let created_at: Date
        let secret_rotated_at: Date?
        /// Only when the secret was just made (create, rotate-secret).
        let client_secret: String?

        init(_ client: OAuthClient, secret: String? = nil) {
            client_id = client.clientID
            name = client.name
            type = client.isPublic ? "public" : "confidential"
            redirect_uris = client.redirectURIs
            post_logout_redirect_uris = client.postLogoutRedirectURIs
            allow_loopback = client.allowLoopback
            created_at = client.createdAt
            secret_rotated_at = client.secretRotatedAt
            client_secret = secret
        }

        enum CodingKeys: String, CodingKey {
            case client_id, name, type, redirect_uris, post_logout_redirect_uris, allow_loopback, created_at, secret_rotated_at
            case client_secret
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(client_id, forKey: .client_id)
            try container.encode(name, forKey: .name)
            try container.encode(type, forKey: .type)
            try container.encode(redirect_uris, forKey: .redirect_uris)
            try container.encode(post_logout_redirect_uris, forKey: .post_logout_redirect_uris)
            try container.encode(allow_loopback, forKey: .allow_loopback)
            try container.encode(created_at, forKey: .created_at)
            try container.encode(secret_rotated_at, forKey: .secret_rotated_at)
            try container.encodeIfPresent(client_secret, forKey: .client_secret)
        }
    }

    /// The tenant and the client a command names.
    struct Target: ParsableArguments {
        @Option(help: "The tenant slug.") var tenant: String
        @Argument(help: "The client id (from 'broker client list').") var clientID: String
    }

    /// Runs `action` on the database the environment names, as the command line's user.
    static func withAdmin<T: Sendable>(_ action: @Sendable (ClientAdmin) async throws -> T) async throws -> T {
        let context = try CLIContext()
        return try await context.withDatabase { database in try await action(ClientAdmin(database: database, actor: context.actor)) }
    }

    static func print(_ client: OAuthClient) {
        Swift.print("\(client.clientID) (\(client.isPublic ? "public" : "confidential")): \(Output.text(client.name))")
        for uri in client.redirectURIs { Swift.print("  redirect uri:              \(Output.text(uri))") }
        for uri in client.postLogoutRedirectURIs { Swift.print("  post-logout redirect uri:  \(Output.text(uri))") }
        Swift.print("  loopback http:             \(client.allowLoopback ? "allowed" : "no")")
        Swift.print("  created:                   \(Output.date(client.createdAt))")
        if let rotated = client.secretRotatedAt { Swift.print("  secret rotated:            \(Output.date(rotated))") }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a client; prints its client_id and, for a confidential client, its secret once.")
        @Option(help: "The tenant slug.") var tenant: String
        @Option(help: "A name to tell clients apart (1-100 characters).") var name: String
        @Option(name: .customLong("redirect-uri"), help: "A URI the code may be sent to, exactly as the app sends it (repeatable).")
        var redirectURIs: [String] = []
        @Option(name: .customLong("post-logout-redirect-uri"), help: "A URI the person may be sent to after logout (repeatable).")
        var postLogoutRedirectURIs: [String] = []
        @Flag(help: "A public client (mobile or single-page app): no secret, PKCE required.") var `public` = false
        @Flag(help: "Allow http redirect URIs on 127.0.0.1 and [::1] (a native app's loopback listener).") var allowLoopback = false
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let issued = try await ClientCommand.withAdmin { admin in
                    try await admin.create(
                        tenant: tenant, name: name, redirectURIs: redirectURIs, postLogoutRedirectURIs: postLogoutRedirectURIs,
                        isPublic: `public`, allowLoopback: allowLoopback)
                }
                if options.json {
                    try Output.json(ClientJSON(issued.client, secret: issued.secret))
                } else {
                    Swift.print("client_id: \(issued.client.clientID)")
                    if let secret = issued.secret { Swift.print("client_secret: \(secret)") }
                    Output.stderr(
                        issued.secret == nil
                            ? "Public client registered for tenant '\(tenant)': it has no secret and must use PKCE."
                            : "Confidential client registered for tenant '\(tenant)'. Store the secret now: it is not shown again.")
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a tenant's clients (never a secret).")
        @Option(help: "The tenant slug.") var tenant: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let clients = try await ClientCommand.withAdmin { admin in
                    try await admin.list(tenant: tenant)
                }
                if options.json {
                    try Output.json(clients.map { ClientJSON($0) })
                } else if clients.isEmpty {
                    Swift.print(
                        "Tenant '\(tenant)' has no clients. Register one with: broker client create --tenant \(tenant) --name web --redirect-uri URI"
                    )
                } else {
                    Output.table(
                        ["CLIENT ID", "TYPE", "NAME", "REDIRECT URIS", "CREATED"],
                        clients.map {
                            [
                                $0.clientID, $0.isPublic ? "public" : "confidential", $0.name, $0.redirectURIs.joined(separator: " "),
                                Output.date($0.createdAt),
                            ]
                        })
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one client (never its secret).")
        @OptionGroup var target: Target
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let client = try await ClientCommand.withAdmin { admin in
                    try await admin.show(tenant: target.tenant, clientID: target.clientID)
                }
                if options.json { try Output.json(ClientJSON(client)) } else { ClientCommand.print(client) }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a client; its redirect URIs and secret stop working at once.")
        @OptionGroup var target: Target
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let client = try await ClientCommand.withAdmin { admin in
                    try await admin.remove(tenant: target.tenant, clientID: target.clientID)
                }
                if options.json {
                    try Output.json(ClientJSON(client))
                } else {
                    Swift.print("Client \(client.clientID) (\(Output.text(client.name))) is removed from tenant '\(target.tenant)'.")
                }
            }
        }
    }

    struct RotateSecret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-secret",
            abstract: "Give a confidential client a new secret, printed once; the old one stops working at once.")
        @OptionGroup var target: Target
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let issued = try await ClientCommand.withAdmin { admin in
                    try await admin.rotateSecret(tenant: target.tenant, clientID: target.clientID)
                }
                if options.json {
                    try Output.json(ClientJSON(issued.client, secret: issued.secret))
                } else {
                    Swift.print("client_secret: \(issued.secret ?? "")")
                    Output.stderr("The secret of \(issued.client.clientID) is replaced. Store it now: it is not shown again.")
                }
            }
        }
    }
}
