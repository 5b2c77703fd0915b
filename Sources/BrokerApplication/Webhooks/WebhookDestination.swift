import BrokerCore
import Foundation
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How webhook hosts are looked up and which addresses a delivery may connect to.
package struct WebhookAddressPolicy: Sendable {
    /// `http://` is taken, as well as `https://`.
    package let allowsHTTP: Bool
    /// The host's addresses, 4 or 16 bytes each.
    package let resolve: @Sendable (String) -> [[UInt8]]
    /// Whether a delivery may connect to an address.
    package let permits: @Sendable ([UInt8]) -> Bool

    package init(allowsHTTP: Bool, resolve: @escaping @Sendable (String) -> [[UInt8]], permits: @escaping @Sendable ([UInt8]) -> Bool) {
        self.allowsHTTP = allowsHTTP
        self.resolve = resolve
        self.permits = permits
    }

    /// `https://` to public addresses only (``WebhookDestination/isPublic(_:)``): the default.
    package static let secure = WebhookAddressPolicy(
        allowsHTTP: false, resolve: WebhookDestination.resolve, permits: WebhookDestination.isPublic)
    /// `BROKER_WEBHOOK_ALLOW_INSECURE=1` (tests, demos): `http://` and any address.
    package static let insecure = WebhookAddressPolicy(allowsHTTP: true, resolve: WebhookDestination.resolve, permits: { _ in true })

    package static func of(allowInsecure: Bool) -> WebhookAddressPolicy { allowInsecure ? .insecure : .secure }
}

/// Where a webhook may point (issue 23 §5; decision 0044): an `https://` URL whose host has
/// only public addresses. `http://`, loopback and private addresses are taken only when
/// `BROKER_WEBHOOK_ALLOW_INSECURE=1` (tests, demos). The host is looked up when the webhook is
/// set and again before each delivery, so a name later pointed inside the network is refused;
/// a delivery connects to the address it checked, never to what a second lookup answers
/// (issue 39 B5: a name answered first with a public address, then with 127.0.0.1, reached
/// loopback), and follows no redirect.
package struct WebhookDestination: Sendable {
    package let url: URL
    package let host: String

    static let maxLength = 2_048

    /// Checks the form of `text`; the addresses are ``checkAddresses(allowInsecure:)``'s job.
    package init(_ text: String, allowInsecure: Bool) throws(BrokerError) {
        try self.init(text, policy: .of(allowInsecure: allowInsecure))
    }

    /// Checks the form of `text` under `policy` (whether `http://` is taken).
    package init(_ text: String, policy: WebhookAddressPolicy) throws(BrokerError) {
        let allowInsecure = policy.allowsHTTP
        let hint = "Give the https:// URL of your backend's webhook endpoint, e.g. https://api.example.com/hooks/identity."
        guard text.utf8.count <= Self.maxLength, let components = URLComponents(string: text), let url = components.url,
            let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty
        else {
            throw .invalidArgument("'\(text.prefix(80))' is not an absolute URL of at most \(Self.maxLength) bytes.", hint: hint)
        }
        guard scheme == "https" || (scheme == "http" && allowInsecure) else {
            throw .invalidArgument(
                "A webhook URL must be https:// (got \(scheme)://); http:// is taken only with BROKER_WEBHOOK_ALLOW_INSECURE=1, for tests and demos.",
                hint: hint)
        }
        guard components.user == nil, components.password == nil else {
            throw .invalidArgument(
                "A webhook URL may not carry a user name or password: deliveries are signed (webhook-signature), check that instead.",
                hint: hint)
        }
        guard components.fragment == nil else { throw .invalidArgument("A webhook URL may not carry a #fragment.", hint: hint) }
        self.url = url
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// Looks up the host once (off the cooperative pool) and returns the address to connect
    /// to, as text; throws `webhook_address_not_public` when any of its addresses is not one the
    /// policy permits, `webhook_host_unresolved` when it has none.
    @discardableResult
    package func checkedAddress(_ policy: WebhookAddressPolicy) async throws -> String {
        let host = self.host
        let resolve = policy.resolve
        let addresses = try await NIOThreadPool.singleton.runIfActive { resolve(host) }
        guard let first = addresses.first else {
            throw BrokerError(
                code: "webhook_host_unresolved", kind: .invalidInput, title: "Webhook host not found",
                detail: "The webhook host \(host) has no address.")
        }
        if let inside = addresses.first(where: { !policy.permits($0) }) {
            throw BrokerError(
                code: "webhook_address_not_public", kind: .invalidInput, title: "Webhook address not public",
                detail: "The webhook host \(host) resolves to \(Self.text(inside)), which is not a public address;"
                    + " set BROKER_WEBHOOK_ALLOW_INSECURE=1 only for tests and demos.")
        }
        return Self.text(first)
    }

    /// The host's IPv4 (4 bytes) and IPv6 (16 bytes) addresses; empty when it has none.
    static func resolve(_ host: String) -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
            hints.ai_socktype = SOCK_STREAM
        #else
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var addresses: [[UInt8]] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let info = next {
            if let address = info.pointee.ai_addr {
                switch Int32(info.pointee.ai_family) {
                case AF_INET:
                    address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                        var ip = pointer.pointee.sin_addr
                        addresses.append(withUnsafeBytes(of: &ip) { Array($0) })
                    }
                case AF_INET6:
                    address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                        var ip = pointer.pointee.sin6_addr
                        addresses.append(withUnsafeBytes(of: &ip) { Array($0) })
                    }
                default: break
                }
            }
            next = info.pointee.ai_next
        }
        return addresses
    }

    /// Whether an address (4 or 16 bytes, network order) is reachable on the public internet,
    /// after IANA's IPv4 and IPv6 special-purpose address registries: not loopback, private,
    /// shared (CGNAT), link-local, unspecified, multicast, reserved, documentation or
    /// benchmarking space, the 6to4 relay anycast (192.88.99.0/24), nor an IPv6 form of one
    /// of them. IPv6 is taken only from global unicast (2000::/3) outside the IETF protocol
    /// assignments (2001::/23: Teredo, benchmarking, ORCHID), documentation (2001:db8::/32,
    /// 3fff::/20) and 6to4 (2002::/16), whose embedded IPv4 addresses could be anything; and
    /// from the well-known NAT64 prefix 64:ff9b::/96 when the IPv4 address it embeds is public.
    /// Everything else is refused: IPv4-mapped and -translated forms of inside addresses, the
    /// local-use NAT64 prefix 64:ff9b:1::/48, site-local fec0::/10, unique local, link-local,
    /// discard-only, SRv6 and multicast space (issue 39 B5).
    package static func isPublic(_ address: [UInt8]) -> Bool {
        if address.count == 4 {
            let (a, b, c) = (address[0], address[1], address[2])
            switch a {
            case 0, 10, 127: return false
            case 100 where (64...127).contains(b): return false
            case 169 where b == 254: return false
            case 172 where (16...31).contains(b): return false
            case 192 where b == 168: return false
            case 192 where b == 0 && (c == 0 || c == 2): return false
            case 192 where b == 88 && c == 99: return false
            case 198 where b == 18 || b == 19: return false
            case 198 where b == 51 && c == 100: return false
            case 203 where b == 0 && c == 113: return false
            case 224...255: return false
            default: return true
            }
        }
        guard address.count == 16 else { return false }
        if address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xff && address[11] == 0xff {
            return isPublic(Array(address[12..<16]))  // ::ffff:a.b.c.d, IPv4-mapped
        }
        if address[0..<12] == [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] {
            return isPublic(Array(address[12..<16]))  // 64:ff9b::a.b.c.d, well-known NAT64
        }
        guard address[0] & 0xe0 == 0x20 else { return false }  // only 2000::/3 is global unicast
        if address[0] == 0x20 && address[1] == 0x01 && address[2] & 0xfe == 0x00 { return false }  // 2001::/23
        if address[0..<4] == [0x20, 0x01, 0x0d, 0xb8] { return false }  // 2001:db8::/32 documentation
        if address[0] == 0x20 && address[1] == 0x02 { return false }  // 2002::/16 6to4
        if address[0] == 0x3f && address[1] == 0xff && address[2] & 0xf0 == 0x00 { return false }  // 3fff::/20 documentation
        return true
    }

    static func text(_ address: [UInt8]) -> String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: address.count, by: 2).map { String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}
