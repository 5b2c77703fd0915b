import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `POST /apple/notifications` (public; one URL for every tenant): Apple's server-to-server
/// notifications, `{"payload": "<JWS>"}`. 200 as soon as the event is recorded, also for a
/// second delivery and for event types the broker does not act on; 400
/// `invalid_notification` only when the payload is not a valid Apple JWS for a registered
/// primary App ID; 503 when Apple's keys or the database cannot be reached (Apple delivers
/// again).
struct AppleNotificationRoute: Sendable {
    static let path = "/apple/notifications"
    static let operation = GeneratedRoutes.Operation(method: .post, path: path)

    let services: BrokerServices
    let maxBodyBytes: Int

    func receive(_ request: Request, context: BrokerRequestContext) async throws -> Response {
        let object = try await WebSignInRoute.jsonObject(request, maxBodyBytes: maxBodyBytes)
        guard case .string(let payload)? = object["payload"], object.count == 1 else {
            throw Self.invalid("The body must be {\"payload\": \"<JWS>\"}.")
        }
        do {
            _ = try await services.appleNotifications.receive(payload: payload)
        } catch AppleNotificationService.Failure.invalid(let reason) {
            throw Self.invalid(reason)
        } catch AppleNotificationService.Failure.keysUnavailable {
            throw BrokerError(
                code: "provider_unavailable", kind: .unavailable, title: "Apple's keys unavailable",
                detail: "Apple's signing keys could not be fetched and none are cached; the notification was not recorded.")
        }
        return Response(status: .ok, headers: [.cacheControl: "no-store"])
    }

    static func invalid(_ reason: String) -> BrokerError {
        BrokerError(
            code: "invalid_notification", kind: .invalidInput, title: "Not an Apple notification",
            detail: "\(reason) Nothing was recorded.")
    }
}

/// Apple's notifications (served by ``AppleNotificationRoute``, which reads the body with the
/// strict JSON parser and answers without a body).
extension APIHandlers {
    // The generated entry (unregistered).
    func appleNotifications(_ input: Operations.AppleNotifications.Input) async throws -> Operations.AppleNotifications.Output {
        guard case .json(let body) = input.body else { throw AppleNotificationRoute.invalid("The body must be JSON.") }
        do {
            _ = try await services.appleNotifications.receive(payload: body.payload)
        } catch AppleNotificationService.Failure.invalid(let reason) {
            throw AppleNotificationRoute.invalid(reason)
        }
        return .ok(.init())
    }
}
