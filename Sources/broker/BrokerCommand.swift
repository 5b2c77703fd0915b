import ArgumentParser
import NIOCore
import NIOPosix

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
            ServeCommand.self, DBCommand.self, TenantCommand.self, APIKeyCommand.self, KeysCommand.self,
            AppleCommand.self, TokenCommand.self, DemoCommand.self,
        ]
    )

    /// Runs Swift concurrency on NIO's event loops, so request handling, database I/O and
    /// async code share two threads per core instead of hopping between NIO's threads and
    /// the concurrency pool (decision 0010).
    static func main() async {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        await main(nil)
    }
}
