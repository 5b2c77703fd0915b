import BrokerAPI
import BrokerCore
import Foundation
import Providers
import TestSupport
import Testing

@testable import BrokerApplication
@testable import BrokerServer

/// The sign-in routes read and write their bodies by hand (decision 0011). These fail when
/// openapi.yaml names a property that a hand-written reader does not carry into the generated
/// type, or that a hand-written writer does not write: the direct routes cannot drift from the
/// contract.
@Suite struct ContractCoverageTests {
    /// The property names of `schema` in openapi.yaml (its `properties:` block).
    static func properties(of schema: String) throws -> [String] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/BrokerAPI/openapi.yaml")
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0 == "    \(schema):" }) else {
            throw ContractMismatch(description: "no schema \(schema)")
        }
        var names: [String] = []
        var inProperties = false
        for line in lines[(start + 1)...] {
            if line.hasPrefix("    ") && !line.hasPrefix("     ") { break }  // the next schema
            if line == "      properties:" { inProperties = true; continue }
            if line.hasPrefix("      ") && !line.hasPrefix("       ") { inProperties = false }
            if inProperties, line.hasPrefix("        "), !line.hasPrefix("         "),
                let colon = line.firstIndex(of: ":")
            {
                names.append(line[line.index(line.startIndex, offsetBy: 8)..<colon].trimmingCharacters(in: .whitespaces))
            }
        }
        return names
    }

    /// Two values the contract allows for each property of a request schema.
    static func samples(_ name: String) -> (Any, Any) {
        switch name {
        case "intent": ("sign_up", "sign_in")
        case "platform": ("android", "ios")
        case "user":
            (
                ["name": ["firstName": "Ada", "lastName": "L"], "email": "e@example.com"],
                ["name": ["firstName": "Grace", "lastName": "H"], "email": "e@example.com"]
            )
        default: ("value-of-\(name)", "other-value-of-\(name)")
        }
    }

    /// The properties of `schema` that `descriptor`'s reader (``SignInBody/read(_:_:)``) carries
    /// into what it reads, from a body with every property (but `dropping`): those whose value,
    /// changed alone, changes what it reads.
    static func carried(_ schema: String, by descriptor: ProviderDescriptor, dropping: Set<String> = []) throws -> Set<String> {
        let names = try properties(of: schema).filter { !dropping.contains($0) }
        func read(changing changed: String?) throws -> ReadSignIn {
            let body = Dictionary(uniqueKeysWithValues: names.map { ($0, $0 == changed ? samples($0).1 : samples($0).0) })
            return ReadSignIn(try SignInBody.read(descriptor, try JSONValue.parse(try JSONSerialization.data(withJSONObject: body))))
        }
        let all = try read(changing: nil)
        return Set(try names.filter { try read(changing: $0) != all })
    }

    @Test func everyPropertyOfTheSignInRequestsIsRead() throws {
        let apple = try Self.carried("AppleSignInRequest", by: AppleProvider.descriptor)
        #expect(Set(try Self.properties(of: "AppleSignInRequest")).subtracting(apple).isEmpty)
        let google = try Self.carried("GoogleSignInRequest", by: GoogleProvider.descriptor)
        #expect(Set(try Self.properties(of: "GoogleSignInRequest")).subtracting(google).isEmpty)
        // One token at a time: a body with both is refused.
        let facebook = try Self.carried("FacebookSignInRequest", by: FacebookProvider.descriptor, dropping: ["limited_login_token"])
            .union(try Self.carried("FacebookSignInRequest", by: FacebookProvider.descriptor, dropping: ["access_token"]))
        #expect(Set(try Self.properties(of: "FacebookSignInRequest")).subtracting(facebook).isEmpty)
        #expect(try Self.properties(of: "GoogleSignInRequest").count == 5)
        #expect(try Self.properties(of: "AppleSignInRequest").count == 7)
    }

    @Test func everyPropertyOfTheSignInResponseIsWritten() throws {
        let now = Date(timeIntervalSince1970: 1_795_237_158)
        let response = Components.Schemas.SignInResponse(
            account: .init(
                id: "5f52c1b1-07cb-41c1-8185-af479642caef", email: "a@example.com", emailVerified: true, isPrivateEmail: true,
                name: .init(givenName: "Ada", familyName: "Lovelace"), status: .active, createdAt: now, lastSeenAt: now),
            identity: .init(
                id: "5060562a-d8da-407f-bc39-87dca042200b", provider: "google", providerScope: "", subject: "s", email: "a@example.com",
                emailVerified: true, isPrivateEmail: false, relayEmailDeliverable: true, realUserStatus: 2,
                hasProviderRefreshToken: true, attributes: .init(additionalProperties: ["hd": "example.com"]), createdAt: now,
                lastSignInAt: now),
            isNewAccount: true, linkedBy: "verified_email", possibleDuplicate: true,
            session: .init(accessToken: "a", tokenType: .bearer, expiresIn: 900, refreshToken: "r"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.json)) as? [String: Any])
        #expect(Set(object.keys) == Set(try Self.properties(of: "SignInResponse")))
        for (member, schema) in [("account", "Account"), ("identity", "IdentityInfo"), ("session", "SessionTokens")] {
            let written = Set((object[member] as? [String: Any] ?? [:]).keys)
            #expect(written == Set(try Self.properties(of: schema)), "\(schema)")
        }
    }

    @Test func everyPropertyOfTheLinkRequestIsReadByItsProvidersReader() throws {
        // `provider` picks the reader; every other member is one of a provider's sign-in members,
        // which the sign-in readers above are held to.
        let signIn = Set(
            try Self.properties(of: "AppleSignInRequest") + Self.properties(of: "GoogleSignInRequest")
                + Self.properties(of: "FacebookSignInRequest"))
        #expect(Set(try Self.properties(of: "LinkIdentityRequest")).subtracting(signIn) == ["provider"])
        let google = try LinkBody.read(
            try JSONValue.parse(Array(#"{"provider":"google","id_token":"t","nonce":"n","client_id":"c"}"#.utf8)[...]),
            providers: ProviderAdmin.registry(secrets: TestDatabase.secrets))
        #expect(google.provider == ProviderID.google)
        #expect(google.proof?.nonce == "n")
    }

    @Test func everyPropertyOfTheLinkResponsesIsWritten() throws {
        let now = Date(timeIntervalSince1970: 1_795_237_158)
        let account = Components.Schemas.Account(
            id: "5f52c1b1-07cb-41c1-8185-af479642caef", email: nil, emailVerified: false, isPrivateEmail: false, name: nil,
            status: .active, createdAt: now, lastSeenAt: nil)
        let identity = Components.Schemas.IdentityInfo(
            id: "5060562a-d8da-407f-bc39-87dca042200b", provider: "google", providerScope: "", subject: "s", email: nil,
            emailVerified: false, isPrivateEmail: false, createdAt: now)
        let linked = try #require(
            try JSONSerialization.jsonObject(with: Data(Components.Schemas.IdentityLinkResponse(account: account, identity: identity).json))
                as? [String: Any])
        #expect(Set(linked.keys) == Set(try Self.properties(of: "IdentityLinkResponse")))
        #expect((linked["account"] as? [String: Any])?["name"] is NSNull)
        let unlinked = try #require(
            try JSONSerialization.jsonObject(
                with: Data(Components.Schemas.IdentityUnlinkResponse(account: account, identity: identity, revokedSessions: 2).json))
                as? [String: Any])
        #expect(Set(unlinked.keys) == Set(try Self.properties(of: "IdentityUnlinkResponse")))
    }
}
