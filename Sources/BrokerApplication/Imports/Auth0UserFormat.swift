import BrokerCore
import Foundation

/// One line of an Auth0 user export, NDJSON (docs/import.md#auth0).
enum Auth0UserFormat {
    /// Auth0's names of the built-in providers → the broker's.
    static let builtInProviders = ["google-oauth2": "google", "facebook": "facebook", "apple": "apple"]
    /// Auth0's logins that are not social identities (database, SMS and email passwordless
    /// connections, `isSocial: false`) → how a skip reason names them. Any other provider,
    /// enterprise ones such as `oidc` included, is read as an identity under its own name.
    static let otherLoginKinds = ["auth0": "password", "sms": "phone", "email": "email code"]

    static func item(from value: JSONValue) throws(ImportRejection) -> ImportItem {
        let user = try ImportObject(value)
        let externalID = try ImportCheck.externalID(user.requiredString("user_id"), field: "user_id")

        var otherLogins = OtherLogins()
        var socials: [(identity: ImportObject, isPrimary: Bool)] = []
        let identities = try user.objects("identities")
        for (index, identity) in identities.enumerated() {
            let provider = try identity.requiredString("provider")
            if let kind = otherLoginKinds[provider] {
                otherLogins.insert(kind)
            } else {
                socials.append((identity, index == 0))
            }
        }
        // An export made without the `identities` field: the user id is `provider|subject` of the
        // primary identity.
        let primary = try identities.isEmpty ? primaryIdentity(from: externalID) : nil
        if let primary, let kind = otherLoginKinds[primary.provider] { otherLogins.insert(kind) }
        if socials.isEmpty, primary.map({ otherLoginKinds[$0.provider] != nil }) ?? true {
            return try ImportRecord(externalID: externalID, identities: []).importItem(otherLogins: otherLogins)
        }

        let email = try ImportCheck.email(user.nonEmptyString("email"), field: "email")
        let emailVerified = try user.lenientBool("email_verified") ?? false
        var imported: [ImportIdentity] = []
        if let primary {
            let provider = try ImportCheck.provider(builtInProviders[primary.provider] ?? primary.provider, field: "user_id")
            let subject = try ImportCheck.subject(primary.subject, field: "user_id")
            imported.append(
                ImportIdentity(
                    provider: provider, subject: subject, email: email, emailVerified: email != nil && emailVerified,
                    isPrivateEmail: ProviderIdentity.isAppleRelay(email)))
        }
        for (identity, isPrimary) in socials {
            let providerName = try identity.requiredString("provider")
            let provider = try ImportCheck.provider(builtInProviders[providerName] ?? providerName, field: identity.field("provider"))
            guard let subjectText = try identity.identifierText("user_id") else {
                throw ImportRejection("\(identity.field("user_id")) is missing")
            }
            let subject = try ImportCheck.subject(subjectText, field: identity.field("user_id"))
            // A linked identity carries its own profile; the primary one's is the user's.
            let profile = try identity.object("profileData")
            var identityEmail: String?
            var identityEmailVerified = false
            if let profile, let profileEmail = try profile.nonEmptyString("email") {
                identityEmail = try ImportCheck.email(profileEmail, field: profile.field("email"))
                identityEmailVerified = try profile.lenientBool("email_verified") ?? false
            } else if isPrimary, let email {
                identityEmail = email
                identityEmailVerified = emailVerified
            }
            imported.append(
                ImportIdentity(
                    provider: provider, subject: subject, email: identityEmail, emailVerified: identityEmailVerified,
                    isPrivateEmail: ProviderIdentity.isAppleRelay(identityEmail)))
        }
        let name = try personName(of: user, email: email)
        let blocked = try user.bool("blocked") ?? false
        let createdAt = try user.date("created_at")
        let record = ImportRecord(
            externalID: externalID, email: email, emailVerified: emailVerified, name: name, status: blocked ? .disabled : .active,
            createdAt: createdAt, identities: imported)
        return try record.importItem(otherLogins: otherLogins)
    }

    /// `google-oauth2|1234` → (`google-oauth2`, `1234`): the provider is everything before the
    /// first `|`, the subject everything after it.
    private static func primaryIdentity(from userID: String) throws(ImportRejection) -> (provider: String, subject: String) {
        guard let bar = userID.firstIndex(of: "|") else {
            throw ImportRejection("identities is missing and user_id is not provider|subject")
        }
        return (String(userID[..<bar]), String(userID[userID.index(after: bar)...]))
    }

    /// `given_name` and `family_name` when either is there, else `name` split on its first space.
    /// Auth0 sets `name` to the email address for database users: such a name is no name.
    private static func personName(of user: ImportObject, email: String?) throws(ImportRejection) -> PersonName {
        let given = try ImportName.clean(user.string("given_name"))
        let family = try ImportName.clean(user.string("family_name"))
        if given != nil || family != nil { return PersonName(givenName: given, familyName: family) }
        guard let name = try user.string("name"), !name.contains("@") else { return PersonName(givenName: nil, familyName: nil) }
        return ImportName.split(name)
    }
}
