import BrokerCore
import Foundation

/// Where providers read a tenant's configuration. The application layer implements it over the
/// database, with caches cleared by LISTEN/NOTIFY.
public protocol ProviderConfigurationStore: Sendable {
    /// An Apple client of the tenant with its group and team; nil when the tenant has none.
    func appleClient(tenantID: UUID, clientID: String) async throws -> ResolvedAppleClient?
    /// The tenant's configuration of a provider id, enabled or not; nil when it never
    /// configured it.
    func configuration(tenantID: UUID, provider: ProviderID) async throws -> ProviderConfiguration?
    /// The tenant's Apple clients of kind `service` (Services IDs, for the web flow).
    func appleServiceClients(tenantID: UUID) async throws -> [AppleClient]
}

extension ProviderConfigurationStore {
    /// A store without Services IDs (a native-only test store).
    public func appleServiceClients(tenantID: UUID) async throws -> [AppleClient] { [] }
}
