/// The events a product backend hears of (issue 23 §5), through `GET /v1/events` and webhooks.
public enum EventType {
    public static let all: [String] = [
        "account.created", "account.deleted", "identity.linked", "identity.unlinked", "apple.consent_revoked",
        "apple.account_deleted", "apple.email_disabled", "apple.email_enabled", "import.completed",
    ]
}
