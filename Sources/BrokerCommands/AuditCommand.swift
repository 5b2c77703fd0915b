import ArgumentParser
import BrokerApplication
import BrokerCore
import BrokerServer
import Foundation
import Storage

struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Read the security events: sign-ins, sign-outs, revocations, replays, refused API keys, operator actions.",
        subcommands: [List.self]
    )

    struct EventJSON: Encodable {
        let tenantID: String?
        let occurredAt: Date
        let action: String
        let accountID: String?
        let sessionID: String?
        let actor: String
        let target: String?
        let details: [String: JSONAny]
        enum CodingKeys: String, CodingKey {
            case action, actor, target, details
            case tenantID = "tenant_id"
            case occurredAt = "occurred_at"
            case accountID = "account_id"
            case sessionID = "session_id"
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the newest security events.",
            discussion: """
                Actions: session.signed_in, session.signed_out, session.revoked, session.family_revoked \
                (a spent refresh token was used again), sign_in.token_replayed, api_key.refused (sampled: \
                at most one row per 10 s per broker process, counting those left out), and the operator \
                actions of the CLI. --action session matches every session.* action.
                """)
        @Option(help: "The tenant slug (default: every tenant, and events of no tenant such as refused unknown keys).")
        var tenant: String?
        @Option(help: "Only this account's events (its id).") var account: String?
        @Option(help: "Only this action, or this family of actions (e.g. 'session').") var action: String?
        @Option(help: "How many events, newest first (1-10000).") var limit: Int = 50
        @OptionGroup var options: CommonOptions

        func run() async throws {
            try await runReporting(json: options.json) {
                let context = try CLIContext()
                let events = try await context.withDatabase { database in
                    try await AuditAdmin(database: database).events(tenant: tenant, account: account, action: action, limit: limit)
                }
                if options.json {
                    try Output.json(
                        events.map {
                            EventJSON(
                                tenantID: $0.tenantID?.lowercasedString, occurredAt: $0.occurredAt, action: $0.action,
                                accountID: $0.accountID?.lowercasedString, sessionID: $0.sessionID?.lowercasedString, actor: $0.actor,
                                target: $0.target, details: JSONAny.object(fromJSON: $0.details))
                        })
                } else if events.isEmpty {
                    print("No security events" + (tenant.map { " for tenant '\($0)'" } ?? "") + ".")
                } else {
                    Output.table(
                        ["WHEN", "ACTION", "ACCOUNT", "SESSION", "ACTOR", "TARGET", "DETAILS"],
                        events.map {
                            [
                                Output.date($0.occurredAt), $0.action, $0.accountID?.lowercasedString ?? "-",
                                $0.sessionID?.lowercasedString ?? "-", $0.actor, $0.target ?? "-", $0.details,
                            ]
                        })
                }
            }
        }
    }
}

/// A JSON value passed through to `--json` output as it is.
struct JSONAny: Encodable {
    let value: JSONValue

    static func object(fromJSON text: String) -> [String: JSONAny] {
        ((try? JSONValue.parse(Data(text.utf8)))?.object ?? [:]).mapValues(JSONAny.init)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch value {
        case .string(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .null: try container.encodeNil()
        case .array(let value): try container.encode(value.map(JSONAny.init))
        case .object(let value): try container.encode(value.mapValues(JSONAny.init))
        }
    }
}
