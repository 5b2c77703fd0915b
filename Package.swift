// swift-tools-version: 6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "IdentityBroker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "broker", targets: ["broker"]),
        .executable(name: "mock-idp", targets: ["mock-idp"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", from: "2.1.0"),
        .package(url: "https://github.com/apple/swift-openapi-generator.git", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        // The hosted sign-in page's template (escapes by default).
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // Traces over OTLP/HTTP only: the gRPC exporter (and its build) is left out.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        // Property-based tests (parsers, number conversions, comparisons); tests only.
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        // Domain types and rules: no HTTP, no SQL.
        .target(
            name: "BrokerCore",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto")
            ],
            swiftSettings: swiftSettings
        ),
        // Identity providers, JWKS cache and the shared id-token verifier.
        .target(
            name: "Providers",
            dependencies: [
                "BrokerCore",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // PostgreSQL repositories, migrator, embedded PostgreSQL launcher.
        .target(
            name: "Storage",
            dependencies: [
                "BrokerCore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // The pool's own error type (its circuit breaker), to recognise it as an outage.
                .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["EmbedMigrations"]
        ),
        // Build-time tool and plugin that compile Migrations/*.sql into the Storage target.
        .executableTarget(name: "embed-migrations", swiftSettings: swiftSettings),
        .plugin(name: "EmbedMigrations", capability: .buildTool(), dependencies: ["embed-migrations"]),
        // Types and server protocol generated from openapi.yaml.
        .target(
            name: "BrokerAPI",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime")
            ],
            // Generated code only: swift-openapi-generator 1.14 emits `public import`s it does not
            // always use and silences that diagnostic only from Swift 6.4 on.
            swiftSettings: [.unsafeFlags(["-suppress-warnings"])],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        // The application layer: the services every edge calls (sign-in, sessions, linking, login
        // options, accounts) and the operator actions the CLI runs. It imports neither Hummingbird
        // nor HTTP types: the compiler keeps HTTP out of it.
        .target(
            name: "BrokerApplication",
            dependencies: [
                "BrokerCore", "Providers", "Storage",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                // NIOThreadPool: a webhook host's addresses are looked up off the cooperative pool.
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The Hummingbird application: routes, middleware, problem responses.
        .target(
            name: "BrokerServer",
            dependencies: [
                "BrokerCore", "BrokerApplication", "Providers", "Storage", "BrokerAPI",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            swiftSettings: swiftSettings
        ),
        // Apple/Google/Facebook-shaped identity provider on loopback (tests, demo, benchmarks).
        .target(
            name: "MockIdP",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),
        // `broker demo`'s wiring: the demo tenant and MockIdP (the production server never links it).
        .target(
            name: "BrokerDemo",
            dependencies: [
                "BrokerCore", "BrokerApplication", "BrokerServer", "Storage", "MockIdP",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        // The `broker` command line: every command, and the provider types it knows.
        .target(
            name: "BrokerCommands",
            dependencies: [
                "BrokerCore", "Providers", "Storage", "BrokerApplication", "BrokerServer", "BrokerDemo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        // The `broker` executable: the command line with the built-in provider types.
        .executableTarget(name: "broker", dependencies: ["BrokerCommands"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "mock-idp",
            dependencies: [
                "MockIdP", "BrokerCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TestSupport",
            dependencies: [
                "Storage", "BrokerCore", "MockIdP",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                // Test servers end by graceful shutdown (ServedApplication).
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The served broker's harness (Outage, ServedHTTP) and the CLI fixtures.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        // A provider type the broker does not ship, in one folder (decision 0034), and the real
        // command line with it registered (decision 0079): tests only.
        .target(
            name: "TestOnlyProviderType",
            dependencies: ["Providers", "BrokerCore", "MockIdP", .product(name: "Logging", package: "swift-log")],
            path: "Tests/TestOnlyProviderType",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "broker-with-test-type",
            dependencies: ["BrokerCommands", "TestOnlyProviderType", "Providers"],
            path: "Tests/BrokerWithTestType",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProvidersTests",
            dependencies: [
                "Providers", "MockIdP", "BrokerCore", "TestSupport",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BrokerCoreTests",
            dependencies: [
                "BrokerCore", "TestSupport", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "StorageTests",
            dependencies: [
                "Storage", "TestSupport", "BrokerCore", .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: swiftSettings),
        // The application layer's own tests: services, settings, caches, import readers; no HTTP.
        .testTarget(
            name: "BrokerApplicationTests",
            dependencies: [
                "BrokerApplication", "BrokerCore", "Providers", "Storage", "TestSupport",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BrokerServerTests",
            dependencies: [
                "BrokerServer", "BrokerApplication", "TestSupport", "MockIdP", "BrokerCore", "Storage", "Providers",
                "TestOnlyProviderType",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "brokerTests",
            dependencies: [
                // BrokerApplication: `serve --help` is checked against BrokerConfiguration.settings.
                "TestSupport", "Storage", "MockIdP", "BrokerApplication",
                // ProviderTypeCLITests mints the test-only type's tokens; the binary runs it.
                "TestOnlyProviderType", "Providers", "BrokerCore", "BrokerCommands",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
