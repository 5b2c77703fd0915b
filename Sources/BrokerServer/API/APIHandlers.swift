import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import Storage

/// The implementation of the generated `APIProtocol`. One file per area extends it.
struct APIHandlers: APIProtocol {
    let services: BrokerServices
    let authenticator: APIKeyAuthenticator

    init(services: BrokerServices) {
        self.services = services
        self.authenticator = APIKeyAuthenticator(
            database: services.database, cache: services.callers, events: services.securityEvents, unknownKeys: services.unknownKeys,
            limiter: services.limiter, recentlyUsed: services.recentlyUsedKeys, seenValid: services.seenValidKeys)
    }

    /// The caller of the generated operation running now (see ``HTTPCaller``).
    var currentCaller: HTTPCaller { .current(.detached(services.database.logger)) }
}
