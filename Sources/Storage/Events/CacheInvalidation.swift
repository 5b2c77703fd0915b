import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// What changed, for instances that cache it. Notifications are sent inside the writing
/// transaction, so PostgreSQL delivers them only if it commits.
public enum CacheTopic: String, Sendable, CaseIterable {
    case apiKeys = "api_keys"
    case tenants
    case appleClients = "apple_clients"
    case signingKeys = "signing_keys"
    case providerConfigs = "provider_configs"
    case oauthClients = "oauth_clients"
}

extension Database {
    /// The LISTEN/NOTIFY channel of cache invalidations.
    public static let invalidationChannel = "identitybroker_cache"

    static func notify(_ topic: CacheTopic, tenantID: UUID, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            "SELECT pg_notify(\(invalidationChannel), \(topic.rawValue + ":" + tenantID.lowercasedString))",
            logger: logger)
    }

    /// Calls `handler` for every invalidation any broker process commits, until cancelled.
    /// Listens on a connection of its own, outside the request pool (a pool of one still
    /// serves requests: decision 0015), opened where the work that holds a session connects
    /// (`BROKER_DB_SESSION_URL`, decision 0086: through a pooler in transaction mode no
    /// notification would arrive); reconnects after a failure, with backoff up to 5 s.
    /// `listening` is called each time it listens, after it dropped everything.
    public func listenForInvalidations(
        listening: @escaping @Sendable () -> Void = {}, _ handler: @escaping @Sendable (CacheTopic, UUID?) async -> Void
    ) async {
        var delay: Duration = .milliseconds(250)
        while !Task.isCancelled {
            var opened: PostgresConnection?
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: try configuration.forSessionWork.connectionConfiguration(), id: 0, logger: logger)
                opened = connection
                delay = .milliseconds(250)
                try await connection.listen(on: Self.invalidationChannel) { notifications in
                    // Anything may have changed while we were not listening.
                    for topic in CacheTopic.allCases { await handler(topic, nil) }
                    listening()
                    for try await notification in notifications {
                        let parts = notification.payload.split(separator: ":", maxSplits: 1)
                        guard let topic = parts.first.flatMap({ CacheTopic(rawValue: String($0)) }) else { continue }
                        await handler(topic, parts.count > 1 ? UUID(uuidString: String(parts[1])) : nil)
                    }
                }
            } catch  where !Task.isCancelled {
                logger.warning(
                    "cache invalidation listener failed; retrying", metadata: ["error": "\(String(describing: type(of: error)))"])
            } catch {}
            try? await opened?.close()
            if Task.isCancelled { return }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(5))
        }
    }
}
