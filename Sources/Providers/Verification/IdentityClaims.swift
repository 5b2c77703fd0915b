import Crypto
import BrokerCore
import Foundation

/// The claims of a verified identity token that the broker uses. Apple sends
/// `email_verified`/`is_private_email` as the strings "true"/"false" in older tokens and as
/// booleans in newer ones: both decode.
public struct IdentityClaims: Sendable, Equatable {
    public var issuer: String
    public var subject: String
    public var audiences: [String]
    public var issuedAt: Date
    public var expiresAt: Date
    public var email: String?
    public var emailVerified: Bool?
    public var isPrivateEmail: Bool?
    public var nonce: String?
    public var nonceSupported: Bool?
    public var realUserStatus: Int?
    public var transferSubject: String?
    public var authorizedParty: String?
    public var hostedDomain: String?
    /// `jti`, when the provider gives its tokens one.
    public var tokenID: String?
    /// `name`, `given_name`, `family_name` (Google, Facebook; Apple sends the name beside the token).
    public var name: PersonName
    /// Every claim, for a provider's own attributes.
    public var payload: [String: JSONValue]

    init(issuer: String, subject: String, audiences: [String], issuedAt: Date, expiresAt: Date, object: [String: JSONValue]) {
        self.issuer = issuer
        self.subject = subject
        self.audiences = audiences
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        email = object["email"]?.string
        emailVerified = Self.flag(object["email_verified"])
        isPrivateEmail = Self.flag(object["is_private_email"])
        nonce = object["nonce"]?.string
        nonceSupported = Self.flag(object["nonce_supported"])
        // Apple's 0, 1 or 2; kept in a smallint, so anything outside its range is left out.
        realUserStatus = object["real_user_status"]?.integer(in: 0...Int(Int16.max))
        transferSubject = object["transfer_sub"]?.string
        authorizedParty = object["azp"]?.string
        hostedDomain = object["hd"]?.string
        tokenID = object["jti"]?.string
        name = PersonName(givenName: object["given_name"]?.string, familyName: object["family_name"]?.string)
        payload = object
    }

    /// The key under which a tenant accepts this token once (decision 0018): SHA-256 over the
    /// tenant, the provider and the token's `jti` (so two tokens with one `jti` are one token),
    /// or the whole token when it has none.
    public func replayKey(tenantID: UUID, provider: String, token: String) -> Data {
        var material = Data("identitybroker/id-token/v1\u{0}".utf8)
        material.append(Data(tenantID.uuidString.lowercased().utf8))
        material.append(Data("\u{0}\(provider)\u{0}".utf8))
        if let tokenID, !tokenID.isEmpty {
            material.append(Data("jti\u{0}\(issuer)\u{0}\(tokenID)".utf8))
        } else {
            material.append(Data("token\u{0}\(token)".utf8))
        }
        return Data(SHA256.hash(data: material))
    }

    /// A boolean claim sent as a JSON boolean or as the string "true"/"false".
    /// 1 and 0 do not count.
    static func flag(_ value: JSONValue?) -> Bool? {
        switch value {
        case .string("true"): true
        case .string("false"): false
        case .bool(let flag): flag
        default: nil
        }
    }
}
