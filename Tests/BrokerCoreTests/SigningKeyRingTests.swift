import BrokerCore
import Crypto
import Foundation
import Testing

@Suite struct SigningKeyRingTests {
    let tenant = UUID()
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func key(_ kid: String, activates offset: TimeInterval, retired: TimeInterval? = nil) -> SigningKeyRecord {
        SigningKeyRecord(
            id: UUID(), tenantID: tenant, kid: kid, algorithm: "ES256", publicKey: Data(), sealedPrivateKey: Data(),
            createdAt: t0.addingTimeInterval(min(offset, 0)), activatesAt: t0.addingTimeInterval(offset),
            retiredAt: retired.map { t0.addingTimeInterval($0) })
    }

    func states(_ ring: SigningKeyRing, at offset: TimeInterval) -> [String: SigningKeyState] {
        Dictionary(uniqueKeysWithValues: ring.statuses(at: t0.addingTimeInterval(offset)).map { ($0.record.kid, $0.state) })
    }

    @Test func aPendingKeyIsNextUntilItsActivationTime() {
        let ring = SigningKeyRing([key("a", activates: 0), key("b", activates: 600)])
        #expect(states(ring, at: 10) == ["a": .active, "b": .next])
        #expect(ring.active(at: t0.addingTimeInterval(599))?.kid == "a")
        #expect(states(ring, at: 600) == ["a": .retired, "b": .active])
        #expect(ring.active(at: t0.addingTimeInterval(601))?.kid == "b")
    }

    @Test func publishedKeysAreNextActiveAndRecentlyRetired() {
        let ring = SigningKeyRing([key("a", activates: 0), key("b", activates: 600)])
        #expect(Set(ring.published(at: t0.addingTimeInterval(10)).map(\.record.kid)) == ["a", "b"])
        // a was superseded at 600 and stays published for a day.
        #expect(Set(ring.published(at: t0.addingTimeInterval(600 + 3_600)).map(\.record.kid)) == ["a", "b"])
        #expect(ring.published(at: t0.addingTimeInterval(600 + 86_400 + 1)).map(\.record.kid) == ["b"])
    }

    @Test func explicitlyRetiredKeysStopSigning() {
        let ring = SigningKeyRing([key("a", activates: 0, retired: 100), key("b", activates: 100)])
        #expect(states(ring, at: 50) == ["a": .active, "b": .next])
        #expect(states(ring, at: 150) == ["a": .retired, "b": .active])
    }

    @Test func noActiveKeyWhenAllAreRetired() {
        let ring = SigningKeyRing([key("a", activates: 0, retired: 10)])
        #expect(ring.active(at: t0.addingTimeInterval(20)) == nil)
    }

    @Test func kidIsTheRFC7638Thumbprint() throws {
        // RFC 7638 §3.1 uses an RSA key; this checks our EC form against an independent computation.
        let material = SigningKeyMaterial.generate()
        let publicKey = try P256.Signing.PublicKey(x963Representation: material.publicKey)
        let (x, y) = JWKThumbprint.coordinates(of: publicKey)
        let json = "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"\(x)\",\"y\":\"\(y)\"}"
        #expect(material.kid == Base64URL.encode(Data(SHA256.hash(data: Data(json.utf8)))))
        #expect(material.kid.count == 43)
        #expect(Base64URL.decode(x)?.count == 32)
    }

    @Test func base64URLRoundTrips() {
        for length in 0..<40 {
            let bytes = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 * 37) })
            let encoded = Base64URL.encode(bytes)
            #expect(!encoded.contains("=") && !encoded.contains("+") && !encoded.contains("/"))
            #expect(Base64URL.decode(encoded) == bytes)
        }
    }
}

@Suite struct CanonicalBase64URLTests {
    @Test(arguments: [
        "YQ==",  // padding
        "YQ=",
        "a+8",  // standard alphabet
        "a/8",
        "YR",  // unused bits set (canonical: "YQ")
        "YWJ",  // unused bits set (canonical: "YWI")
        "Y Q",  // whitespace
        "Y\nQ",
        "A",  // impossible length
        "YQ.",
    ])
    func nonCanonicalTextIsRefused(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func canonicalTextDecodes() {
        #expect(Base64URL.decode("") == Data())
        #expect(Base64URL.decode("YQ") == Data("a".utf8))
        #expect(Base64URL.decode("YWI") == Data("ab".utf8))
        #expect(Base64URL.decode("YWJj") == Data("abc".utf8))
        #expect(Base64URL.decode("-_8") == Data([0xFB, 0xFF]))
    }

    @Test func compactJWSShape() {
        #expect(Base64URL.isCanonicalCompactJWS("eyJh.eyJi.c2ln"))
        #expect(Base64URL.isCanonicalCompactJWS("eyJh.eyJi."))  // unsigned shape, refused later
        #expect(!Base64URL.isCanonicalCompactJWS("eyJh.eyJi"))
        #expect(!Base64URL.isCanonicalCompactJWS("eyJh.eyJi.c2ln.eA"))
        #expect(!Base64URL.isCanonicalCompactJWS(".eyJi.c2ln"))
        #expect(!Base64URL.isCanonicalCompactJWS("eyJh.eyJi.c2ln=="))
        #expect(!Base64URL.isCanonicalCompactJWS("eyJh.eyJi.c2l+"))
    }
}
