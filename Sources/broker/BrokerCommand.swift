import ArgumentParser

@main
struct BrokerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broker",
        abstract: "IdentityBroker: multi-tenant Sign in with Apple / Google / Facebook broker.",
        discussion: """
            With no DATABASE_URL every command uses the embedded default: a private PostgreSQL in \
            BROKER_DATA_DIR (default ./.broker), started on demand and shared by concurrent commands.

            Exit status: 0 success, 1 failure (the message says what to do), 64 bad usage.
            """,
        subcommands: [
            ServeCommand.self, DBCommand.self, TenantCommand.self, AccountCommand.self, APIKeyCommand.self, KeysCommand.self,
            AppleCommand.self, ProviderCommand.self, PolicyCommand.self, TokenCommand.self, AuditCommand.self, WebhookCommand.self,
            EventsCommand.self, ImportCommand.self, ExportCommand.self, DemoCommand.self,
        ]
    )
}
