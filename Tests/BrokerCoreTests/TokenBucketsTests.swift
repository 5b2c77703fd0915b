import Synchronization
import Testing

@testable import BrokerCore

/// The token buckets of the abuse limits (decision 0048), on a clock the test moves.
@Suite struct TokenBucketsTests {
    final class Clock: Sendable {
        let seconds = Mutex(1_000.0)
        func advance(_ by: Double) { seconds.withLock { $0 += by } }
        var read: @Sendable () -> Double { { self.seconds.withLock { $0 } } }
    }

    @Test func aBurstIsServedThenTheRateWithRetryAfterRoundedUp() {
        let clock = Clock()
        let buckets = TokenBuckets<String>(now: clock.read)
        let limit = RateLimit(perSecond: 2, burst: 4)
        for _ in 0..<4 { #expect(buckets.take("a", limit: limit) == .allowed) }
        #expect(buckets.take("a", limit: limit) == .limited(retryAfter: 1))
        #expect(buckets.take("b", limit: limit) == .allowed, "another key has its own bucket")
        clock.advance(0.5)
        #expect(buckets.take("a", limit: limit) == .allowed, "half a second at 2/s is one token")
        #expect(buckets.take("a", limit: limit) == .limited(retryAfter: 1))
        clock.advance(60)
        for _ in 0..<4 { #expect(buckets.take("a", limit: limit) == .allowed) }
        #expect(buckets.take("a", limit: limit) != .allowed, "a bucket never holds more than its burst")
    }

    @Test func aSlowRateAsksForALongerWait() {
        let clock = Clock()
        let buckets = TokenBuckets<String>(now: clock.read)
        let limit = RateLimit(perSecond: 1, burst: 1)
        #expect(buckets.take("a", limit: limit) == .allowed)
        #expect(buckets.take("a", limit: limit) == .limited(retryAfter: 1))
        #expect(!buckets.hasToken("a", limit: limit))
        clock.advance(1)
        #expect(buckets.hasToken("a", limit: limit))
        #expect(buckets.hasToken("a", limit: limit), "looking takes nothing")
        #expect(buckets.take("a", limit: limit) == .allowed)
    }

    @Test func theTableStaysBoundedWhateverTheNumberOfKeys() {
        let clock = Clock()
        let buckets = TokenBuckets<Int>(capacity: 1_600, now: clock.read)
        let limit = RateLimit(perSecond: 1, burst: 10)
        for key in 0..<20_000 {
            _ = buckets.take(key, limit: limit)
            if key % 1_000 == 0 { clock.advance(0.001) }
        }
        #expect(buckets.count <= 1_600)
        // A key being limited right now is not the first to go: the idle ones are.
        for _ in 0..<10 { _ = buckets.take(-1, limit: limit) }
        #expect(buckets.take(-1, limit: limit) != .allowed)
    }
}

@Suite struct ClientAddressTests {
    @Test func addressesAndBlocksParse() throws {
        #expect(IPAddress("10.1.2.3")?.description == "10.1.2.3")
        #expect(IPAddress("::ffff:10.1.2.3")?.description == "10.1.2.3", "an IPv4-mapped address is IPv4")
        #expect(IPAddress("[2001:db8::1]")?.description == "2001:db8::1")
        #expect(IPAddress("2001:DB8:0::1")?.description == "2001:db8::1")
        #expect(IPAddress("not an address") == nil)
        #expect(IPAddress("10.1.2") == nil)
        let block = try #require(IPAddressRange("10.0.0.0/8"))
        #expect(block.contains(try #require(IPAddress("10.255.0.1"))))
        #expect(!block.contains(try #require(IPAddress("11.0.0.1"))))
        let narrow = try #require(IPAddressRange("192.0.2.128/25"))
        #expect(narrow.contains(try #require(IPAddress("192.0.2.200"))))
        #expect(!narrow.contains(try #require(IPAddress("192.0.2.127"))))
        let v6 = try #require(IPAddressRange("fd00::/8"))
        #expect(v6.contains(try #require(IPAddress("fd12::7"))))
        #expect(!v6.contains(try #require(IPAddress("10.0.0.1"))), "families never match")
        #expect(IPAddressRange("192.0.2.7")?.prefixLength == 32)
        #expect(IPAddressRange("10.0.0.0/33") == nil)
        #expect(IPAddressRange("10.0.0.0/x") == nil)
    }

    @Test func aListOfProxiesParsesOrNamesTheEntryItCannotRead() throws {
        let ranges = try ClientAddressResolver.parse(" 10.0.0.0/8, fd00::/8 ,,192.0.2.7").get()
        #expect(ranges.map(\.description) == ["10.0.0.0/8", "fd00::/8", "192.0.2.7/32"])
        guard case .failure(let failure) = ClientAddressResolver.parse("10.0.0.0/8,proxy.internal") else {
            Issue.record("a host name is not a block")
            return
        }
        #expect(failure.entry == "proxy.internal")
    }

    @Test func forwardedForIsBelievedFromTrustedProxiesOnly() throws {
        let resolver = ClientAddressResolver(trustedProxies: try ClientAddressResolver.parse("10.0.0.0/8").get())
        let proxy = IPAddress("10.0.0.5")
        let stranger = IPAddress("198.51.100.9")
        // Through our proxy: the address it saw.
        #expect(resolver.client(peer: proxy, forwardedFor: ["203.0.113.7"])?.description == "203.0.113.7")
        // A client that sends its own X-Forwarded-For through our proxy: the proxy appended the
        // address it saw; what the client wrote to the left is not believed.
        #expect(resolver.client(peer: proxy, forwardedFor: ["1.2.3.4, 203.0.113.7"])?.description == "203.0.113.7")
        // Two of our proxies in a row, in one header line or two.
        #expect(resolver.client(peer: proxy, forwardedFor: ["203.0.113.7, 10.0.0.9"])?.description == "203.0.113.7")
        #expect(resolver.client(peer: proxy, forwardedFor: ["203.0.113.7", "10.0.0.9"])?.description == "203.0.113.7")
        // Not our proxy: the header is ignored.
        #expect(resolver.client(peer: stranger, forwardedFor: ["203.0.113.7"]) == stranger)
        // Garbage in the header: the last address read stands.
        #expect(resolver.client(peer: proxy, forwardedFor: ["junk"]) == proxy)
        // Nobody trusted: the peer.
        #expect(ClientAddressResolver().client(peer: proxy, forwardedFor: ["203.0.113.7"]) == proxy)
    }
}
