import BrokerCore
import Foundation
import Storage

/// Each tenant's relying parties, for the OpenID Provider's endpoints (the token endpoint
/// authenticates one on every request): read from the database at most once per ``ttl`` per
/// client (in the tenant's scope, whoever asks), and dropped when the tenant's clients change (the `oauth_clients` cache topic: a
/// removed client or a rotated secret stops working on every instance at once; a read a change
/// notice overtook is not kept). A client id that names no client is remembered as such too.
package struct ClientDirectory: Sendable {
    package static let ttl: Duration = .seconds(5)
    let database: Database
    package let cache: ExpiringCache<Key, RegisteredClient?>

    package struct Key: Hashable, Sendable {
        package let tenantID: UUID
        package let clientID: String

        package init(tenantID: UUID, clientID: String) {
            self.tenantID = tenantID
            self.clientID = clientID
        }
    }

    package init(database: Database, cache: ExpiringCache<Key, RegisteredClient?> = ExpiringCache(ttl: ttl)) {
        self.database = database
        self.cache = cache
    }

    /// The tenant's client `clientID` with its secret's hash, or nil (a text that cannot be a
    /// client id is never sent to PostgreSQL).
    package func registered(tenantID: UUID, clientID: String) async throws -> RegisteredClient? {
        guard OAuthClient.isClientID(clientID) else { return nil }
        let key = Key(tenantID: tenantID, clientID: clientID)
        return try await cache.value(for: key) {
            try await TenantScope.tenant(tenantID) {
                try await database.oauthClients.registered(tenantID: tenantID, clientID: clientID)
            }
        }
    }

    /// The tenant's client `clientID`, or nil.
    package func client(tenantID: UUID, clientID: String) async throws -> OAuthClient? {
        try await registered(tenantID: tenantID, clientID: clientID)?.client
    }

    /// The client when `presentedSecret` authenticates it (``RegisteredClient/authenticates(presentedSecret:)``).
    package func authenticate(tenantID: UUID, clientID: String, presentedSecret: String?) async throws -> OAuthClient? {
        guard let registered = try await registered(tenantID: tenantID, clientID: clientID),
            registered.authenticates(presentedSecret: presentedSecret)
        else { return nil }
        return registered.client
    }

    /// Drops the tenant's clients (nil: every tenant's).
    package func invalidate(tenantID: UUID?) {
        if let tenantID { cache.removeAll { key, _ in key.tenantID == tenantID } } else { cache.removeAll() }
    }
}
