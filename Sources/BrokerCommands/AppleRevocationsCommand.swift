import ArgumentParser
import BrokerApplication
import BrokerCore
import Foundation
import Storage

extension AppleCommand {
    /// `broker apple revocations list|retry` (issue 23 §2).
    struct Revocations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apple refresh-token revocations queued by account deletions.",
            discussion: """
                Deleting an account queues one revocation per Apple identity that held Apple's refresh token. \
                The worker of broker serve calls Apple's /auth/revoke, retrying with backoff (30 s doubling to \
                1 h) for about a day; then the revocation is failed until retried.
                """,
            subcommands: [List.self, Retry.self])

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the tenant's revocations, oldest first (never a token).")
            @Option(help: "The tenant slug.") var tenant: String
            @Option(help: "Only this status: pending, failed or done.") var status: String?
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    let context = try CLIContext()
                    let filter = try status.map(Revocations.status)
                    let (actor, tenant) = (context.actor, tenant)
                    let revocations = try await context.withDatabase { database in
                        let found = try await TenantAdmin(database: database, actor: actor).find(tenant)
                        return try await database.appleRevocations.list(tenantID: found.id, status: filter)
                    }
                    let output = revocations.map(RevocationJSON.init)
                    if options.json {
                        try Output.json(output)
                    } else if output.isEmpty {
                        print("Tenant '\(tenant)' has no\(status.map { " \($0)" } ?? "") Apple revocations.")
                    } else {
                        Output.table(
                            ["ID", "STATUS", "CLIENT", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR", "ACCOUNT"],
                            output.map {
                                [
                                    $0.id, $0.status, $0.client_id, "\($0.attempts)",
                                    $0.status == "pending" ? Output.date($0.next_attempt_at) : "-", Output.text($0.last_error ?? "-"),
                                    $0.account_id,
                                ]
                            })
                    }
                }
            }
        }

        struct Retry: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Queue failed revocations again (all of the tenant's, or the one ID), due now.")
            @Option(help: "The tenant slug.") var tenant: String
            @Argument(help: "A revocation id (from list); without it every failed one.") var id: String?
            @OptionGroup var options: CommonOptions

            func run() async throws {
                try await runReporting(json: options.json) {
                    let context = try CLIContext()
                    let revocationID: UUID?
                    if let id {
                        guard let parsed = UUID(uuidString: id) else {
                            throw BrokerError.invalidArgument(
                                "'\(id.prefix(60))' is not a revocation id.",
                                hint: "Take the ID column of: broker apple revocations list --tenant \(tenant)")
                        }
                        revocationID = parsed
                    } else {
                        revocationID = nil
                    }
                    let (actor, tenant) = (context.actor, tenant)
                    let requeued = try await context.withDatabase { database in
                        let found = try await TenantAdmin(database: database, actor: actor).find(tenant)
                        let ids = try await database.appleRevocations.retry(tenantID: found.id, id: revocationID, actor: actor)
                        if let revocationID, ids.isEmpty {
                            let known = try await database.appleRevocations.find(tenantID: found.id, id: revocationID)
                            throw known == nil
                                ? BrokerError(
                                    code: "revocation_not_found", kind: .notFound, title: "Revocation not found",
                                    detail: "Tenant '\(tenant)' has no Apple revocation \(revocationID.lowercasedString). Nothing changed.",
                                    hint: "See the tenant's revocations: broker apple revocations list --tenant \(tenant)")
                                : BrokerError(
                                    code: "revocation_done", kind: .conflict, title: "Revocation done",
                                    detail: "Apple revocation \(revocationID.lowercasedString) is done already. Nothing changed.")
                        }
                        return ids
                    }
                    struct Requeued: Encodable { let requeued: [String] }
                    if options.json {
                        try Output.json(Requeued(requeued: requeued.map(\.lowercasedString)))
                    } else if requeued.isEmpty {
                        print("Tenant '\(tenant)' has no failed Apple revocations; nothing changed.")
                    } else {
                        print("Queued \(requeued.count) Apple revocation(s) again; broker serve makes them now.")
                    }
                }
            }
        }

        static func status(_ text: String) throws -> AppleRevocationRepository.Status {
            guard let status = AppleRevocationRepository.Status(rawValue: text) else {
                throw BrokerError.invalidArgument(
                    "--status '\(text.prefix(40))' is not a revocation status.",
                    hint: "Use --status pending, --status failed or --status done.")
            }
            return status
        }
    }

    /// A revocation in CLI output.
    struct RevocationJSON: Encodable {
        let id: String
        let account_id: String
        let team_id: String
        let client_id: String
        let status: String
        let attempts: Int
        let next_attempt_at: Date
        let last_error: String?
        let created_at: Date
        let done_at: Date?

        init(_ revocation: AppleRevocationRepository.Revocation) {
            id = revocation.id.lowercasedString
            account_id = revocation.accountID.lowercasedString
            team_id = revocation.teamID
            client_id = revocation.clientID
            status = revocation.status.rawValue
            attempts = revocation.attempts
            next_attempt_at = revocation.nextAttemptAt
            last_error = revocation.lastError
            created_at = revocation.createdAt
            done_at = revocation.doneAt
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(account_id, forKey: .account_id)
            try container.encode(team_id, forKey: .team_id)
            try container.encode(client_id, forKey: .client_id)
            try container.encode(status, forKey: .status)
            try container.encode(attempts, forKey: .attempts)
            try container.encode(next_attempt_at, forKey: .next_attempt_at)
            try container.encode(last_error, forKey: .last_error)  // null when none
            try container.encode(created_at, forKey: .created_at)
            try container.encode(done_at, forKey: .done_at)  // null until done
        }

        enum CodingKeys: String, CodingKey {
            case id, account_id, team_id, client_id, status, attempts, next_attempt_at, last_error, created_at, done_at
        }
    }
}
