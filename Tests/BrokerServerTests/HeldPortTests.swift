import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test support's held port closes its socket once: closed again at `deinit`, it shut
/// whatever socket had been given the same number meanwhile, in CI a SwiftNIO socket of a test
/// running beside it, and SwiftNIO's debug build stopped the test process (see ``HeldPort``).
@Suite struct HeldPortTests {
    @Test func aHeldPortClosedAndReleasedLeavesTheSocketThatTookItsNumberOpen() throws {
        var reused = 0
        for _ in 0..<50 {
            var held: HeldPort? = try HeldPort(listening: true)
            let number = try #require(held?.fd)
            held?.close()
            // The lowest free number, most often the one just closed.
            let next = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            try #require(next >= 0)
            if next == number { reused += 1 }
            held = nil
            let open = fcntl(next, F_GETFD) != -1
            #expect(open, "socket \(next) (the held port's was \(number)) was closed by the held port's deinit")
            if open { _ = Glibc.close(next) }
        }
        #expect(reused > 0, "no new socket took a closed held port's number: the test showed nothing")
    }
}
