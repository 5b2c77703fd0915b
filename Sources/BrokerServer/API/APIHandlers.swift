import BrokerAPI
import BrokerCore
import Foundation

/// The implementation of the generated `APIProtocol`. One file per area extends it.
struct APIHandlers: APIProtocol {
    let services: BrokerServices
    let authenticator: APIKeyAuthenticator

    init(services: BrokerServices) {
        self.services = services
        self.authenticator = APIKeyAuthenticator(database: services.database, cache: services.callers, events: services.securityEvents)
    }
}
