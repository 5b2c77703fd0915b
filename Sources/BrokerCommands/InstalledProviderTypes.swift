import AsyncHTTPClient
import BrokerApplication
import BrokerCore
import Logging
import Providers

/// The provider types this process's commands know: the built-ins, and any the executable added
/// (``BrokerCommandLine/main(additionalProviderTypes:)``, a test's type). `broker provider
/// enable` takes its flags and help from them, `broker provider list|show` describes with them,
/// `broker token verify` checks with them, and `broker serve` signs in with them.
enum InstalledProviderTypes {
    @TaskLocal static var additional: [ProviderDescriptor] = []

    /// Every type, built-ins first.
    static var descriptors: [ProviderDescriptor] { ProviderRegistry.builtInDescriptors + additional }

    /// The types `broker provider enable` configures (Apple is configured by `broker apple`).
    static var configurable: [ProviderDescriptor] { descriptors.filter { $0.configure != nil } }

    /// The reserved ids as commands name them, `apple, google, facebook` (the built-in types whose
    /// id is their type; with `apple: false`, those `broker provider enable` configures).
    static func reservedIDs(apple: Bool = true) -> String {
        ProviderID.reserved.filter { apple || $0 != .apple }.map(\.rawValue).joined(separator: ", ")
    }

    /// The types `broker provider enable` configures, as commands name them: `google, facebook, oidc`.
    static var configurableTypeNames: String { configurable.map(\.type.rawValue).joined(separator: ", ") }

    /// The registry the admin commands configure, describe and verify with.
    static func registry(
        secrets: SecretBox, endpoints: ProviderEndpoints = ProviderEndpoints(), logger: Logger = Logger(label: "broker.provider")
    ) -> ProviderRegistry {
        ProviderAdmin.registry(secrets: secrets, endpoints: endpoints, logger: logger, additional: additional)
    }
}
