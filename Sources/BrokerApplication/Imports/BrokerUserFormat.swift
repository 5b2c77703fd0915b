import BrokerCore
import Foundation

/// One line of the broker's own import format, `jsonl` (docs/import.md#jsonl): what `broker
/// export users` writes and `POST /v1/accounts/import` takes. Read strictly: a member of the
/// wrong type is an error, not a default. Members the format does not define are ignored.
enum BrokerUserFormat {
    static func item(from value: JSONValue) throws(ImportRejection) -> ImportItem {
        let user = try ImportObject(value)
        let externalID = try ImportCheck.externalID(user.requiredString("external_id"), field: "external_id")
        let email = try ImportCheck.email(user.string("email"), field: "email")
        let emailVerified = try user.bool("email_verified") ?? false
        let name = try personName(of: user)
        let status = try accountStatus(of: user)
        let createdAt = try user.date("created_at")

        guard user.value("identities") != nil else { throw ImportRejection("identities is missing") }
        let rows = try user.objects("identities")
        guard !rows.isEmpty else { throw ImportRejection("identities is empty: a record needs at least one identity") }
        var identities: [ImportIdentity] = []
        for row in rows {
            identities.append(try identity(row))
        }
        let record = ImportRecord(
            externalID: externalID, email: email, emailVerified: emailVerified, name: name, status: status, createdAt: createdAt,
            identities: identities)
        return try record.importItem(otherLogins: OtherLogins())
    }

    private static func identity(_ row: ImportObject) throws(ImportRejection) -> ImportIdentity {
        let provider = try ImportCheck.provider(row.requiredString("provider"), field: row.field("provider"))
        guard let subjectValue = row.value("subject") else { throw ImportRejection("\(row.field("subject")) is missing") }
        guard let subjectText = subjectValue.string else { throw ImportRejection("\(row.field("subject")) is not a string") }
        let subject = try ImportCheck.subject(subjectText, field: row.field("subject"))
        let scope = try ImportCheck.providerScope(row.string("provider_scope"), field: row.field("provider_scope"))
        let email = try ImportCheck.email(row.string("email"), field: row.field("email"))
        let emailVerified = try row.bool("email_verified") ?? false
        let isPrivateEmail = try row.bool("is_private_email") ?? false
        let refreshToken = try row.nonEmptyString("provider_refresh_token")
        return ImportIdentity(
            provider: provider, subject: subject, providerScope: scope, email: email, emailVerified: email != nil && emailVerified,
            isPrivateEmail: isPrivateEmail || ProviderIdentity.isAppleRelay(email), providerRefreshToken: refreshToken)
    }

    /// `name`: an object with `given_name` and `family_name`, each a string or absent.
    private static func personName(of user: ImportObject) throws(ImportRejection) -> PersonName {
        guard let name = try user.object("name") else { return PersonName(givenName: nil, familyName: nil) }
        let given = try ImportName.clean(name.string("given_name"))
        let family = try ImportName.clean(name.string("family_name"))
        return PersonName(givenName: given, familyName: family)
    }

    /// `status`: `active` (the default) or `disabled`.
    private static func accountStatus(of user: ImportObject) throws(ImportRejection) -> AccountStatus {
        switch try user.string("status") {
        case nil, "active": return .active
        case "disabled": return .disabled
        case let other?:
            throw ImportRejection("status \"\(FreeText.escaped(String(other.prefix(32))))\" is not active or disabled")
        }
    }
}
