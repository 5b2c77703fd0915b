import BrokerCore
import Foundation

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
        writer.member("et", event.eventTime.map { Int(($0.timeIntervalSince1970 * 1_000_000).rounded(.towardZero)) })
        writer.member("etx", event.eventTime?.iso8601String)
        writer.member("sc", route.teamID)
        writer.member("u", subject)
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
