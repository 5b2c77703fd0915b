import BrokerCore
import PostgresNIO

/// The parameter runs both sign-in statements share, in the order both take them.
extension PostgresBindings {
    /// What the sign-in brings for the identity: email, `email_verified`, `is_private_email`,
    /// given name, family name, `real_user_status`. Empty strings go as NULL: they never
    /// blank what is stored.
    mutating func appendPostedIdentity(of request: SignInRequest) {
        append(request.email.flatMap { $0.isEmpty ? nil : $0 })
        append(request.emailVerified)
        append(request.isPrivateEmail)
        append(request.name.givenName.flatMap { $0.isEmpty ? nil : $0 })
        append(request.name.familyName.flatMap { $0.isEmpty ? nil : $0 })
        append(request.realUserStatus)
    }

    /// The session to open, with its first refresh token: session id, client id, platform,
    /// session expiry, refresh-token hash, its idle expiry.
    mutating func appendNewSession(of request: SignInRequest) throws {
        append(request.session.id)
        append(request.clientID)
        append(request.platform)
        append(request.session.expiresAt)
        try append(request.session.refreshTokenHash)
        append(request.session.refreshTokenExpiresAt)
    }
}
