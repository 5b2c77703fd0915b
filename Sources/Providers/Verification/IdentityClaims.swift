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

    init(issuer: String, subject: String, audiences: [String], issuedAt: Date, expiresAt: Date, object: [String: Any]) {
        self.issuer = issuer
        self.subject = subject
        self.audiences = audiences
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        email = object["email"] as? String
        emailVerified = Self.flag(object["email_verified"])
        isPrivateEmail = Self.flag(object["is_private_email"])
        nonce = object["nonce"] as? String
        nonceSupported = Self.flag(object["nonce_supported"])
        realUserStatus = (object["real_user_status"] as? NSNumber)?.intValue
        transferSubject = object["transfer_sub"] as? String
        authorizedParty = object["azp"] as? String
        hostedDomain = object["hd"] as? String
    }

    /// A boolean claim sent as a JSON boolean or as the string "true"/"false".
    static func flag(_ value: Any?) -> Bool? {
        switch value {
        case let string as String: string == "true" ? true : string == "false" ? false : nil
        // JSON true/false come back as boolean NSNumbers (objCType "c"); 1 and 0 do not count.
        case let number as NSNumber where String(cString: number.objCType) == "c": number.boolValue
        default: nil
        }
    }
}
