import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Storage

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account",
        abstract: "Show, disable, enable and delete accounts.",
        discussion: """
            A disabled account is refused everywhere: sign-in (403 account_disabled), refresh, introspection \
            (inactive), linking and unlinking. Disabling ends its sessions; enabling lets it sign in again \
            (ended sessions stay ended). Deleting ends its sessions, deletes its identities and personal data, \
            keeps a tombstone and queues the revocation of Apple's refresh tokens (made by broker serve). \
            All are recorded in the audit log (account.disabled, account.enabled, account.deleted).
            """,
        subcommands: [Show.self, Disable.self, Enable.self, Delete.self]
    )

    /// The JSON shape of an account in CLI output.
    struct AccountJSON: Encodable {
        struct Name: Encodable {
            let givenName: String?
            let familyName: String?
            enum CodingKeys: String, CodingKey {
                case givenName = "given_name"
                case familyName = "family_name"
            }
        }

        struct IdentityJSON: Encodable {
            let id: String
            let provider: String
            let providerScope: String
            let subject: String
            let email: String?
            let emailVerified: Bool
            let createdAt: Date
            let lastSignInAt: Date?
            enum CodingKeys: String, CodingKey {
                case id, provider, subject, email
                case providerScope = "provider_scope"
                case emailVerified = "email_verified"
                case createdAt = "created_at"
                case lastSignInAt = "last_sign_in_at"
            }

            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(id, forKey: .id)
                try container.encode(provider, forKey: .provider)
                try container.encode(providerScope, forKey: .providerScope)
                try container.encode(subject, forKey: .subject)
                try container.encode(email, forKey: .email)  // null when unknown
                try container.encode(emailVerified, forKey: .emailVerified)
                try container.encode(createdAt, forKey: .createdAt)
                try container.encode(lastSignInAt, forKey: .lastSignInAt)
            }
        }

        let id: String
        let tenant: String
        let status: String
        let email: String?
        let emailVerified: Bool
        let isPrivateEmail: Bool
        let name: Name?
        let createdAt: Date
        let lastSeenAt: Date?
        let identities: [IdentityJSON]
        /// Only for disable and enable: whether the status changed, and the sessions it ended.
        let changed: Bool?
        let revokedSessions: Int?

        enum CodingKeys: String, CodingKey {
            case id, tenant, status, email, name, identities, changed
            case emailVerified = "email_verified"
            case isPrivateEmail = "is_private_email"
            case createdAt = "created_at"
            case lastSeenAt = "last_seen_at"
            case revokedSessions = "revoked_sessions"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(tenant, forKey: .tenant)
            try container.encode(status, forKey: .status)
            // Always present, null when unknown (as in the API's account).
            try container.encode(email, forKey: .email)
            try container.encode(emailVerified, forKey: .emailVerified)
            try container.encode(isPrivateEmail, forKey: .isPrivateEmail)
            try container.encode(name, forKey: .name)
            try container.encode(createdAt, forKey: .createdAt)
            try container.encode(lastSeenAt, forKey: .lastSeenAt)
            try container.encode(identities, forKey: .identities)
            try container.encodeIfPresent(changed, forKey: .changed)
            try container.encodeIfPresent(revokedSessions, forKey: .revokedSessions)
        }

        init(_ view: AccountView, tenant: String, change: AccountStatusChange? = nil) {
            let account = view.account
            id = account.id.lowercasedString
            self.tenant = tenant
            status = account.status.rawValue
            email = account.email
            emailVerified = account.emailVerified
            isPrivateEmail = account.isPrivateEmail
            name = account.name.isEmpty ? nil : Name(givenName: account.name.givenName, familyName: account.name.familyName)
            createdAt = account.createdAt
            lastSeenAt = account.lastSeenAt
            identities = view.identities.map {
                IdentityJSON(
                    id: $0.id.lowercasedString, provider: $0.provider, providerScope: $0.providerScope, subject: $0.subject,
                    email: $0.email, emailVerified: $0.emailVerified, createdAt: $0.createdAt, lastSignInAt: $0.lastSignInAt)
            }
            changed = change?.changed
            revokedSessions = change?.revokedSessions
        }

        func printText() {
            let fullName = [name?.givenName, name?.familyName].compactMap { $0 }.joined(separator: " ")
            print(
                """
                account:     \(id)
                tenant:      \(tenant)
                status:      \(status)
                email:       \(email.map { "\(Output.text($0))\(emailVerified ? " (verified)" : "")" } ?? "-")
                name:        \(fullName.isEmpty ? "-" : Output.text(fullName))
                created:     \(Output.date(createdAt))
                last seen:   \(Output.date(lastSeenAt))
                identities:
                """)
            Output.table(
                ["PROVIDER", "SUBJECT", "IDENTITY", "LAST SIGN-IN"],
                identities.map {
                    [$0.provider, $0.subject, $0.id, Output.date($0.lastSignInAt)]
                })
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show an account, its status and its identities (no secrets).")
        @Option(help: "The tenant slug.") var tenant: String
        @Argument(help: "The account id (account.id of a sign-in response).") var id: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let (tenant, id) = (tenant, id)
                let view = try await context.withDatabase { database in
                    let found = try await TenantAdmin(database: database, actor: context.actor).find(tenant)
                    return try await AccountService(database: database).show(tenantID: found.id, accountID: id)
                }
                let output = AccountJSON(view, tenant: tenant)
                if options.json { try Output.json(output) } else { output.printText() }
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disable an account: its sessions end and it is refused everywhere until enabled again.")
        @Option(help: "The tenant slug.") var tenant: String
        @Argument(help: "The account id.") var id: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await AccountCommand.setStatus(tenant: tenant, id: id, disabled: true, options: options)
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Enable a disabled account: it can sign in again (its ended sessions stay ended).")
        @Option(help: "The tenant slug.") var tenant: String
        @Argument(help: "The account id.") var id: String
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await AccountCommand.setStatus(tenant: tenant, id: id, disabled: false, options: options)
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete an account: sessions end, identities and personal data go, Apple's tokens are queued for revocation.",
            discussion: """
                The same deletion as DELETE /v1/accounts/{id}. It cannot be undone: a later sign-in of the \
                person creates a new account. Apple revocations are made by the worker of broker serve; \
                see them with broker apple revocations list.
                """)
        @Option(help: "The tenant slug.") var tenant: String
        @Argument(help: "The account id.") var id: String
        @Option(help: "Why, kept on the tombstone and in the audit log.") var reason: String = AccountDeletionService.requestedReason
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let (actor, tenant, id, reason) = (context.actor, tenant, id, reason)
                guard !reason.isEmpty, FreeText.fits(reason, characters: 200) else {
                    throw BrokerError.invalidArgument(
                        "--reason must be one line of 1 to 200 characters.", hint: "For example: --reason \"user request by email\".")
                }
                try FreeText.require(reason, option: "--reason", hint: "For example: --reason \"user request by email\".")
                let deletion = try await context.withDatabase { database in
                    let found = try await TenantAdmin(database: database, actor: actor).find(tenant)
                    let service = AccountDeletionService(database: database, secrets: SecretBox(masterKey: try context.masterKey()))
                    return try await service.delete(tenantID: found.id, accountID: id, reason: reason, actor: actor)
                }
                struct Deleted: Encodable {
                    let deleted = true
                    let account_id: String
                    let revoked_sessions: Int
                    let deleted_identities: Int
                    let apple_revocations_queued: Int
                }
                let output = Deleted(
                    account_id: id.lowercased(), revoked_sessions: deletion.revokedSessions, deleted_identities: deletion.deletedIdentities,
                    apple_revocations_queued: deletion.appleRevocationsQueued)
                if options.json {
                    try Output.json(output)
                } else {
                    print(
                        "Deleted account \(output.account_id) of tenant '\(tenant)': ended \(deletion.revokedSessions) session(s), "
                            + "deleted \(deletion.deletedIdentities) identity(ies), queued \(deletion.appleRevocationsQueued) Apple revocation(s)."
                    )
                    if deletion.appleRevocationsQueued > 0 {
                        print("Next: broker serve makes the revocations; broker apple revocations list --tenant \(tenant) shows them.")
                    }
                }
            }
        }
    }

    static func setStatus(tenant: String, id: String, disabled: Bool, options: CommonOptions) async throws {
        try await runReporting(json: options.json) {
            let context = try CLIContext()
            let actor = context.actor
            let change = try await context.withDatabase { database in
                let found = try await TenantAdmin(database: database, actor: actor).find(tenant)
                let service = AccountService(database: database)
                return disabled
                    ? try await service.disable(tenantID: found.id, accountID: id, actor: actor)
                    : try await service.enable(tenantID: found.id, accountID: id, actor: actor)
            }
            let output = AccountJSON(change.view, tenant: tenant, change: change)
            if options.json {
                try Output.json(output)
            } else if !change.changed {
                print("Account \(output.id) of tenant '\(tenant)' is already \(output.status); nothing changed.")
            } else if disabled {
                print("Disabled account \(output.id) of tenant '\(tenant)'; ended \(change.revokedSessions) session(s).")
                print("Next: broker account enable --tenant \(tenant) \(output.id) lets it sign in again.")
            } else {
                print("Enabled account \(output.id) of tenant '\(tenant)': it can sign in again.")
            }
        }
    }
}
