import Synchronization
import Testing

@testable import Providers

/// The circuit breakers of provider endpoints (decision 0049) on a clock the test moves.
@Suite struct ProviderCircuitsTests {
    final class Clock: Sendable {
        let seconds = Mutex(500.0)
        func advance(_ by: Double) { seconds.withLock { $0 += by } }
        var read: @Sendable () -> Double { { self.seconds.withLock { $0 } } }
    }

    let token = "https://appleid.example/auth/token"
    let keys = "https://appleid.example/auth/keys"

    @Test func fiveFailuresInARowWithinTenSecondsOpenTheCircuitOfThatEndpointOnly() {
        let clock = Clock()
        let circuits = ProviderCircuits(now: clock.read)
        for _ in 0..<4 {
            #expect(circuits.permit(token))
            circuits.record(token, .failed)
            clock.advance(1)
        }
        #expect(circuits.permit(token) && !circuits.isOpen(token), "four failures leave it closed")
        circuits.record(token, .failed)
        #expect(circuits.isOpen(token))
        #expect(!circuits.permit(token), "open: the call fails at once")
        #expect(circuits.permit(keys), "another endpoint keeps its own circuit")
    }

    @Test func failuresSpreadOverMoreThanTheWindowOrBrokenByAnAnswerDoNotOpenIt() {
        let clock = Clock()
        let circuits = ProviderCircuits(now: clock.read)
        for _ in 0..<4 { circuits.record(token, .failed) }
        circuits.record(token, .answered)
        for _ in 0..<4 { circuits.record(token, .failed) }
        #expect(!circuits.isOpen(token), "an answer starts the count again")
        clock.advance(11)
        circuits.record(token, .failed)
        #expect(!circuits.isOpen(token), "the window starts again after ten seconds")
        for _ in 0..<3 { circuits.record(token, .failed) }
        #expect(!circuits.isOpen(token))
        circuits.record(token, .failed)
        #expect(circuits.isOpen(token))
    }

    @Test func oneProbeEveryTenSecondsClosesOrReopensIt() {
        let clock = Clock()
        let circuits = ProviderCircuits(now: clock.read)
        for _ in 0..<5 { circuits.record(token, .failed) }
        clock.advance(9.9)
        #expect(!circuits.permit(token))
        clock.advance(0.1)
        #expect(circuits.permit(token), "the probe")
        #expect(!circuits.permit(token), "one probe at a time")
        circuits.record(token, .failed)
        #expect(!circuits.permit(token), "a failed probe opens it for another ten seconds")
        clock.advance(10)
        #expect(circuits.permit(token))
        circuits.record(token, .abandoned)
        #expect(circuits.permit(token), "an abandoned probe frees the next caller to probe")
        circuits.record(token, .answered)
        #expect(!circuits.isOpen(token))
        #expect(circuits.permit(token) && circuits.permit(token), "closed: every call goes out")
    }

    @Test func theKeyIsTheURLWithoutItsQuery() {
        #expect(
            ProviderCircuits.endpoint(of: "https://graph.example/v19.0/me?access_token=secret&fields=id")
                == "https://graph.example/v19.0/me")
        #expect(ProviderCircuits.endpoint(of: "https://idp.example/token#x") == "https://idp.example/token")
    }
}
