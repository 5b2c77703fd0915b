import AsyncHTTPClient
import BrokerCore
import Foundation
import Logging

/// What a provider type can do beyond verifying a proof.
public struct ProviderAbilities: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Its proofs are OpenID id tokens checked by the shared verifier.
    public static let idTokens = ProviderAbilities(rawValue: 1 << 0)
    /// An authorization code from the app is exchanged at the provider (Apple).
    public static let codeExchange = ProviderAbilities(rawValue: 1 << 1)
    /// A sign-in can start in a browser (an authorization redirect).
    public static let webAuthorization = ProviderAbilities(rawValue: 1 << 2)
    /// Tokens the broker kept can be revoked at the provider (Apple).
    public static let revocation = ProviderAbilities(rawValue: 1 << 3)
    /// The provider notifies the broker of account changes (Apple).
    public static let notifications = ProviderAbilities(rawValue: 1 << 4)

    /// The abilities' names, for `broker provider show`.
    public var names: [String] {
        [
            (Self.idTokens, "id_tokens"), (.codeExchange, "code_exchange"), (.webAuthorization, "web_authorization"),
            (.revocation, "revocation"), (.notifications, "notifications"),
        ]
        .filter { contains($0.0) }.map(\.1)
    }
}

/// A setting of a provider type and its `broker provider enable` flag (`--<name>`).
public struct ProviderSettingFlag: Sendable, Equatable {
    /// The flag without dashes, e.g. `issuer`.
    public let name: String
    /// What the value is, for help (nil: a switch without value).
    public let valueName: String?
    public let repeatable: Bool
    /// Whether a new provider of the type needs it (what the enable hint of a sign-in names).
    public let required: Bool
    public let help: String

    /// A secret: the command line reads it from a file, never from its own words.
    public var isSecret: Bool { valueName == "SECRET" }

    /// The flag as `broker provider enable` takes it: a secret is read from a file
    /// (`--app-secret-file`, `--client-secret-file`).
    public var commandLine: String { isSecret ? "--\(name)-file" : "--\(name)" }

    /// The flag with its value as help and hints write it: `--client-id ID`, `--app-secret-file FILE`.
    public var usage: String {
        guard let valueName else { return commandLine }
        return "\(commandLine) \(isSecret ? "FILE" : valueName)"
    }

    public init(_ name: String, value: String?, repeatable: Bool = false, required: Bool = false, help: String) {
        self.name = name
        self.valueName = value
        self.repeatable = repeatable
        self.required = required
        self.help = help
    }
}

/// What the operator gave `broker provider enable` for one provider: each flag's values by
/// name (a switch given: `["true"]`). The type's descriptor checks them.
public struct ProviderSettingsInput: Sendable {
    public var tenantID: UUID
    public var provider: ProviderID
    public var platforms: [ProviderPlatform]
    public var values: [String: [String]]

    public init(tenantID: UUID, provider: ProviderID, platforms: [ProviderPlatform], values: [String: [String]]) {
        self.tenantID = tenantID
        self.provider = provider
        self.platforms = platforms
        self.values = values
    }

    /// The one value of a flag, if given (a repeated single-valued flag is refused).
    public func value(_ name: String) throws -> String? {
        guard let given = values[name], !given.isEmpty else { return nil }
        guard given.count == 1 else { throw BrokerError.invalidArgument("--\(name) is given \(given.count) times; give it once.") }
        return given[0]
    }

    public func list(_ name: String) -> [String] { values[name] ?? [] }

    public func isSet(_ name: String) -> Bool { !(values[name] ?? []).isEmpty }

    /// Refuses flags the type does not have, naming them.
    public func requireOnly(_ flags: [ProviderSettingFlag], type: ProviderType) throws {
        let known = Set(flags.map(\.name))
        let unknown = values.filter { !$0.value.isEmpty && !known.contains($0.key) }.keys.sorted()
        guard unknown.isEmpty else {
            throw BrokerError.invalidArgument(
                "\(unknown.map { $0.hasSuffix("-secret") ? "--\($0)-file" : "--\($0)" }.joined(separator: ", ")) \(unknown.count == 1 ? "is not a setting" : "are not settings") of a \(type.rawValue) provider.",
                hint: "A \(type.rawValue) provider takes: \(flags.map(\.commandLine).joined(separator: ", ")).")
        }
    }

    /// Client ids: trimmed, no whitespace inside, at most 255 characters, no repeats, one at least.
    public func clientIDs(_ name: String = "client-id") throws -> [String] {
        var ids: [String] = []
        for value in list(name) {
            let id = value.trimmingCharacters(in: .whitespaces)
            try FreeText.require(id, option: "--\(name)")
            guard !id.isEmpty, id.utf8.count <= 255, !id.contains(where: { $0.isWhitespace || $0.isNewline }) else {
                throw BrokerError.invalidArgument(
                    "--\(name) '\(value.prefix(80))' is not a client id.", hint: "Pass the OAuth client id as the console shows it.")
            }
            if !ids.contains(id) { ids.append(id) }
        }
        guard !ids.isEmpty else {
            throw BrokerError.invalidArgument("Give at least one --\(name).", hint: "Repeat --\(name) for each client (iOS, Android, web).")
        }
        return ids
    }

    /// A DNS name of two labels or more.
    public static func isDomain(_ text: String) -> Bool {
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        return text.count <= 253 && labels.count >= 2
            && labels.allSatisfy { label in
                !label.isEmpty && label.count <= 63 && label.first != "-" && label.last != "-"
                    && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            }
    }
}

/// What every provider of this process shares: where built-in providers are reached, the key
/// sets, the sealing box, the HTTP client.
public struct ProviderContext: Sendable {
    public var endpoints: ProviderEndpoints
    public var keySets: ProviderKeySets
    public var secrets: SecretBox
    public var httpClient: HTTPClient
    public var logger: Logger

    public init(endpoints: ProviderEndpoints, keySets: ProviderKeySets, secrets: SecretBox, httpClient: HTTPClient, logger: Logger) {
        self.endpoints = endpoints
        self.keySets = keySets
        self.secrets = secrets
        self.httpClient = httpClient
        self.logger = logger
    }

    /// `BROKER_PROVIDER_TIMEOUT` as a duration.
    public var timeout: Duration { .seconds(endpoints.timeoutSeconds) }
}

/// Where a provider's keys are published: the key set's name (readiness, metrics) and its URL.
public struct KeySetLocation: Sendable, Equatable {
    public let name: String
    public let url: String

    public init(name: String, url: String) {
        self.name = name
        self.url = url
    }
}

/// One provider type, whole (decision 0034): its settings and their flags, its request reader,
/// its token policy, where its keys come from, how far its `email_verified` is trusted, its
/// abilities, and how its provider is built. Each type is one folder holding one descriptor;
/// ``ProviderRegistry`` is built from them, and the sign-in route, the body readers, the problem
/// wording, the login options, `broker provider ...` and `broker token verify` go through it.
public struct ProviderDescriptor: Sendable {
    public let type: ProviderType
    /// The type's name in messages ("Apple", "OpenID Connect").
    public let displayName: String
    public let abilities: ProviderAbilities
    /// How far its `email_verified` is trusted unless its settings say otherwise.
    public let emailTrust: EmailTrust
    /// The settings `broker provider enable` takes for it (none: configured elsewhere, Apple).
    public let settingFlags: [ProviderSettingFlag]
    /// Reads the provider members of a sign-in (or link) body into a proof.
    public let readProof: @Sendable ([String: JSONValue]) throws(ContractMismatch) -> ProviderProof
    /// Checks the operator's input and makes the configuration to store; nil when the type is
    /// not configured through `broker provider enable` (Apple).
    public let configure: (@Sendable (ProviderSettingsInput, ProviderContext) async throws -> ProviderConfiguration)?
    /// The id-token policy for a configuration (nil: `broker token verify` without a tenant).
    public let tokenPolicy: @Sendable (ProviderConfiguration?, TokenCheckOptions) -> (VerificationPolicy, NonceExpectation)
    /// Where the keys of a configuration are published (nil configuration: the type's default).
    public let keySet: @Sendable (ProviderConfiguration?, ProviderEndpoints) -> KeySetLocation?
    /// What `broker provider show` prints of a configuration beyond the common members.
    public let describe: @Sendable (ProviderConfiguration) -> [(name: String, value: JSONValue)]
    /// Builds the type's provider for this process.
    public let make: @Sendable (ProviderContext) -> ProviderRegistry.Entry
    /// How a tenant turns a provider of the type on, when that is not `broker provider enable`
    /// with the required flags (Apple: its clients are registered with `broker apple`).
    public let setupHint: (@Sendable (_ tenant: String) -> String)?

    public init(
        type: ProviderType, displayName: String, abilities: ProviderAbilities, emailTrust: EmailTrust,
        settingFlags: [ProviderSettingFlag] = [],
        readProof: @escaping @Sendable ([String: JSONValue]) throws(ContractMismatch) -> ProviderProof,
        configure: (@Sendable (ProviderSettingsInput, ProviderContext) async throws -> ProviderConfiguration)?,
        tokenPolicy: @escaping @Sendable (ProviderConfiguration?, TokenCheckOptions) -> (VerificationPolicy, NonceExpectation),
        keySet: @escaping @Sendable (ProviderConfiguration?, ProviderEndpoints) -> KeySetLocation?,
        describe: @escaping @Sendable (ProviderConfiguration) -> [(name: String, value: JSONValue)] = { _ in [] },
        setupHint: (@Sendable (_ tenant: String) -> String)? = nil,
        make: @escaping @Sendable (ProviderContext) -> ProviderRegistry.Entry
    ) {
        self.type = type
        self.displayName = displayName
        self.abilities = abilities
        self.emailTrust = emailTrust
        self.settingFlags = settingFlags
        self.readProof = readProof
        self.configure = configure
        self.tokenPolicy = tokenPolicy
        self.keySet = keySet
        self.describe = describe
        self.setupHint = setupHint
        self.make = make
    }

    /// What turns a provider of this type on for a tenant, as a sign-in's hint says it: the
    /// type's own ``setupHint``, else `broker provider enable` with the type's required flags.
    public func enableHint(_ provider: ProviderID, tenant: String) -> String {
        if let setupHint { return setupHint(tenant) }
        let type = provider.reservedType == nil ? " --type \(self.type.rawValue)" : ""
        let flags = settingFlags.filter(\.required).map { " \($0.usage)" }.joined()
        return "Enable it: broker provider enable \(provider.rawValue)\(type) --tenant \(tenant)\(flags)"
    }
}
