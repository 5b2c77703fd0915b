import BrokerCore
import Foundation
import Providers

/// A web sign-in the provider vouched for, kept sealed under its broker code until the product's
/// backend exchanges it (at most ``WebSignInService/codeLifetime``): what a native sign-in would
/// hand the sign-in statement.
struct WebSignInGrant: Sendable, Equatable {
    var provider: String
    var providerScope: String
    var subject: String
    var email: String?
    var emailVerified: Bool
    var isPrivateEmail: Bool
    var givenName: String?
    var familyName: String?
    var realUserStatus: Int?
    var attributes: [String: String]
    var emailTrust: String
    var clientID: String
    var replayKey: Data?
    var issuedAt: Date
    var replayKeyCoversIssueTime: Bool
    var intent: String
    var transferSubject: String?
    /// Apple's refresh token: raw (to give it back should the sign-in not complete) and sealed
    /// as the identity keeps it.
    var keptRaw: String?
    var keptSealed: Data?

    init(_ verification: WebVerification, intent: SignInIntent) {
        let verified = verification.verified
        let identity = verified.identity
        provider = identity.provider.rawValue
        providerScope = identity.providerScope
        subject = identity.subject
        email = identity.email
        emailVerified = identity.emailVerified
        isPrivateEmail = identity.isPrivateEmail
        givenName = identity.name.givenName
        familyName = identity.name.familyName
        realUserStatus = identity.realUserStatus
        attributes = identity.attributes
        emailTrust = identity.emailTrust.rawValue
        clientID = verified.clientID
        replayKey = verified.replayKey
        issuedAt = verified.issuedAt
        replayKeyCoversIssueTime = verified.replayKeyCoversIssueTime
        transferSubject = verified.transferSubject
        self.intent = intent.rawValue
        keptRaw = verification.kept?.raw
        keptSealed = verification.kept?.sealed
    }

    /// The verified proof again; nil when a member is not what the broker writes.
    /// The grant as JSON, written with ``JSONWriter`` (Foundation's encoder took a twentieth of a
    /// callback's CPU).
    var json: [UInt8] {
        var object: [String: JSONValue] = [
            "provider": .string(provider), "provider_scope": .string(providerScope), "subject": .string(subject),
            "email_verified": .bool(emailVerified), "is_private_email": .bool(isPrivateEmail),
            "attributes": .object(attributes.mapValues(JSONValue.string)), "email_trust": .string(emailTrust),
            "client_id": .string(clientID), "issued_at": .number(issuedAt.timeIntervalSince1970),
            "replay_key_covers_issue_time": .bool(replayKeyCoversIssueTime), "intent": .string(intent),
        ]
        object["email"] = email.map(JSONValue.string)
        object["given_name"] = givenName.map(JSONValue.string)
        object["family_name"] = familyName.map(JSONValue.string)
        object["real_user_status"] = realUserStatus.map { .number(Double($0)) }
        object["replay_key"] = replayKey.map { .string($0.base64EncodedString()) }
        object["kept_raw"] = keptRaw.map(JSONValue.string)
        object["transfer_sub"] = transferSubject.map(JSONValue.string)
        object["kept_sealed"] = keptSealed.map { .string($0.base64EncodedString()) }
        var writer = JSONWriter(capacity: 1_024)
        writer.value(.object(object))
        return writer.bytes
    }

    /// Reads what ``json`` wrote; nil for anything else.
    init?(json bytes: some Collection<UInt8>) {
        guard let object = (try? JSONValue.parse(bytes, maxDepth: 4))?.object, let provider = object["provider"]?.string,
            let providerScope = object["provider_scope"]?.string, let subject = object["subject"]?.string,
            case .bool(let emailVerified)? = object["email_verified"], case .bool(let isPrivateEmail)? = object["is_private_email"],
            let attributes = object["attributes"]?.object, let emailTrust = object["email_trust"]?.string,
            let clientID = object["client_id"]?.string, let issuedAt = object["issued_at"]?.number,
            case .bool(let covers)? = object["replay_key_covers_issue_time"], let intent = object["intent"]?.string
        else { return nil }
        self.provider = provider
        self.providerScope = providerScope
        self.subject = subject
        self.email = object["email"]?.string
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.givenName = object["given_name"]?.string
        self.familyName = object["family_name"]?.string
        self.realUserStatus = object["real_user_status"]?.integer()
        self.attributes = attributes.compactMapValues(\.string)
        self.emailTrust = emailTrust
        self.clientID = clientID
        self.replayKey = object["replay_key"]?.string.flatMap { Data(base64Encoded: $0) }
        self.issuedAt = Date(timeIntervalSince1970: issuedAt)
        self.replayKeyCoversIssueTime = covers
        self.intent = intent
        self.keptRaw = object["kept_raw"]?.string
        self.transferSubject = object["transfer_sub"]?.string
        self.keptSealed = object["kept_sealed"]?.string.flatMap { Data(base64Encoded: $0) }
    }

    var verified: VerifiedProof? {
        guard let provider = ProviderID(rawValue: provider), let trust = EmailTrust(rawValue: emailTrust) else { return nil }
        let identity = ProviderIdentity(
            provider: provider, providerScope: providerScope, subject: subject, email: email, emailVerified: emailVerified,
            isPrivateEmail: isPrivateEmail, name: PersonName(givenName: givenName, familyName: familyName), realUserStatus: realUserStatus,
            attributes: attributes, emailTrust: trust)
        return VerifiedProof(
            identity: identity, clientID: clientID, replayKey: replayKey, issuedAt: issuedAt,
            replayKeyCoversIssueTime: replayKeyCoversIssueTime,
            transferSubject: transferSubject)
    }

    var kept: KeptProviderToken? {
        guard let keptRaw, let keptSealed else { return nil }
        return KeptProviderToken(raw: keptRaw, sealed: keptSealed)
    }

    var signInIntent: SignInIntent { SignInIntent(rawValue: intent) ?? .signIn }

    /// The sealing context of a grant: it opens only for its tenant and provider.
    static func sealingContext(tenantID: UUID, provider: ProviderID) -> String {
        "web_sign_in_grant:\(tenantID.lowercasedString):\(provider.rawValue)"
    }
}
