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

    /// The provider's extra attributes as a JSON object, or NULL when there are none.
    mutating func appendAttributes(of request: SignInRequest) {
        append(IdentityAttributes.encode(request.attributes))
    }
}

/// An identity's extra attributes as stored: a JSON object of strings (`identities.attributes`).
enum IdentityAttributes {
    static func encode(_ attributes: [String: String]) -> String? {
        guard !attributes.isEmpty else { return nil }
        var writer = JSONWriter(capacity: 64)
        writer.beginObject()
        for (name, value) in attributes.sorted(by: { $0.key < $1.key }) { writer.member(name, value) }
        writer.endObject()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func decode(_ text: String?) -> [String: String] {
        guard let text, let object = (try? JSONValue.parse(text.utf8))?.object else { return [:] }
        return object.compactMapValues(\.string)
    }
}
