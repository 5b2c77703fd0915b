import BrokerCore
import Foundation

/// One JSON line per Supabase `auth.users` row, with an `identities` array of its
/// `auth.identities` rows (docs/import.md#supabase). Supabase names the built-in providers as
/// the broker does (`google`, `facebook`, `apple`); every other name is kept as it is.
enum SupabaseUserFormat {
    static func item(from value: JSONValue, now: Date) throws(ImportRejection) -> ImportItem {
        let user = try ImportObject(value)
        let externalID = try ImportCheck.externalID(user.requiredString("id"), field: "id")
        // A soft-deleted user (`deleted_at`): Supabase has obfuscated its email and identities.
        if try user.nonEmptyString("deleted_at") != nil {
            return .skipped(externalID: externalID, reason: "deleted in Supabase (deleted_at is set)")
        }

        var otherLogins = OtherLogins()
        let hasPassword = try user.nonEmptyString("encrypted_password") != nil
        if hasPassword { otherLogins.insert("password") }
        if try user.nonEmptyString("phone") != nil { otherLogins.insert("phone") }
        var socials: [ImportObject] = []
        for identity in try user.objects("identities") {
            switch try identity.requiredString("provider") {
            case "email": otherLogins.insert(hasPassword ? "password" : "email link")
            case "phone": otherLogins.insert("phone")
            default: socials.append(identity)
            }
        }
        if socials.isEmpty {
            let anonymous = try user.bool("is_anonymous") == true
            return try ImportRecord(externalID: externalID, identities: [])
                .importItem(otherLogins: otherLogins, orElse: anonymous ? "anonymous user" : nil)
        }

        let email = try ImportCheck.email(user.nonEmptyString("email"), field: "email")
        let emailVerified = try user.nonEmptyString("email_confirmed_at") != nil
        var identities: [ImportIdentity] = []
        for row in socials {
            identities.append(try socialIdentity(row))
        }
        let metadata = try user.object("raw_user_meta_data")
        var displayName = try metadata?.nonEmptyString("full_name")
        if displayName == nil { displayName = try metadata?.nonEmptyString("name") }
        let name = ImportName.split(displayName)
        let createdAt = try user.date("created_at")
        let banned = try isBanned(user, now: now)
        let record = ImportRecord(
            externalID: externalID, email: email, emailVerified: emailVerified, name: name, status: banned ? .disabled : .active,
            createdAt: createdAt, identities: identities)
        return try record.importItem(otherLogins: otherLogins)
    }

    /// One social `auth.identities` row. The subject is `provider_id`, or `identity_data.sub` in
    /// exports from before that column.
    private static func socialIdentity(_ row: ImportObject) throws(ImportRejection) -> ImportIdentity {
        let provider = try ImportCheck.provider(row.requiredString("provider"), field: row.field("provider"))
        let data = try row.object("identity_data")
        var subjectText = try row.identifierText("provider_id")
        if subjectText == nil { subjectText = try data?.identifierText("sub") }
        guard let subjectText else {
            throw ImportRejection("\(row.field("provider_id")) is missing")
        }
        let subject = try ImportCheck.subject(subjectText, field: row.field("provider_id"))
        let email = try ImportCheck.email(data?.nonEmptyString("email"), field: row.field("identity_data.email"))
        let emailVerified = try data?.lenientBool("email_verified") ?? false
        // Kept for Apple only: deletion revokes it and credential checks use it.
        let refreshToken = try provider == "apple" ? row.nonEmptyString("provider_refresh_token") : nil
        return ImportIdentity(
            provider: provider, subject: subject, email: email, emailVerified: email != nil && emailVerified,
            isPrivateEmail: ProviderIdentity.isAppleRelay(email), providerRefreshToken: refreshToken)
    }

    /// `banned_until` in the future (PostgreSQL writes `infinity` for a ban without end). A ban
    /// that has run out no longer stops a sign-in at Supabase, so it does not disable here.
    private static func isBanned(_ user: ImportObject, now: Date) throws(ImportRejection) -> Bool {
        switch try user.nonEmptyString("banned_until") {
        case nil, "-infinity": return false
        case "infinity": return true
        default:
            guard let until = try user.date("banned_until") else { return false }
            return until > now
        }
    }
}
