import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback port for a `broker serve` a test starts. Below Linux's ephemeral range (32768 and
/// up by default), which the outgoing connections of every process on the machine draw from: a
/// random port in that range was taken by one of them now and then, and the broker refused to
/// start ("another process is using it", a fresh-clone CI run of 42e8e16). Each port was free
/// when it was handed out, and none is handed out twice in one test process.
public enum TestPorts {
    private static let given = Mutex(Set<Int>())

    public static func next() -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000...32_000)
            guard given.withLock({ $0.insert(port).inserted }) else { continue }
            if bindable(port) { return port }
        }
        return Int.random(in: 20_000...32_000)
    }

    static func bindable(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr = in_addr(s_addr: inet_addr("127.0.0.1"))
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
