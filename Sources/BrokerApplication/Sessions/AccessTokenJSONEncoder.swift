import BrokerCore
import Foundation
import JWTKit

/// The JSON encoder of the tenant signing-key collections: jwt-kit still builds, encodes and
/// signs every token, but an ``AccessTokenClaims`` or ``IDTokenClaims`` payload is written with
/// ``JSONWriter`` (Foundation's `JSONEncoder` took ~12 µs of the ~60 µs an access token cost;
/// decision 0011).
/// A header of string fields is written the same way; anything else goes through jwt-kit's
/// default encoder.
package struct AccessTokenJSONEncoder: JWTJSONEncoder {
    private let fallback: any JWTJSONEncoder = .defaultForJWT

    package func encode<T: Encodable>(_ value: T) throws -> Data {
        if let claims = value as? AccessTokenClaims { return Data(claims.json) }
        if let claims = value as? IDTokenClaims { return Data(claims.json) }
        if let header = value as? JWTHeader, let json = header.stringFieldsJSON { return Data(json) }
        return try fallback.encode(value)
    }
}

extension JWTHeader {
    /// The header when every field is a string (`alg`, `kid`, `typ`: all a broker token
    /// has), else nil for the default encoder. Members in name order.
    package var stringFieldsJSON: [UInt8]? {
        var writer = JSONWriter(capacity: 128)
        writer.beginObject()
        for name in fields.keys.sorted() {
            guard case .string(let value) = fields[name] else { return nil }
            writer.member(name, value)
        }
        writer.endObject()
        return writer.bytes
    }
}

extension JSONWriter {
    /// The registered claims both broker tokens carry, as jwt-kit's `Codable` writes them:
    /// NumericDates as whole seconds, a single audience as a string (as `AudienceClaim` does).
    mutating func registeredClaims(iss: IssuerClaim, sub: SubjectClaim, aud: AudienceClaim, exp: ExpirationClaim, iat: IssuedAtClaim) {
        member("iss", iss.value)
        member("sub", sub.value)
        key("aud")
        if aud.value.count == 1 {
            string(aud.value[0])
        } else {
            beginArray()
            for audience in aud.value { string(audience) }
            endArray()
        }
        member("exp", Int(exp.value.timeIntervalSince1970.rounded(.down)))
        member("iat", Int(iat.value.timeIntervalSince1970.rounded(.down)))
    }
}

extension AccessTokenClaims {
    /// The members `Codable` would write, in the same order: NumericDates as whole seconds, a
    /// single audience as a string (as jwt-kit's `AudienceClaim` does), `client_id` and `scope` only
    /// when set.
    package var json: [UInt8] {
        var writer = JSONWriter(capacity: 384)
        writer.beginObject()
        writer.registeredClaims(iss: iss, sub: sub, aud: aud, exp: exp, iat: iat)
        writer.member("jti", jti.value)
        writer.member("sid", sid)
        writer.member("idp", idp)
        writer.key("amr")
        writer.beginArray()
        for method in amr { writer.string(method) }
        writer.endArray()
        writer.memberIfPresent("client_id", clientID)
        writer.memberIfPresent("scope", scope)
        writer.endObject()
        return writer.bytes
    }
}
