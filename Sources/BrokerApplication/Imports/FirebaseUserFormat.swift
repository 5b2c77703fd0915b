import BrokerCore
import Foundation

/// One element of the `users` array that `firebase auth:export` writes (docs/import.md#firebase).
enum FirebaseUserFormat {
    /// Firebase's names of the built-in providers → the broker's.
    static let builtInProviders = ["google.com": "google", "facebook.com": "facebook", "apple.com": "apple"]
    /// Firebase's logins that are not social identities → how a skip reason names them.
    static let otherLoginKinds = ["password": "password", "phone": "phone"]

    static func item(from value: JSONValue) throws(ImportRejection) -> ImportItem {
        let user = try ImportObject(value)
        let externalID = try ImportCheck.externalID(user.requiredString("localId"), field: "localId")

        var otherLogins = OtherLogins()
        if try user.nonEmptyString("passwordHash") != nil { otherLogins.insert("password") }
        if try user.nonEmptyString("phoneNumber") != nil { otherLogins.insert("phone") }
        var providers: [ImportObject] = []
        for info in try user.objects("providerUserInfo") {
            let providerID = try info.requiredString("providerId")
            if let kind = otherLoginKinds[providerID] {
                otherLogins.insert(kind)
            } else {
                providers.append(info)
            }
        }
        if providers.isEmpty {
            return try ImportRecord(externalID: externalID, identities: []).importItem(otherLogins: otherLogins)
        }

        let email = try ImportCheck.email(user.nonEmptyString("email"), field: "email")
        let emailVerified = try user.bool("emailVerified") ?? false
        var identities: [ImportIdentity] = []
        for info in providers {
            let providerID = try info.requiredString("providerId")
            let provider = try ImportCheck.provider(builtInProviders[providerID] ?? providerID, field: info.field("providerId"))
            let subject = try ImportCheck.subject(info.requiredString("rawId"), field: info.field("rawId"))
            let identityEmail = try ImportCheck.email(info.nonEmptyString("email"), field: info.field("email"))
            // Firebase keeps no per-provider flag: the user's applies to the address it verified.
            identities.append(
                ImportIdentity(
                    provider: provider, subject: subject, email: identityEmail,
                    emailVerified: emailVerified && ImportCheck.sameEmail(identityEmail, email),
                    isPrivateEmail: ProviderIdentity.isAppleRelay(identityEmail)))
        }
        let name = try ImportName.split(user.string("displayName"))
        let disabled = try user.bool("disabled") ?? false
        let createdAt = try creationDate(of: user)
        let record = ImportRecord(
            externalID: externalID, email: email, emailVerified: emailVerified, name: name, status: disabled ? .disabled : .active,
            createdAt: createdAt, identities: identities)
        return try record.importItem(otherLogins: otherLogins)
    }

    /// `createdAt`: epoch milliseconds, as a string (what the CLI writes) or a number.
    private static func creationDate(of user: ImportObject) throws(ImportRejection) -> Date? {
        guard let value = user.value("createdAt") else { return nil }
        guard let text = value.string ?? value.integer(in: 0...Int.max).map({ String($0) }), let date = ImportDate.epochMilliseconds(text)
        else { throw ImportRejection("createdAt is not a time in epoch milliseconds") }
        return date
    }
}
