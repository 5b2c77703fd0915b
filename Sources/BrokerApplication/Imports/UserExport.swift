import BrokerCore
import Foundation
import Storage

/// `broker export users` (issue 24): every account of a tenant with its external id (its broker
/// account id when it has none) and its identities, in the `jsonl` import format, read in pages
/// and written as it goes. No token, no secret. Importing the file into a fresh tenant with the
/// same provider configuration reproduces the accounts and identities.
package struct UserExport: Sendable {
    let database: Database

    package init(database: Database) { self.database = database }

    static let pageSize = 1_000

    /// Writes the tenant's accounts to `path` (created with mode 600, replaced if it exists);
    /// returns how many.
    package func run(tenant: Tenant, path: String, progress: @Sendable (Int) -> Void = { _ in }) async throws -> Int {
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw BrokerError.invalidArgument("Cannot write \(path): check the folder and its permissions.") }
        defer { try? handle.close() }
        var after: UUID?
        var written = 0
        while true {
            let page = try await database.imports.exportPage(tenantID: tenant.id, after: after, limit: Self.pageSize)
            guard let last = page.last else { break }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(400 * page.count)
            for account in page {
                bytes.append(contentsOf: Self.line(account))
                bytes.append(UInt8(ascii: "\n"))
            }
            try handle.write(contentsOf: bytes)
            written += page.count
            progress(written)
            after = last.id
        }
        return written
    }

    /// One account as a `jsonl` line.
    static func line(_ account: ImportRepository.ExportedAccount) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.member("external_id", account.externalID ?? account.id.lowercasedString)
        writer.memberIfPresent("email", account.email)
        writer.member("email_verified", account.emailVerified)
        if !account.name.isEmpty {
            writer.key("name")
            writer.beginObject()
            writer.memberIfPresent("given_name", account.name.givenName)
            writer.memberIfPresent("family_name", account.name.familyName)
            writer.endObject()
        }
        writer.member("status", account.status.rawValue)
        writer.member("created_at", account.createdAt.iso8601MicrosecondsString)
        writer.key("identities")
        writer.value((try? JSONValue.parse(Array(account.identitiesJSON.utf8))) ?? .array([]))
        writer.endObject()
        return writer.bytes
    }
}
