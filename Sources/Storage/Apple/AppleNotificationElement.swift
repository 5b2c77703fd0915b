import BrokerCore
import Foundation
import Logging
import PostgresNIO

/// One of Apple's notifications on its way to a batch statement: the event, the subject it
/// names and the tenant and team its audience routed it to. Email notifications (decision 0046)
/// and consent revocations (decision 0058) are written in batches of these.
struct AppleNotificationElement: Sendable {
    let event: AppleNotificationRepository.Event
    let subject: String
    let route: AppleNotificationRepository.Route

    /// The indices of `elements` split into rounds in which no receipt key and no identity
    /// appears twice: two deliveries of one `jti` must see each other's receipt, and two events
    /// for one identity must apply in the order they came. Each element goes into the first
    /// round after the last one holding either of its keys. A batch with no such pair is one
    /// round.
    static func rounds(_ elements: [AppleNotificationElement]) -> [[Int]] {
        var rounds: [[Int]] = []
        var identityRound: [IdentityKey: Int] = [:]
        var receiptRound: [ReceiptKey: Int] = [:]
        for (index, element) in elements.enumerated() {
            let identity = IdentityKey(tenantID: element.route.tenantID, team: element.route.teamID, subject: element.subject)
            let receipt = ReceiptKey(tenantID: element.route.tenantID, jti: element.event.id)
            let round = max(identityRound[identity].map { $0 + 1 } ?? 0, receiptRound[receipt].map { $0 + 1 } ?? 0)
            if round == rounds.count { rounds.append([]) }
            rounds[round].append(index)
            identityRound[identity] = round
            receiptRound[receipt] = round
        }
        return rounds
    }

    /// The element's fields every batch statement reads, in its JSON object: `n` (its index in
    /// the statement), `t` (tenant), `j` (`jti`), `ty` (type), `et` (event time in
    /// microseconds), `etx` (the same as ISO 8601), `sc` (team) and `u` (subject).
    func writeCommonMembers(_ n: Int, into writer: inout JSONWriter) {
        writer.member("n", n)
        writer.member("t", route.tenantID.lowercasedString)
        writer.member("j", event.id)
        writer.member("ty", event.type)
        writer.member("et", event.eventTime.map(UnixTime.microseconds))
        writer.member("etx", event.eventTime?.iso8601String)
        writer.member("sc", route.teamID)
        writer.member("u", subject)
    }
}

extension AppleNotificationElement {
    typealias Batch = StatementBatcher<AppleNotificationElement, AppleNotificationRepository.Outcome>
    typealias Write = @Sendable ([AppleNotificationElement], PostgresClient, Logger) async throws -> [AppleNotificationRepository.Outcome]

    /// The batches of one notification statement (`write`): `maxRunning` slots (nil when 0:
    /// batching off), up to 64 elements each, each batch on the pool in use when it starts
    /// (``DatabasePool``) and in its tenant's scope, or across tenants when it carries several.
    static func batcher(
        pool: DatabasePool, logger: Logger, maxRunning: Int, timeout: Duration, label: String, write: @escaping Write
    ) -> Batch? {
        guard maxRunning > 0 else { return nil }
        return Batch(maxRunning: maxRunning, maxBatch: 64, timeout: timeout) { elements in
            try await TenantScope.shared(by: elements.lazy.map(\.route.tenantID), because: "a batch carries several tenants' notifications")
            {
                try await writeFailingAlone(elements, client: pool.client, logger: logger, label: label, write: write)
            }
        }
    }

    /// A batch whose failure one element caused (a data exception, an integrity violation, a
    /// rollback or a deadlock with another batch) runs again element by element, so that element
    /// fails alone (as quiet sign-ins do).
    static func writeFailingAlone(
        _ elements: [AppleNotificationElement], client: PostgresClient, logger: Logger, label: String, write: Write
    ) async throws -> [AppleNotificationRepository.Outcome] {
        do {
            return try await write(elements, client, logger)
        } catch let error where elements.count > 1 && error.postgresError.map(BatchElements.isAboutOneElement) == true {
            logger.debug(
                "notification batch failed; writing its elements one by one",
                metadata: ["statement": "\(label)", "sqlstate": "\(error.postgresError?.sqlState ?? "")"])
            var outcomes: [AppleNotificationRepository.Outcome] = []
            for element in elements {
                outcomes.append(try await write([element], client, logger)[0])
            }
            return outcomes
        }
    }
}

/// An identity a notification names, and a notification's receipt key.
private struct IdentityKey: Hashable {
    let tenantID: UUID
    let team: String
    let subject: String
}

private struct ReceiptKey: Hashable {
    let tenantID: UUID
    let jti: String
}
