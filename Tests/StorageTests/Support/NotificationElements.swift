import BrokerCore
import Foundation

@testable import Storage

/// Apple notification elements for the batch statements' tests of this target (the email and
/// the unlinking batches), for team ``team`` at a fixed event time.
enum NotificationElements {
    static let team = "TEAM000001"

    static func element(_ type: String, _ subject: String, jti: String = UUID().uuidString, tenantID: UUID)
        -> EmailNotificationBatchStatement.Element
    {
        .init(
            event: .init(id: jti, type: type, subject: subject, eventTime: Date(timeIntervalSince1970: 1_795_000_000.123)),
            subject: subject, route: .init(tenantID: tenantID, teamID: team))
    }
}
