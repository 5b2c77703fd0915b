import BrokerCore
import Foundation
import PropertyBased
import Testing

/// The state of a web sign-in names its tenant (decision 0092): read back from any state made,
/// never from another text (a state of the oldest form, a state whose tenant part is not one
/// this makes, a shorter text), and never a crash on any text. The sealed form (decision 0099)
/// is read only from its one spelling.
@Suite struct WebSignInStateTokenTests {
    @Test func theTenantIsReadBackFromEveryStateMade() async {
        await propertyCheck(count: 2_000, input: Gen.int(in: 0...Int(Int32.max))) { seed in
            var generator = SplitMix(seed: UInt64(seed))
            let tenant = UUID(uuid: generator.uuid())
            let state = WebSignInStateToken.make(tenantID: tenant)
            #expect(state.utf8.count == WebSignInStateToken.length)
            #expect(state.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }, "base64url only: \(state)")
            #expect(WebSignInStateToken.tenant(of: state) == tenant)
            // The tenant part in another case names another tenant or none.
            let tenantPart = state.prefix(22)
            if tenantPart != tenantPart.lowercased() {
                #expect(WebSignInStateToken.tenant(of: tenantPart.lowercased() + state.dropFirst(22)) != tenant, "\(state)")
            }
        }
    }

    @Test func noOtherTextNamesATenant() async {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/. é")
        let text = Gen.int(in: 0...(alphabet.count - 1)).array(of: 0...80).map { String($0.map { alphabet[$0] }) }
        await propertyCheck(count: 3_000, input: text) { text in
            guard let tenant = WebSignInStateToken.tenant(of: text) else { return }
            // Only a text of a stored state's length, or longer (a sealed state, decision 0099),
            // whose tenant part is one `make` writes.
            #expect(text.utf8.count >= WebSignInStateToken.length)
            #expect(WebSignInStateToken.make(tenantID: tenant).prefix(22) == text.prefix(22))
        }
        // A state of the older form: 32 random bytes alone.
        #expect(WebSignInStateToken.tenant(of: Base64URL.encode(SecureRandom.bytes(32))) == nil)
        #expect(WebSignInStateToken.tenant(of: "") == nil)
        // The tenant part's last character carries 4 bits that must be zero: "B" is not "A".
        let made = WebSignInStateToken.make(tenantID: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        var altered = Array(made)
        altered[21] = altered[21] == "A" ? "B" : "A"
        #expect(WebSignInStateToken.tenant(of: String(altered)) == nil)
        // Longer than a callback reads: no tenant, no box.
        let tooLong = made + String(repeating: "A", count: WebSignInStateToken.maxLength)
        #expect(WebSignInStateToken.tenant(of: tooLong) == nil)
        #expect(WebSignInStateToken.sealedBox(of: tooLong) == nil)
    }

    @Test func aSealedStateIsReadOnlyAsItWasWritten() async {
        await propertyCheck(count: 1_000, input: Gen.int(in: 0...Int(Int32.max)), Gen.int(in: 44...400)) { seed, count in
            var generator = SplitMix(seed: UInt64(seed))
            let tenant = UUID(uuid: generator.uuid())
            let box = Data((0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
            let state = WebSignInStateToken.sealed(tenantID: tenant, box: box)
            #expect(WebSignInStateToken.tenant(of: state) == tenant)
            let read = WebSignInStateToken.sealedBox(of: state)
            #expect(read?.tenantID == tenant && read?.box == box)
            // Another case is another box, or another tenant, or none.
            if state.lowercased() != state, let other = WebSignInStateToken.sealedBox(of: state.lowercased()) {
                #expect(other.tenantID != tenant || other.box != box)
            }
        }
    }
}

/// A small deterministic generator for the ids of a property test.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func uuid() -> uuid_t {
        let a = next(), b = next()
        func byte(_ v: UInt64, _ i: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: v >> (8 * i)) }
        return (
            byte(a, 0), byte(a, 1), byte(a, 2), byte(a, 3), byte(a, 4), byte(a, 5), byte(a, 6), byte(a, 7),
            byte(b, 0), byte(b, 1), byte(b, 2), byte(b, 3), byte(b, 4), byte(b, 5), byte(b, 6), byte(b, 7)
        )
    }
}
