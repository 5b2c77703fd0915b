import ArgumentParser
import Providers

/// The `broker` command line. The executable runs ``main(additionalProviderTypes:)`` with none;
/// a test's executable passes a type of its own, which every command then knows as it knows the
/// built-ins (decision 0079).
public enum BrokerCommandLine {
    /// Parses the process's arguments, runs the command and exits with its status.
    public static func main(additionalProviderTypes: [ProviderDescriptor] = []) async {
        await InstalledProviderTypes.$additional.withValue(additionalProviderTypes) {
            await BrokerCommand.main()
        }
    }
}

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
            EventsCommand.self, ImportCommand.self, ExportCommand.self, ClientCommand.self, DemoCommand.self,
        ]
    )
}
