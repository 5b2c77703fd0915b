import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An IP address as its 4 or 16 bytes (an IPv4-mapped IPv6 address is taken as IPv4).
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(_ text: some StringProtocol) {
        var text = String(text)
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if let zone = text.firstIndex(of: "%") { text = String(text[..<zone]) }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let all = withUnsafeBytes(of: &v6) { Array($0) }
        bytes = all.prefix(10).allSatisfy { $0 == 0 } && all[10] == 0xff && all[11] == 0xff ? Array(all.suffix(4)) : all
    }

    /// The canonical text (what logs, buckets and audit rows use).
    public var description: String {
        var output = [CChar](repeating: 0, count: 64)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let ok = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &output, socklen_t(output.count)) != nil }
        guard ok else { return "?" }
        return String(decoding: output.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A CIDR block (`10.0.0.0/8`, `fd00::/8`) or one address (`192.0.2.7`).
public struct IPAddressRange: Sendable, Hashable, CustomStringConvertible {
    public let network: IPAddress
    public let prefixLength: Int

    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0].trimmingCharacters(in: .whitespaces)) else { return nil }
        let bits = address.bytes.count * 8
        var length = bits
        if parts.count == 2 {
            guard let parsed = Int(parts[1].trimmingCharacters(in: .whitespaces)), (0...bits).contains(parsed) else { return nil }
            length = parsed
        }
        network = address
        prefixLength = length
    }

    public func contains(_ address: IPAddress) -> Bool {
        guard address.bytes.count == network.bytes.count else { return false }
        var remaining = prefixLength
        for (a, b) in zip(address.bytes, network.bytes) where remaining > 0 {
            let mask: UInt8 = remaining >= 8 ? 0xff : ~(0xff >> UInt8(remaining))
            guard a & mask == b & mask else { return false }
            remaining -= 8
        }
        return true
    }

    public var description: String { "\(network)/\(prefixLength)" }
}

/// Which address a request comes from: the peer's, unless the peer is a trusted proxy
/// (`BROKER_TRUSTED_PROXIES`); then `X-Forwarded-For` is read from its right end, skipping
/// trusted proxies, and the first address no proxy of ours added is the client. A header that
/// cannot be read leaves the peer's address.
public struct ClientAddressResolver: Sendable {
    public let trustedProxies: [IPAddressRange]

    public init(trustedProxies: [IPAddressRange] = []) {
        self.trustedProxies = trustedProxies
    }

    /// Parses a comma-separated list of CIDR blocks or addresses; a failure names the entry it cannot read.
    public static func parse(_ list: String) -> Result<[IPAddressRange], ParseFailure> {
        var ranges: [IPAddressRange] = []
        for entry in list.split(separator: ",") {
            let trimmed = entry.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { continue }
            guard let range = IPAddressRange(trimmed) else { return .failure(ParseFailure(entry: String(trimmed.prefix(60)))) }
            ranges.append(range)
        }
        return .success(ranges)
    }

    public struct ParseFailure: Error, Sendable {
        public let entry: String
    }

    public func isTrusted(_ address: IPAddress) -> Bool { trustedProxies.contains { $0.contains(address) } }

    /// The client's address given the peer's and the request's `X-Forwarded-For` values (each
    /// header line may hold a list).
    public func client(peer: IPAddress?, forwardedFor: [String]) -> IPAddress? {
        guard let peer, !trustedProxies.isEmpty, isTrusted(peer), !forwardedFor.isEmpty else { return peer }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        var client = peer
        for hop in hops.reversed() {
            guard let address = IPAddress(hop) else { return client }
            client = address
            if !isTrusted(address) { return address }
        }
        return client
    }
}
