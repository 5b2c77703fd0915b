import BrokerCore
import BrokerApplication
import Testing

@Suite struct BrokerConfigurationTests {
    /// A relay domain Apple announces later is added without a release (issue 39 A3); the
    /// built-in two always apply. The domain here is this test's own: the setting is
    /// process-wide.
    @Test func appleRelayDomainsAreAddedByTheOperator() throws {
        #expect(try BrokerConfiguration(environment: [:]).appleRelayDomains.isEmpty)
        let configuration = try BrokerConfiguration(environment: [
            "BROKER_APPLE_RELAY_DOMAINS": " Relay.Config-Test.example ,relay2.config-test.example"
        ])
        #expect(configuration.appleRelayDomains == ["relay.config-test.example", "relay2.config-test.example"])
        #expect(!ProviderIdentity.isAppleRelay("a@relay.config-test.example"))
        configuration.applyProcessSettings()
        #expect(
            ProviderIdentity.isAppleRelay("a@RELAY.config-test.example") && ProviderIdentity.isAppleRelay("b@relay2.config-test.example"))
        #expect(ProviderIdentity.isAppleRelay("x@private.icloud.com") && ProviderIdentity.isAppleRelay("x@privaterelay.appleid.com"))
        #expect(ProviderIdentity.appleRelayDomains.starts(with: ProviderIdentity.builtInAppleRelayDomains))
        for bad in [
            "localhost", "-x.example", "a..example", "@relay.example", "relay.example/x", "rélay.example", "x.example,",
            "x.example,,y.example",
        ] {
            #expect(throws: BrokerError.self, "\(bad)") { try BrokerConfiguration(environment: ["BROKER_APPLE_RELAY_DOMAINS": bad]) }
        }
    }

    @Test func signInBatchesDefaultToTwoAndTakeZeroToSixtyFour() throws {
        #expect(try BrokerConfiguration(environment: [:]).databaseSignInBatches == 2)
        #expect(try BrokerConfiguration(environment: ["BROKER_DB_SIGN_IN_BATCHES": "0"]).databaseSignInBatches == 0)
        #expect(try BrokerConfiguration(environment: ["BROKER_DB_SIGN_IN_BATCHES": "64"]).databaseSignInBatches == 64)
        for bad in ["65", "-1", "two"] {
            #expect(throws: BrokerError.self) { try BrokerConfiguration(environment: ["BROKER_DB_SIGN_IN_BATCHES": bad]) }
        }
    }

    @Test func theTenantScopeIsSetPerConnectionUnlessToldPerTransaction() throws {
        #expect(try !BrokerConfiguration(environment: [:]).databaseTenantScopePerTransaction)
        #expect(try !BrokerConfiguration(environment: ["BROKER_DB_TENANT_SCOPE": "connection"]).databaseTenantScopePerTransaction)
        #expect(try BrokerConfiguration(environment: ["BROKER_DB_TENANT_SCOPE": "transaction"]).databaseTenantScopePerTransaction)
        for bad in ["session", "Transaction", "per-transaction"] {
            #expect(throws: BrokerError.self) { try BrokerConfiguration(environment: ["BROKER_DB_TENANT_SCOPE": bad]) }
        }
    }

    @Test func abuseLimitsDefaultAndParse() throws {
        let defaults = try BrokerConfiguration(environment: [:])
        #expect(defaults.abuseLimits.apiKey == RateLimit(perSecond: 200, burst: 400))
        #expect(defaults.abuseLimits.publicRoutes == RateLimit(perSecond: 50, burst: 100))
        #expect(defaults.abuseLimits.failedAuthentication == RateLimit(perSecond: 5, burst: 20))
        #expect(defaults.abuseLimits.clientAddresses.trustedProxies.isEmpty)
        #expect(defaults.httpLimits.maxConnectionsPerAddress == 512)
        #expect(defaults.httpLimits.headerTimeout == .seconds(10))
        let set = try BrokerConfiguration(environment: [
            "BROKER_API_KEY_RATE_LIMIT": "500", "BROKER_PUBLIC_RATE_LIMIT": "20", "BROKER_PUBLIC_RATE_BURST": "30",
            "BROKER_FAILED_AUTH_RATE_LIMIT": "40",
            "BROKER_TRUSTED_PROXIES": "10.0.0.0/8, fd00::/8", "BROKER_HTTP_MAX_CONNECTIONS_PER_IP": "8", "BROKER_HTTP_HEADER_TIMEOUT": "3",
        ])
        #expect(set.abuseLimits.apiKey == RateLimit(perSecond: 500, burst: 1_000), "a rate alone gets twice its rate as burst")
        #expect(set.abuseLimits.publicRoutes == RateLimit(perSecond: 20, burst: 30))
        #expect(set.abuseLimits.failedAuthentication == RateLimit(perSecond: 40, burst: 80))
        #expect(set.abuseLimits.clientAddresses.trustedProxies.map(\.description) == ["10.0.0.0/8", "fd00::/8"])
        #expect(set.httpLimits.maxConnectionsPerAddress == 8)
        #expect(set.httpLimits.headerTimeout == .seconds(3))
        for (name, bad) in [
            ("BROKER_API_KEY_RATE_LIMIT", "0"), ("BROKER_API_KEY_RATE_LIMIT", "fast"), ("BROKER_PUBLIC_RATE_BURST", "-1"),
            ("BROKER_FAILED_AUTH_RATE_LIMIT", "0"),
            ("BROKER_HTTP_MAX_CONNECTIONS_PER_IP", "0"), ("BROKER_HTTP_HEADER_TIMEOUT", "0"),
        ] {
            #expect(throws: BrokerError.self, "\(name)=\(bad)") { try BrokerConfiguration(environment: [name: bad]) }
        }
        #expect(throws: BrokerError.self, "a burst below the rate") {
            try BrokerConfiguration(environment: ["BROKER_API_KEY_RATE_LIMIT": "100", "BROKER_API_KEY_RATE_BURST": "50"])
        }
        do {
            _ = try BrokerConfiguration(environment: ["BROKER_TRUSTED_PROXIES": "10.0.0.0/8,lb.internal"])
            Issue.record("a host name is not a CIDR block")
        } catch {
            #expect(error.detail.contains("BROKER_TRUSTED_PROXIES") && error.detail.contains("lb.internal"))
        }
    }
}
