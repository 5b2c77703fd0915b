import BrokerCore

/// The CLI's one mapping from a failure's meaning to what the operator runs next. The layers
/// below report meanings (a `code`, and `arguments` naming the tenant, scope or rule); only here
/// do they become commands and flags. A failure raised with a hint of its own (by a command, or
/// by a provider type about its settings) keeps it.
enum CLIHints {
    static func hint(for error: BrokerError) -> String? {
        if let hint = error.hint { return hint }
        let tenant = error.arguments["tenant"] ?? "<slug>"
        switch error.code {
        case "invalid_slug": return "Use 3-40 lowercase letters, digits and dashes, e.g. 'acme-prod'."
        case "tenant_not_found": return "List tenants with 'broker tenant list'."
        case "tenant_exists": return "Pick another slug, or inspect it with 'broker tenant show \(tenant)'."
        case "tenant_disabled": return "Re-enable it with 'broker tenant enable <slug>'."
        case "insufficient_scope":
            return "Create a key with it: broker api-key create --tenant <slug> --scopes \(error.arguments["scope"] ?? "<scope>")"
        case "api_key_not_found": return "List the tenant's keys with 'broker api-key list --tenant <slug>'."
        case "signing_key_not_found": return "List the tenant's keys with 'broker keys list --tenant <slug>'."
        case "no_active_signing_key": return "Create one with 'broker keys rotate --tenant \(tenant)'."
        case "secret_unreadable": return "Check that BROKER_MASTER_KEY is the key this database was written with."
        case "invalid_argument": return invalidArgument(error.arguments)
        default: return nil
        }
    }

    /// The hints of the domain's input rules, by the rule the failure names.
    private static func invalidArgument(_ arguments: [String: String]) -> String? {
        switch arguments["rule"] {
        case "api_key_scope":
            return "Pass --scopes with a comma-separated list of \(APIKeyScope.allCases.map(\.rawValue).joined(separator: ", "))."
        case "master_key": return "Generate one with: openssl rand -base64 32"
        case "apple_client_platforms":
            let names = arguments["allowed"] ?? "ios"
            return
                "A --kind \(arguments["kind"] ?? "app") client takes --platforms with a comma-separated list within \(names), e.g. --platforms \(names)."
        case "apple_identifier": return "Copy it from the Apple developer account (Membership for the team id, Keys for the key id)."
        case "free_text": return "Give \(arguments["option"] ?? "it") as plain text on one line, without escape sequences."
        default: return nil
        }
    }
}
