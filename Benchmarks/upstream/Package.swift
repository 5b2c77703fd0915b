// swift-tools-version: 6.2
// Reproductions of library behaviours the broker works around (docs/upstream.md). The same
// dependency requirements as the broker's own Package.swift; to build against exactly the
// versions the broker resolved (the versions the workarounds were seen with), copy
// ../../Package.resolved here first. `swift package update` then tries the newest releases:
// a reproduction that exits 1 ("fixed upstream: …") there says its workaround may go.
import PackageDescription

let postgres: [Target.Dependency] = [
    .product(name: "PostgresNIO", package: "postgres-nio"),
    .product(name: "Logging", package: "swift-log"),
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
]
let http: [Target.Dependency] = [
    .product(name: "Hummingbird", package: "hummingbird"),
    .product(name: "NIOCore", package: "swift-nio"),
]

let package = Package(
    name: "UpstreamReproductions",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // PostgresNIO; all but repro-date-trap need REPRO_POSTGRES=postgres://user:password@host:port/database.
        .executableTarget(name: "repro-lease-leak", dependencies: postgres),
        .executableTarget(name: "repro-commit-after-rows", dependencies: postgres),
        .executableTarget(name: "repro-prepared-overtake", dependencies: postgres),
        .executableTarget(name: "repro-closed-connection", dependencies: postgres),
        .executableTarget(name: "repro-copy-precondition", dependencies: postgres),
        .executableTarget(name: "repro-transaction-error", dependencies: postgres),
        .executableTarget(name: "repro-date-trap", dependencies: postgres),
        // Hummingbird 2 (and swift-nio's NIOAsyncChannel underneath).
        .executableTarget(name: "repro-body-iterator", dependencies: http),
        .executableTarget(name: "repro-http10-close", dependencies: http),
    ]
)
