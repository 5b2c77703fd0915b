import Storage
import Testing

@Suite struct DatabaseConfigurationTests {
    @Test func parsesTCPURLs() throws {
        let configuration = try DatabaseConfiguration(url: "postgres://app:s%40cret@db.example.com:6543/broker?sslmode=require")
        #expect(configuration.endpoint == .tcp(host: "db.example.com", port: 6543))
        #expect(configuration.username == "app")
        #expect(configuration.password == "s@cret")
        #expect(configuration.database == "broker")
        #expect(configuration.tlsMode == .require)
        #expect(!configuration.description.contains("cret"))
    }

    @Test func defaultsTLSToPreferOverTCP() throws {
        #expect(try DatabaseConfiguration(url: "postgresql://u@localhost/db").tlsMode == .prefer)
    }

    @Test func parsesUnixSocketURLs() throws {
        let configuration = try DatabaseConfiguration(url: "postgres:///broker?host=/var/run/pg&user=me")
        #expect(configuration.endpoint == .unixSocket(path: "/var/run/pg/.s.PGSQL.5432"))
        #expect(configuration.username == "me")
        #expect(configuration.database == "broker")
        #expect(configuration.tlsMode == .disable)
    }

    @Test(arguments: ["mysql://x@y/z", "not a url", "postgres://u@h/db?sslmode=sometimes"])
    func refusesBadURLs(_ url: String) {
        #expect(throws: StorageError.self) { try DatabaseConfiguration(url: url) }
    }
}
