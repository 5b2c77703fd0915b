import BrokerCore
import Foundation
import Providers

/// A web sign-in the provider vouched for, kept sealed under its broker code until the product's
/// backend exchanges it (at most ``WebSignInService/codeLifetime``): what a native sign-in would
/// hand the sign-in statement.
struct WebSignInGrant: Codable, Sendable {
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
        self.intent = intent.rawValue
        keptRaw = verification.kept?.raw
        keptSealed = verification.kept?.sealed
    }

    /// The verified proof again; nil when a member is not what the broker writes.
    var verified: VerifiedProof? {
        guard let provider = ProviderID(rawValue: provider), let trust = EmailTrust(rawValue: emailTrust) else { return nil }
        let identity = ProviderIdentity(
            provider: provider, providerScope: providerScope, subject: subject, email: email, emailVerified: emailVerified,
            isPrivateEmail: isPrivateEmail, name: PersonName(givenName: givenName, familyName: familyName), realUserStatus: realUserStatus,
            attributes: attributes, emailTrust: trust)
        return VerifiedProof(
            identity: identity, clientID: clientID, replayKey: replayKey, issuedAt: issuedAt, replayKeyCoversIssueTime: replayKeyCoversIssueTime)
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
