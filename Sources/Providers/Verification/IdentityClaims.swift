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
        realUserStatus = object["real_user_status"]?.number.flatMap { Int(exactly: $0.rounded(.towardZero)) }
        transferSubject = object["transfer_sub"]?.string
        authorizedParty = object["azp"]?.string
        hostedDomain = object["hd"]?.string
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
