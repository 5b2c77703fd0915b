import BrokerCore
import Foundation
import Providers

/// The broker's settings, read from environment variables. Every variable read here is listed,
/// with its default and meaning, in ``settings`` (BrokerConfiguration+Settings.swift), from which
/// docs/configuration.md's tables and `broker serve --help` are made.
public struct BrokerConfiguration: Sendable {
    /// `DATABASE_URL`: an existing PostgreSQL; nil means the embedded default.
    public var databaseURL: String?
    /// `BROKER_DATA_DIR`: the embedded default's folder (default `./.broker`).
    public var dataDirectory: URL
    /// `BROKER_MASTER_KEY`: base64 of 32 bytes; with the embedded default a generated key in
    /// the data folder is used when unset.
    public var masterKey: String?
    /// `BROKER_HOST` / `BROKER_PORT` (default 127.0.0.1:8080).
    public var host: String
    public var port: Int
    /// `BROKER_PUBLIC_URL`: the URL clients reach the broker at; issuer URLs start with it.
    public var publicURL: String
    /// `BROKER_DB_POOL_SIZE` (default ``defaultPoolSize``: three times the CPU cores, at least 4).
    public var databasePoolSize: Int
    /// Measured on the 2-core benchmark machine (docs/benchmarks.md): 4 connections gave 1,538
    /// sign-ins/s, 6 gave 1,693/s with the lowest p99 (13 ms), 8–16 gave 1,690–1,735/s with p99
    /// rising to 19 ms.
    public static var defaultPoolSize: Int { max(4, 3 * ProcessInfo.processInfo.activeProcessorCount) }
    /// `BROKER_POSTGRES_BIN`: folder of initdb/pg_ctl for the embedded default (auto-detected).
    public var postgresBinDirectory: String?
    /// `BROKER_POSTGRES_USER`: OS user that runs the embedded PostgreSQL when the broker runs as root.
    public var postgresUser: String
    /// `BROKER_LOG_LEVEL` (trace, debug, info, notice, warning, error, critical); nil: the command's default.
    public var logLevel: String?
    /// `BROKER_LOG_FORMAT` (json or text; default json).
    public var logFormat: String
    /// `BROKER_MAX_BODY_BYTES`: largest request body accepted (default 65536).
    public var maxBodyBytes: Int
    /// `BROKER_APPLE_BASE_URL`: Apple's base URL (keys at /auth/keys, tokens at /auth/token).
    public var appleBaseURL: String
    /// Every provider's URLs and the outbound timeout (`BROKER_GOOGLE_JWKS_URL`,
    /// `BROKER_FACEBOOK_GRAPH_URL`, `BROKER_FACEBOOK_JWKS_URL`, `BROKER_PROVIDER_TIMEOUT`).
    public var providerEndpoints: ProviderEndpoints
    /// `BROKER_REFRESH_REUSE_INTERVAL`: seconds during which a just-rotated refresh token yields
    /// its successor again instead of revoking its family (default 10; 0 turns it off).
    public var refreshReuseInterval: TimeInterval
    public static let defaultRefreshReuseInterval: TimeInterval = 10
    /// `BROKER_DB_STATEMENT_TIMEOUT`: seconds a statement may run before PostgreSQL cancels it
    /// (default 5).
    public var databaseStatementTimeout: Int
    /// `BROKER_DB_CONNECT_TIMEOUT`: seconds within which a connection to PostgreSQL must be made
    /// (default 10): commands and `broker serve` that cannot connect fail within it, naming the cause.
    public var databaseConnectTimeout: Int
    /// `BROKER_DB_SIGN_IN_BATCHES`: sign-ins and refresh rotations are written in batches, at most
    /// this many batch statements of each kind at once (default 2; 0 writes each in a statement of
    /// its own; decisions 0030, 0074).
    public var databaseSignInBatches: Int
    /// `BROKER_DB_TENANT_SCOPE=transaction`: the tenant scope set in a transaction around every
    /// statement (behind a pooler in transaction mode), not once per connection.
    public var databaseTenantScopePerTransaction: Bool
    /// `BROKER_DB_PREPARED_STATEMENTS=unnamed`: the broker's hot statements are sent unnamed
    /// (parsed with every execution) rather than prepared once per connection, for a pooler in
    /// transaction mode that cannot carry named prepared statements (PgBouncer before 1.21).
    public var databaseNamedStatements: Bool
    /// `BROKER_DB_SESSION_URL`: where the work that holds a session connects (the cache
    /// invalidations' LISTEN, the migration lock, an import job's lock); nil: `DATABASE_URL`.
    public var databaseSessionURL: String?
    /// `BROKER_REQUEST_TIMEOUT`, `BROKER_HTTP_IDLE_TIMEOUT`, `BROKER_HTTP_MAX_CONNECTIONS`.
    public var httpLimits: HTTPLimits
    /// `BROKER_DRAIN_SECONDS`: how long `serve` keeps serving, out of rotation, after SIGTERM.
    public var drainSeconds: Int
    /// `BROKER_METRICS_PORT`: `/metrics` is served on its own listener (on `BROKER_HOST`) and
    /// answers 404 on the API's; nil: on the API's port.
    public var metricsPort: Int?
    /// `BROKER_APPLE_CREDENTIAL_CHECK_INTERVAL` (seconds, default 86400) and
    /// `BROKER_APPLE_MAX_CALLS_PER_SECOND` (default 10): how often each stored Apple refresh
    /// token is checked, and how fast all instances together may call Apple to check them.
    public var appleCredentialChecks: AppleCredentialChecks
    /// `BROKER_API_KEY_RATE_LIMIT` / `_BURST`, `BROKER_PUBLIC_RATE_LIMIT` / `_BURST` and
    /// `BROKER_TRUSTED_PROXIES` (decision 0048).
    public var abuseLimits: AbuseLimits
    /// `BROKER_WEBHOOK_ALLOW_INSECURE=1`: webhooks may be `http://` and point at loopback or
    /// private addresses (tests and demos).
    public var webhookAllowInsecure: Bool
    /// `BROKER_APPLE_RELAY_DOMAINS`: relay domains Apple announces after this release, added to
    /// the built-in ones (``ProviderIdentity/builtInAppleRelayDomains``); lowercased.
    public var appleRelayDomains: [String]

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws(BrokerError) {
        func value(_ name: String) -> String? {
            environment[name].flatMap { $0.isEmpty ? nil : $0 }
        }
        func integer(_ name: String, default defaultValue: Int, range: ClosedRange<Int>) throws(BrokerError) -> Int {
            guard let raw = value(name) else { return defaultValue }
            guard let number = Int(raw), range.contains(number) else {
                throw .invalidArgument("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound).")
            }
            return number
        }
        /// A two-way setting: false for `off` (also when unset), true for `on`; anything else is
        /// refused with `refusal` of it.
        func either(_ name: String, off: String, on: String, refusal: (String) -> String) throws(BrokerError) -> Bool {
            switch value(name) {
            case nil, off?: return false
            case on?: return true
            case let other?: throw .invalidArgument(refusal(other))
            }
        }
        databaseURL = value("DATABASE_URL")
        dataDirectory = URL(fileURLWithPath: value("BROKER_DATA_DIR") ?? ".broker").standardizedFileURL
        masterKey = value("BROKER_MASTER_KEY")
        host = value("BROKER_HOST") ?? "127.0.0.1"
        port = try integer("BROKER_PORT", default: 8080, range: 0...65535)
        let defaultURL = "http://\(host.contains(":") ? "[\(host)]" : host):\(port)"
        let publicURL = value("BROKER_PUBLIC_URL") ?? defaultURL
        guard let parsed = URL(string: publicURL), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil
        else {
            throw .invalidArgument("BROKER_PUBLIC_URL must be an http(s) URL such as https://id.example.com.")
        }
        self.publicURL = publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL
        databasePoolSize = try integer("BROKER_DB_POOL_SIZE", default: Self.defaultPoolSize, range: 1...500)
        databaseStatementTimeout = try integer("BROKER_DB_STATEMENT_TIMEOUT", default: 5, range: 1...600)
        databaseConnectTimeout = try integer("BROKER_DB_CONNECT_TIMEOUT", default: 10, range: 1...600)
        databaseSignInBatches = try integer("BROKER_DB_SIGN_IN_BATCHES", default: 2, range: 0...64)
        databaseTenantScopePerTransaction = try either("BROKER_DB_TENANT_SCOPE", off: "connection", on: "transaction") {
            "BROKER_DB_TENANT_SCOPE must be 'connection' (the default) or 'transaction' (behind a pooler in transaction mode), not '\($0)'."
        }
        databaseNamedStatements = try !either("BROKER_DB_PREPARED_STATEMENTS", off: "named", on: "unnamed") {
            "BROKER_DB_PREPARED_STATEMENTS must be 'named' (the default) or 'unnamed' (behind a pooler that cannot carry prepared statements, such as PgBouncer before 1.21), not '\($0)'."
        }
        databaseSessionURL = value("BROKER_DB_SESSION_URL")
        if databaseSessionURL != nil, databaseURL == nil {
            throw .invalidArgument("BROKER_DB_SESSION_URL needs DATABASE_URL: the embedded default has no pooler to go around.")
        }
        drainSeconds = try integer("BROKER_DRAIN_SECONDS", default: 0, range: 0...60)
        httpLimits = HTTPLimits(
            requestTimeout: .seconds(try integer("BROKER_REQUEST_TIMEOUT", default: 10, range: 1...600)),
            idleTimeout: .seconds(try integer("BROKER_HTTP_IDLE_TIMEOUT", default: 60, range: 1...3_600)),
            maxConnections: try integer("BROKER_HTTP_MAX_CONNECTIONS", default: 1_024, range: 1...100_000),
            maxConnectionsPerAddress: try integer("BROKER_HTTP_MAX_CONNECTIONS_PER_IP", default: 512, range: 1...100_000),
            headerTimeout: .seconds(try integer("BROKER_HTTP_HEADER_TIMEOUT", default: 10, range: 1...600)))
        metricsPort = value("BROKER_METRICS_PORT") == nil ? nil : try integer("BROKER_METRICS_PORT", default: 0, range: 1...65535)
        if let metricsPort, metricsPort == port {
            throw .invalidArgument("BROKER_METRICS_PORT must differ from BROKER_PORT (\(port)): metrics get a listener of their own.")
        }
        func rate(_ name: String, _ burstName: String, default limit: RateLimit) throws(BrokerError) -> RateLimit {
            let perSecond = try integer(name, default: limit.perSecond, range: RateLimit.allowedRates)
            let burst = try integer(
                burstName, default: value(name) == nil ? limit.burst : min(perSecond * 2, RateLimit.allowedBursts.upperBound),
                range: RateLimit.allowedBursts)
            guard burst >= perSecond else { throw .invalidArgument("\(burstName) must be at least \(name) (\(perSecond)).") }
            return RateLimit(perSecond: perSecond, burst: burst)
        }
        let trusted: [IPAddressRange]
        switch ClientAddressResolver.parse(value("BROKER_TRUSTED_PROXIES") ?? "") {
        case .success(let ranges): trusted = ranges
        case .failure(let failure):
            throw .invalidArgument(
                "BROKER_TRUSTED_PROXIES must be comma-separated CIDR blocks or addresses such as 10.0.0.0/8,fd00::/8; '\(failure.entry)' is neither."
            )
        }
        abuseLimits = AbuseLimits(
            apiKey: try rate("BROKER_API_KEY_RATE_LIMIT", "BROKER_API_KEY_RATE_BURST", default: AbuseLimits.defaultAPIKey),
            publicRoutes: try rate("BROKER_PUBLIC_RATE_LIMIT", "BROKER_PUBLIC_RATE_BURST", default: AbuseLimits.defaultPublicRoutes),
            failedAuthentication: try rate(
                "BROKER_FAILED_AUTH_RATE_LIMIT", "BROKER_FAILED_AUTH_RATE_BURST", default: AbuseLimits.defaultFailedAuthentication),
            clientAddresses: ClientAddressResolver(trustedProxies: trusted))
        postgresBinDirectory = value("BROKER_POSTGRES_BIN")
        postgresUser = value("BROKER_POSTGRES_USER") ?? "postgres"
        logLevel = value("BROKER_LOG_LEVEL")
        logFormat = value("BROKER_LOG_FORMAT") ?? "json"
        maxBodyBytes = try integer("BROKER_MAX_BODY_BYTES", default: 65_536, range: 1_024...10_485_760)
        func url(_ name: String, default defaultValue: String) throws(BrokerError) -> String {
            let text = value(name) ?? defaultValue
            guard let parsed = URL(string: text), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw .invalidArgument("\(name) must be an http(s) URL.")
            }
            return text
        }
        let apple = try url("BROKER_APPLE_BASE_URL", default: Apple.defaultBaseURL)
        appleBaseURL = apple.hasSuffix("/") ? String(apple.dropLast()) : apple
        let graph = try url("BROKER_FACEBOOK_GRAPH_URL", default: Facebook.defaultGraphURL)
        providerEndpoints = ProviderEndpoints(
            appleBaseURL: appleBaseURL, googleKeysURL: try url("BROKER_GOOGLE_JWKS_URL", default: Google.defaultKeysURL),
            facebookGraphURL: graph.hasSuffix("/") ? String(graph.dropLast()) : graph,
            facebookKeysURL: try url("BROKER_FACEBOOK_JWKS_URL", default: Facebook.defaultKeysURL),
            timeoutSeconds: try integer("BROKER_PROVIDER_TIMEOUT", default: 10, range: 1...120),
            googleDiscoveryURL: try url("BROKER_GOOGLE_DISCOVERY_URL", default: Google.defaultDiscoveryURL), publicURL: self.publicURL)
        refreshReuseInterval = TimeInterval(
            try integer("BROKER_REFRESH_REUSE_INTERVAL", default: Int(Self.defaultRefreshReuseInterval), range: 0...300))
        webhookAllowInsecure = try either("BROKER_WEBHOOK_ALLOW_INSECURE", off: "0", on: "1") { _ in
            "BROKER_WEBHOOK_ALLOW_INSECURE must be 1 (tests and demos) or 0."
        }
        appleRelayDomains = []
        for entry in (value("BROKER_APPLE_RELAY_DOMAINS")?.split(separator: ",", omittingEmptySubsequences: false) ?? []) {
            let domain = entry.trimmingCharacters(in: .whitespaces).lowercased()
            guard Self.isDomainName(domain) else {
                throw .invalidArgument(
                    "BROKER_APPLE_RELAY_DOMAINS must be comma-separated domain names such as relay.example.com; '\(FreeText.escaped(String(domain.prefix(80))))' is not one."
                )
            }
            appleRelayDomains.append(domain)
        }
        appleCredentialChecks = AppleCredentialChecks(
            interval: TimeInterval(try integer("BROKER_APPLE_CREDENTIAL_CHECK_INTERVAL", default: 86_400, range: 0...31_536_000)),
            maxCallsPerSecond: try integer("BROKER_APPLE_MAX_CALLS_PER_SECOND", default: 10, range: 1...1_000))
    }
}

extension BrokerConfiguration {
    /// Lowercase letters, digits and hyphens in labels of 1 to 63 characters, at least two
    /// labels, none starting or ending with a hyphen, 253 characters at most.
    static func isDomainName(_ text: String) -> Bool {
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        return text.utf8.count <= 253 && labels.count >= 2
            && labels.allSatisfy { label in
                (1...63).contains(label.utf8.count) && label.first != "-" && label.last != "-"
                    && label.utf8.allSatisfy {
                        ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                            || $0 == UInt8(ascii: "-")
                    }
            }
    }

    /// Puts this configuration's process-wide settings in force: the added relay domains.
    public func applyProcessSettings() {
        ProviderIdentity.addAppleRelayDomains(appleRelayDomains)
    }
}
