import BrokerCore
import BrokerApplication
import BrokerServer
import Foundation
import Storage
import TestSupport
import Testing

/// A database dump must not contain any private key or API key in plain text.
@Suite struct SecretsAtRestTests {
    func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

    @Test func pgDumpHoldsNoPlaintextSecret() async throws {
        try await TestDatabase.withFresh { database, url in
            let tenant = try await TenantAdmin(database: database, actor: "test").create(
                slug: "acme", name: "Acme", secrets: TestDatabase.secrets)
            _ = try await SigningKeyAdmin(database: database, secrets: TestDatabase.secrets, actor: "test").rotate(
                tenant: "acme")
            let (_, apiKey) = try await APIKeyAdmin(database: database, actor: "test").create(
                tenant: "acme", name: nil, scopes: [])

            let binDirectory = try #require(ProcessInfo.processInfo.environment["BROKER_POSTGRES_BIN"])
            let dump = try await onOwnThread { try ProcessRunner.run(binDirectory + "/pg_dump", ["--data-only", "--dbname", url]) }
            #expect(dump.status == 0, "\(dump.output.prefix(500))")
            let text = dump.output

            // The scan is meaningful: the dump holds the rows (key hash, public keys).
            let token = try #require(APIKeyToken(parsing: apiKey))
            #expect(text.contains(hex(token.hash)))
            #expect(!text.contains(apiKey))
            #expect(!text.contains(String(apiKey.dropFirst(13))))

            let records = try await database.signingKeys.list(tenantID: tenant.id)
            #expect(records.count == 2)
            for record in records {
                #expect(text.contains(hex(record.publicKey)))
                let privateKey = try TestDatabase.secrets.open(
                    record.sealedPrivateKey, context: SigningKeyRecord.sealingContext(tenantID: tenant.id, kid: record.kid),
                    what: "signing key")
                #expect(!text.contains(hex(privateKey)))
                #expect(!text.contains(privateKey.base64EncodedString()))
                #expect(!text.contains(Base64URL.encode(privateKey)))
            }
            #expect(!text.contains(TestDatabase.masterKey.base64ForTests))
        }
    }
}
