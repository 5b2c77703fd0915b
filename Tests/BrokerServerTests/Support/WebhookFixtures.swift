import AsyncHTTPClient
import BrokerApplication
import BrokerCore
import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Synchronization
import Providers
import Storage
import TestSupport
import Testing

/// The webhook tests' setup, shared with the graceful stop tests: a tenant's webhook at a
/// loopback sink, sign-ins and deletions that make events, the delivery worker.
enum WebhookFixtures {
    static func setWebhook(_ setup: AppleTestSetup, _ sink: WebhookSink, events: [String] = [], rotate: Bool = false) async throws
        -> String?
    {
        try await WebhookAdmin(database: setup.app.database, actor: "test").set(
            tenant: "acme", url: sink.url, events: events, rotateSecret: rotate, secrets: setup.app.secrets, allowInsecure: true
        ).secret
    }

    static func signIn(_ setup: AppleTestSetup, _ subject: String) async throws -> String {
        let body = try await setup.signIn(["client_id": "com.acme.app", "identity_token": try setup.token(subject: subject)])
        return try #require(body[path: "account.id"] as? String)
    }

    static func delete(_ setup: AppleTestSetup, _ account: String) async throws {
        let deleted = try await setup.client.execute(uri: "/v1/accounts/\(account)", method: .delete, headers: bearer(setup.apiKey))
        #expect(deleted.status == .ok)
    }

    /// A worker beside the test app's own, on a clock the test moves.
    static func worker(_ setup: AppleTestSetup, maxAttempts: Int = 30) -> WebhookDeliveryWorker {
        var policy = RetryBackoff()
        policy.maxAttempts = maxAttempts
        return WebhookDeliveryWorker(
            database: setup.app.database, secrets: setup.app.secrets, allowInsecure: true, timeout: .seconds(5), policy: policy,
            logger: setup.app.database.logger)
    }

    /// Stock Standard Webhooks verification (Python's `standardwebhooks`): the body it returns.
    static func verify(_ delivery: WebhookSink.Delivery, secret: String) async throws -> ProcessRunner.Result {
        let script = """
            import json, sys
            from standardwebhooks.webhooks import Webhook
            headers = {"webhook-id": sys.argv[2], "webhook-timestamp": sys.argv[3], "webhook-signature": sys.argv[4]}
            print(json.dumps(Webhook(sys.argv[1]).verify(sys.argv[5], headers)))
            """
        let arguments = ["python3", "-c", script, secret, delivery.id, delivery.timestamp, delivery.signature, delivery.body]
        return try await onOwnThread { try ProcessRunner.run("/usr/bin/env", arguments) }
    }

    /// The code `set` refuses `url` with; nil when it takes it.
    static func refusal(_ admin: WebhookAdmin, _ secrets: SecretBox, _ url: String, events: [String]) async -> String? {
        do {
            _ = try await admin.set(tenant: "acme", url: url, events: events, rotateSecret: false, secrets: secrets, allowInsecure: false)
            return nil
        } catch {
            return (error as? BrokerError)?.code ?? "\(error)"
        }
    }
}
