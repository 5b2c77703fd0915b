import BrokerCore
import Crypto
import Foundation
import Logging
import Providers
import Storage

/// Apple's server-to-server notifications (issue 23 §1; decision 0041): `POST
/// /apple/notifications` with `{"payload": "<JWS>"}`. The token's `aud` (a primary App ID)
/// routes it to the tenants and teams that registered it; it must verify with Apple's keys for
/// exactly that audience (RS256, `iss`, `exp`); its `events` claim (a JSON string) names the
/// event type, the `sub` and `event_time` in milliseconds. Each routed tenant applies it once
/// (deduplicated by `jti`).
package struct AppleNotificationService: Sendable {
    let database: Database
    let appleKeys: JWKSCache
    /// primary App ID → its routes, cleared with the Apple configuration caches.
    let routes: ExpiringCache<String, [AppleNotificationRepository.Route]>
    let logger: Logger

    /// The longest payload read (Apple's are about a kilobyte).
    package static let maxPayloadBytes = 16_384

    package enum Failure: Error, Equatable {
        /// Not an Apple notification for a registered App ID: 400 `invalid_notification`.
        case invalid(String)
        /// Apple's keys could not be fetched and none are cached: 503 (Apple delivers again).
        case keysUnavailable
    }

    /// What each routed tenant did with the notification.
    package struct Received: Sendable {
        package let type: String
        package let outcomes: [AppleNotificationRepository.Outcome]
    }

    package func receive(payload: String, now: Date = Date()) async throws -> Received {
        guard payload.utf8.count <= Self.maxPayloadBytes else { throw Failure.invalid("The payload is longer than 16 KiB.") }
        let audiences = UnverifiedToken.audiences(payload)
        guard audiences.count == 1, let audience = audiences.first else {
            throw Failure.invalid("The payload is not a compact JWS with one audience (aud).")
        }
        let routed = try await routes(for: audience)
        guard !routed.isEmpty else { throw Failure.invalid("No tenant registered the App ID the notification is for.") }

        var policy = VerificationPolicy(issuers: [Apple.issuer], algorithms: ["RS256"], audiences: [audience])
        policy.subjectRequired = false
        let claims: IdentityClaims
        do {
            claims = try await IdentityTokenVerifier(policy: policy, keys: appleKeys).verify(payload, nonce: .none, at: now)
        } catch {
            if error.isProviderUnavailable { throw Failure.keysUnavailable }
            throw Failure.invalid(error.message)
        }
        let event = Self.event(of: claims, payload: payload)
        var outcomes: [AppleNotificationRepository.Outcome] = []
        for route in routed {
            outcomes.append(try await database.appleNotifications.apply(event, to: route))
        }
        logger.notice(
            "Apple notification received",
            metadata: ["type": "\(event.type)", "aud": "\(audience)", "outcomes": "\(outcomes.map(\.rawValue).joined(separator: ","))"])
        return Received(type: event.type, outcomes: outcomes)
    }

    func routes(for audience: String) async throws -> [AppleNotificationRepository.Route] {
        if let cached = routes.value(for: audience) { return cached }
        let generation = routes.generation
        let found = try await database.appleNotifications.routes(primaryAppID: audience)
        routes.set(found, for: audience, unlessClearedSince: generation)
        return found
    }

    /// The receipt key of a `jti`: itself up to 128 bytes, else its SHA-256. Cut to a prefix,
    /// two different long ids sharing one would be taken as one delivery (issue 39 F20).
    static func receiptID(_ jti: String) -> String {
        jti.utf8.count <= 128 && !jti.hasPrefix("sha256:") ? jti : "sha256:" + Hex.encode(SHA256.hash(data: Data(jti.utf8)))
    }

    /// The event of a verified notification. `events` is a JSON string (Apple's format); an
    /// object is taken too. What cannot be read becomes an event of type `unreadable`, recorded
    /// and ignored: the notification was Apple's, and Apple should not deliver it again.
    static func event(of claims: IdentityClaims, payload: String) -> AppleNotificationRepository.Event {
        let id = claims.tokenID.map(Self.receiptID) ?? "sha256:" + Hex.encode(SHA256.hash(data: Data(payload.utf8)))
        let events: [String: JSONValue]?
        switch claims.payload["events"] {
        case .string(let text)?: events = (try? JSONValue.parse(Array(text.utf8)))?.object
        case .object(let object)?: events = object
        default: events = nil
        }
        guard let events, let type = events["type"]?.string(maxBytes: 64) else {
            return .init(id: id, type: "unreadable", subject: nil, eventTime: nil)
        }
        // A time outside years 0001 to 9999 (nanoseconds, say) is no time: the event is kept
        // without one (``UnixTime``).
        let time = events["event_time"]?.number.flatMap(UnixTime.date(milliseconds:))
        return .init(id: id, type: type, subject: events["sub"]?.string(maxBytes: 255), eventTime: time)
    }
}
