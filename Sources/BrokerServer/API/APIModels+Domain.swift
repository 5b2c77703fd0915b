import BrokerAPI
import BrokerApplication
import BrokerCore

/// The contract's shapes of domain values (openapi.yaml `components/schemas`).
extension Components.Schemas.Account {
    init(_ account: Account) {
        self.init(
            id: account.id.lowercasedString, email: account.email, emailVerified: account.emailVerified,
            isPrivateEmail: account.isPrivateEmail,
            name: account.name.isEmpty ? nil : .init(givenName: account.name.givenName, familyName: account.name.familyName),
            status: .init(rawValue: account.status.rawValue) ?? .disabled, createdAt: account.createdAt,
            lastSeenAt: account.lastSeenAt, externalId: account.externalID)
    }
}

extension Components.Schemas.IdentityInfo {
    init(_ identity: Identity) {
        self.init(
            id: identity.id.lowercasedString, provider: identity.provider,
            providerScope: identity.providerScope, subject: identity.subject, email: identity.email,
            emailVerified: identity.emailVerified, isPrivateEmail: identity.isPrivateEmail,
            relayEmailDeliverable: identity.relayEmailDeliverable, realUserStatus: identity.realUserStatus,
            hasProviderRefreshToken: identity.hasProviderRefreshToken,
            attributes: identity.attributes.isEmpty ? nil : .init(additionalProperties: identity.attributes),
            createdAt: identity.createdAt, lastSignInAt: identity.lastSignInAt)
    }
}

extension Components.Schemas.SessionTokens {
    init(_ session: IssuedSession) {
        self.init(
            accessToken: session.accessToken, tokenType: .bearer, expiresIn: session.expiresIn,
            refreshToken: session.refreshToken.value)
    }
}

extension Components.Schemas.SignInResponse {
    init(_ outcome: SignInOutcome) {
        self.init(
            account: .init(outcome.account), identity: .init(outcome.identity), isNewAccount: outcome.isNewAccount,
            linkedBy: outcome.linkedBy?.rawValue, possibleDuplicate: outcome.possibleDuplicate, session: .init(outcome.session))
    }
}
