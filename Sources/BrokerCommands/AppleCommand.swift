import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Storage

struct AppleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apple",
        abstract: "Configure Sign in with Apple for a tenant: team key, app groups, clients.",
        discussion: """
            Apple user ids (sub) are scoped to the team: every App ID and Services ID of the tenant's \
            team yields the same account for one person. An app group is a primary App ID with its \
            grouped App IDs and Services IDs.
            """,
        subcommands: [Team.self, Group.self, Client.self, Show.self, Revocations.self, CheckCredentials.self, Transfer.self]
    )

    /// `--platforms` of an Apple client; nil when not given (the kind's default).
    static func platforms(_ text: String?) throws -> [ProviderPlatform]? {
        guard let text else { return nil }
        guard let platforms = ProviderPlatform.parseList(text) else {
            throw BrokerError.invalidArgument(
                "--platforms '\(text.prefix(80))' is not a list of platforms.",
                hint: "An App ID: --platforms ios, macos or ios,macos. A Services ID: --platforms web, android or web,android.")
        }
        return platforms
    }

    struct Team: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Manage the tenant's Apple team.", subcommands: [Set.self])

        struct Set: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Set a team's id, key id and .p8 key (stored encrypted) used to exchange authorization codes.",
                discussion: """
                    Setting the same --team-id again replaces its key; another --team-id adds a team (a tenant holds \
                    several during a team transfer: say which one a group belongs to with group add/move --team-id).
                    """)
            @Option(help: "The tenant slug.") var tenant: String
            @Option(help: "The 10-character Apple team id.") var teamId: String
            @Option(help: "The 10-character id of the Sign in with Apple key.") var keyId: String
            @Option(help: "The AuthKey_<KEYID>.p8 file downloaded from Apple.") var privateKeyFile: String
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    let context = try CLIContext()
                    let secrets = SecretBox(masterKey: try context.masterKey())
                    let pem: String
                    do {
                        pem = try String(contentsOfFile: privateKeyFile, encoding: .utf8)
                    } catch {
                        throw BrokerError.invalidArgument("Cannot read the private key file '\(privateKeyFile)'.")
                    }
                    let team = try await context.withDatabase { database in
                        try await AppleAdmin(database: database, actor: context.actor).setTeam(
                            tenant: tenant, teamID: teamId, keyID: keyId, p8PEM: pem, secrets: secrets)
                    }
                    if options.json {
                        try Output.json(["team_id": team.teamID, "key_id": team.keyID ?? ""])
                    } else {
                        print("Apple team \(team.teamID) (key \(team.keyID ?? "-")) is set for tenant '\(tenant)'.")
                    }
                }
            }
        }
    }

    struct Group: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Manage app groups.", subcommands: [Add.self, Move.self])

        struct Move: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Move an app group onto another of the tenant's teams, once Apple has transferred the app.",
                discussion: """
                    Run it when the app is transferred (after broker apple transfer export): from then on the group's \
                    sign-ins carry the new team's user ids, and a person's first one links to their account through \
                    transfer_sub. Then run broker apple transfer import.
                    """)
            @Option(help: "The tenant slug.") var tenant: String
            @Option(help: "The group's primary App ID.") var group: String
            @Option(help: "The team that now owns the app (set with broker apple team set).") var teamId: String
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    let context = try CLIContext()
                    let (actor, tenant, group, teamID) = (context.actor, tenant, group, teamId)
                    try await context.withDatabase { database in
                        try await AppleAdmin(database: database, actor: actor).moveGroup(
                            tenant: tenant, primaryAppID: group, teamID: teamID)
                    }
                    if options.json {
                        try Output.json(["primary_app_id": group, "team_id": teamID])
                    } else {
                        print("App group '\(group)' of '\(tenant)' now belongs to team \(teamID).")
                    }
                }
            }
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create an app group; its primary App ID becomes a client of kind 'app'.",
                discussion: """
                    The primary App ID counts for iOS (App Store guideline 4.8, 'broker policy check') unless \
                    --platforms says otherwise: ios, macos or ios,macos.
                    """)
            @Option(help: "The tenant slug.") var tenant: String
            @Option(help: "The primary App ID (bundle id).") var primaryAppId: String
            @Option(help: "Where the primary App ID offers Sign in with Apple: ios, macos or ios,macos (default ios).")
            var platforms: String?
            @Option(help: "The team id, when the tenant has several teams.") var teamId: String?
            @Flag(
                inversion: .prefixedNo,
                help: "Sign-ins through the primary App ID must send a nonce (400 nonce_required otherwise).")
            var nonceRequired = true
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    let platforms = try AppleCommand.platforms(platforms)
                    let context = try CLIContext()
                    let group = try await context.withDatabase { database in
                        try await AppleAdmin(database: database, actor: context.actor).addGroup(
                            tenant: tenant, primaryAppID: primaryAppId, teamID: teamId, nonceRequired: nonceRequired,
                            platforms: platforms)
                    }
                    if options.json {
                        try Output.json(["id": group.id.lowercasedString, "primary_app_id": group.primaryAppID])
                    } else {
                        print("App group '\(group.primaryAppID)' created for tenant '\(tenant)'.")
                    }
                }
            }
        }
    }

    struct Client: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Manage client ids.", subcommands: [Add.self, Change.self, Remove.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a grouped App ID (--kind app) or a Services ID (--kind service) to a group.",
                discussion: """
                    A client id belongs to one group only, and a Services ID may not equal an App ID.

                    --platforms says where the client offers Sign in with Apple, for App Store guideline 4.8 \
                    ('broker policy check'): an App ID on ios and/or macos (default ios), a Services ID on web \
                    and/or android (default web,android).
                    """)
            @Option(help: "The tenant slug.") var tenant: String
            @Option(help: "The group's primary App ID.") var group: String
            @Option(help: "The bundle id or Services ID.") var clientId: String
            @Option(help: "app or service.") var kind: String
            @Option(help: "How the token nonce is compared: sha256 (the app sent SHA-256 of the raw nonce) or raw.")
            var nonce: String = "sha256"
            @Option(help: "Where it is offered: ios,macos for an App ID (default ios); web,android for a Services ID (default both).")
            var platforms: String?
            @Option(help: "A redirect URI registered with Apple for this Services ID (repeatable).")
            var redirectUri: [String] = []
            @Option(help: "A return URL of the web flow (repeatable).") var returnUrl: [String] = []
            @Flag(inversion: .prefixedNo, help: "Sign-ins through this client must send a nonce (400 nonce_required otherwise).")
            var nonceRequired = true
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    guard let kind = AppleClientKind(rawValue: kind) else {
                        throw BrokerError.invalidArgument("--kind must be app or service.")
                    }
                    guard let nonceMode = NonceMode(rawValue: nonce) else {
                        throw BrokerError.invalidArgument("--nonce must be sha256 or raw.")
                    }
                    let platforms = try AppleCommand.platforms(platforms)
                    if let platforms { try kind.validatePlatforms(platforms) }
                    let context = try CLIContext()
                    let client = try await context.withDatabase { database in
                        try await AppleAdmin(database: database, actor: context.actor).addClient(
                            tenant: tenant, group: group, clientID: clientId, kind: kind, nonceMode: nonceMode,
                            redirectURIs: redirectUri, returnURLs: returnUrl, nonceRequired: nonceRequired, platforms: platforms)
                    }
                    if options.json {
                        try Output.json(AppleShowJSON.ClientJSON(client, group: group))
                    } else {
                        print(
                            "Client '\(client.clientID)' (\(client.kind.rawValue) on \(client.platforms.map(\.rawValue).joined(separator: ",")), nonce \(client.nonceMode.rawValue)\(client.nonceRequired ? ", required" : ", optional")) added to group '\(group)'."
                        )
                    }
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Remove a client id.",
                discussion: """
                    A group's primary App ID is refused while other clients are in its group: remove those \
                    first. Removed alone, it takes its group with it.

                    Refused, with nothing changed, when the client is Sign in with Apple's last on iOS or \
                    macOS and App Store Review Guideline 4.8 relies on it there ('broker policy check'); \
                    --force removes it anyway and records the violation in the audit log.
                    """)
            @Option(help: "The tenant slug.") var tenant: String
            @Option(help: "The bundle id or Services ID.") var clientId: String
            @Flag(help: "Remove it even if it breaks App Store Review Guideline 4.8 (recorded in the audit log).")
            var force = false
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    let context = try CLIContext()
                    let removed = try await context.withDatabase { database in
                        let removed = try await AppleAdmin(database: database, actor: context.actor).removeClient(
                            tenant: tenant, clientID: clientId, force: force)
                        if force, !options.json { try await PolicyCommand.warnViolations(tenant: tenant, database: database) }
                        return removed
                    }
                    if options.json {
                        struct Removed: Encodable {
                            let client_id: String
                            let removed: Bool
                            let group_removed: Bool
                        }
                        try Output.json(Removed(client_id: removed.client.clientID, removed: true, group_removed: removed.groupRemoved))
                    } else {
                        print(
                            "Client '\(removed.client.clientID)' removed from tenant '\(tenant)'."
                                + (removed.groupRemoved
                                    ? " It was its group's primary App ID, alone in it: the group was removed too." : ""))
                    }
                }
            }
        }

        struct Change: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set",
                abstract: "Change a client's settings.",
                discussion:
                    "--nonce-required: sign-ins through the client must send the raw nonce (400 nonce_required otherwise); --no-nonce-required: a nonce is checked only when sent."
            )
            @Option(help: "The tenant slug.") var tenant: String
            @Option(help: "The bundle id or Services ID.") var clientId: String
            @Flag(inversion: .prefixedNo, help: "Whether sign-ins through this client must send a nonce.")
            var nonceRequired: Bool
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    let context = try CLIContext()
                    let client = try await context.withDatabase { database in
                        try await AppleAdmin(database: database, actor: context.actor).setNonceRequired(
                            tenant: tenant, clientID: clientId, nonceRequired)
                    }
                    if options.json {
                        try Output.json(AppleShowJSON.ClientJSON(client, group: nil))
                    } else {
                        print(
                            "Client '\(client.clientID)' \(client.nonceRequired ? "requires a nonce" : "takes a nonce when one is sent").")
                    }
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the tenant's team, groups and clients (with their platforms).")
        @Option(help: "The tenant slug.") var tenant: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let setup = try await context.withDatabase { database in
                    try await AppleAdmin(database: database, actor: context.actor).show(tenant: tenant)
                }
                let output = AppleShowJSON(setup)
                if options.json { try Output.json(output) } else { output.printText(tenant: tenant) }
            }
        }
    }
}

/// `broker apple show` output.
struct AppleShowJSON: Encodable {
    struct TeamJSON: Encodable {
        let team_id: String
        let key_id: String?
        let has_private_key: Bool
    }

    struct ClientJSON: Encodable {
        let client_id: String
        let kind: String
        let group: String?
        let nonce: String
        let nonce_required: Bool
        let redirect_uris: [String]
        let return_urls: [String]
        let platforms: [String]

        init(_ client: AppleClient, group: String?) {
            client_id = client.clientID
            kind = client.kind.rawValue
            self.group = group
            nonce = client.nonceMode.rawValue
            nonce_required = client.nonceRequired
            redirect_uris = client.redirectURIs
            return_urls = client.returnURLs
            platforms = client.platforms.map(\.rawValue)
        }
    }

    struct GroupJSON: Encodable {
        let primary_app_id: String
        let team_id: String?
        let clients: [ClientJSON]
    }

    let teams: [TeamJSON]
    let groups: [GroupJSON]

    init(_ setup: AppleAdmin.Setup) {
        teams = setup.teams.map { TeamJSON(team_id: $0.teamID, key_id: $0.keyID, has_private_key: $0.sealedPrivateKey != nil) }
        groups = setup.groups.map { group in
            GroupJSON(
                primary_app_id: group.primaryAppID,
                team_id: setup.teams.first { $0.id == group.teamRef }?.teamID,
                clients: setup.clients.filter { $0.groupID == group.id }.map { ClientJSON($0, group: group.primaryAppID) })
        }
    }

    func printText(tenant: String) {
        if teams.isEmpty { print("No Apple team for '\(tenant)'. Set one: broker apple team set --tenant \(tenant) ...") }
        for team in teams {
            print("team \(team.team_id)  key \(team.key_id ?? "-")  .p8 \(team.has_private_key ? "stored (encrypted)" : "missing")")
        }
        for group in groups {
            print("group \(group.primary_app_id) (team \(group.team_id ?? "-"))")
            for client in group.clients {
                var line =
                    "  \(client.kind.padding(toLength: 7, withPad: " ", startingAt: 0)) \(client.client_id)  platforms \(client.platforms.joined(separator: ","))  nonce \(client.nonce)\(client.nonce_required ? " (required)" : "")"
                if !client.redirect_uris.isEmpty { line += "  redirect \(client.redirect_uris.joined(separator: ","))" }
                if !client.return_urls.isEmpty { line += "  return \(client.return_urls.joined(separator: ","))" }
                print(Output.text(line))
            }
        }
    }
}
