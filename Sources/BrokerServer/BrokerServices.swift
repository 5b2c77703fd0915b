import BrokerCore
import Foundation
import Storage

/// Everything a request handler needs, built once per process.
public struct BrokerServices: Sendable {
    public let database: Database
    public let secrets: SecretBox
    /// External base URL, without trailing slash (`BROKER_PUBLIC_URL`).
    public let publicURL: String
    public let maxBodyBytes: Int

    public init(database: Database, secrets: SecretBox, publicURL: String, maxBodyBytes: Int = 65_536) {
        self.database = database
        self.secrets = secrets
        self.publicURL = publicURL
        self.maxBodyBytes = maxBodyBytes
    }

    public func issuer(for slug: TenantSlug) -> String { "\(publicURL)/t/\(slug.rawValue)" }
}
