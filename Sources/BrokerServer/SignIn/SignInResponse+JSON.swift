import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation

/// The sign-in response as JSON text, written with ``JSONWriter``: the members, names and
/// omissions of the generated `Codable` conformance (optional members absent when nil, dates
/// as ``ISO8601Transcoder`` writes them), except `account.name`, which the contract makes
/// always present (`null` when unknown) and `linked_by` (the same), which the synthesized
/// conformance would omit.
/// Foundation's `JSONEncoder` took about a tenth of a returning sign-in's CPU for this one
/// document (decision 0011); a test holds the two equal.
extension Components.Schemas.SignInResponse {
    var json: [UInt8] {
        var writer = JSONWriter(capacity: 1_536)
        writer.beginObject()
        writer.key("account")
        account.write(to: &writer)
        writer.key("identity")
        identity.write(to: &writer)
        writer.member("is_new_account", isNewAccount)
        // Always present, null when the identity did not join an existing account.
        writer.member("linked_by", linkedBy)
        writer.member("possible_duplicate", possibleDuplicate)
        writer.key("session")
        session.write(to: &writer)
        writer.endObject()
        return writer.bytes
    }
}

extension Components.Schemas.Account {
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("id", id)
        writer.memberIfPresent("email", email)
        writer.member("email_verified", emailVerified)
        writer.member("is_private_email", isPrivateEmail)
        writer.key("name")
        if let name {
            writer.beginObject()
            writer.memberIfPresent("given_name", name.givenName)
            writer.memberIfPresent("family_name", name.familyName)
            writer.endObject()
        } else {
            writer.null()
        }
        writer.member("status", status.rawValue)
        writer.member("created_at", ISO8601Transcoder.string(createdAt))
        writer.memberIfPresent("last_seen_at", lastSeenAt.map(ISO8601Transcoder.string))
        writer.member("external_id", externalId)
        writer.endObject()
    }
}

extension Components.Schemas.IdentityInfo {
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.memberIfPresent("id", id)
        writer.member("provider", provider)
        writer.memberIfPresent("provider_scope", providerScope)
        writer.member("subject", subject)
        writer.memberIfPresent("email", email)
        writer.member("email_verified", emailVerified)
        writer.member("is_private_email", isPrivateEmail)
        if let relayEmailDeliverable { writer.member("relay_email_deliverable", relayEmailDeliverable) }
        writer.memberIfPresent("real_user_status", realUserStatus)
        if let hasProviderRefreshToken { writer.member("has_provider_refresh_token", hasProviderRefreshToken) }
        if let attributes = attributes?.additionalProperties, !attributes.isEmpty {
            writer.key("attributes")
            writer.beginObject()
            for (name, value) in attributes.sorted(by: { $0.key < $1.key }) { writer.member(name, value) }
            writer.endObject()
        }
        writer.member("created_at", ISO8601Transcoder.string(createdAt))
        writer.memberIfPresent("last_sign_in_at", lastSignInAt.map(ISO8601Transcoder.string))
        writer.endObject()
    }
}

extension Components.Schemas.SessionTokens {
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("access_token", accessToken)
        writer.member("token_type", tokenType.rawValue)
        writer.member("expires_in", expiresIn)
        writer.member("refresh_token", refreshToken)
        writer.endObject()
    }
}

extension Components.Schemas.AccountDetails {
    /// `GET /v1/accounts/{id}`'s body, written like the sign-in response (``AccountRoute``).
    var json: [UInt8] {
        var writer = JSONWriter(capacity: 1_024 + 512 * identities.count)
        write(to: &writer)
        return writer.bytes
    }

    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("account")
        account.write(to: &writer)
        writer.key("identities")
        writer.beginArray()
        for identity in identities { identity.write(to: &writer) }
        writer.endArray()
        writer.endObject()
    }
}
