import BrokerCore
import Foundation
import NIOCore

/// Apple's user migration for a team transfer: a `client_credentials` token with scope
/// `user.migration`, then `/auth/usermigrationinfo`, which the sending team asks for each
/// person's `transfer_sub` and the receiving team exchanges for the person's new `sub`.
extension AppleTokenClient {
    /// What the receiving team learns of a transferred person.
    public struct TransferredUser: Sendable, Equatable {
        public let subject: String
        public let email: String?
        public let isPrivateEmail: Bool
    }

    /// An access token for `/auth/usermigrationinfo` (`grant_type=client_credentials`,
    /// `scope=user.migration`), for the team whose client secret is given.
    public func migrationAccessToken(clientID: String, clientSecret: String) async throws(ProviderFailure) -> String {
        let answer = try await post(
            Apple.tokenURL(base: baseURL),
            form: [
                ("grant_type", "client_credentials"), ("scope", "user.migration"), ("client_id", clientID), ("client_secret", clientSecret),
            ],
            maxBytes: 65_536)
        guard answer.status == 200 else { throw Self.translate(Self.error(of: answer), clientID: clientID) }
        guard let token = TokenResponse(json: answer.body.readableBytesView)?.accessToken, !token.isEmpty else {
            throw .unreadableAnswer(.apple, .tokenEndpoint)
        }
        return token
    }

    /// The sending side: the `transfer_sub` of the person `subject` (of the caller's team) for
    /// the team `target`.
    public func transferSubject(
        of subject: String, to target: String, clientID: String, clientSecret: String, accessToken: String
    ) async throws(ProviderFailure) -> String {
        let object = try await migrationInfo(
            [("sub", subject), ("target", target), ("client_id", clientID), ("client_secret", clientSecret)], clientID: clientID,
            accessToken: accessToken)
        guard let transfer = object["transfer_sub"]?.string(maxBytes: 1_024), !transfer.isEmpty else {
            throw .unreadableAnswer(.apple, .tokenEndpoint)
        }
        return transfer
    }

    /// The receiving side: the person's `sub` in the caller's team (and relay email) for a
    /// `transfer_sub` the sending team obtained.
    public func transferredUser(
        _ transferSubject: String, clientID: String, clientSecret: String, accessToken: String
    ) async throws(ProviderFailure) -> TransferredUser {
        let object = try await migrationInfo(
            [("transfer_sub", transferSubject), ("client_id", clientID), ("client_secret", clientSecret)], clientID: clientID,
            accessToken: accessToken)
        guard let subject = object["sub"]?.string(maxBytes: 1_024), !subject.isEmpty else {
            throw .unreadableAnswer(.apple, .tokenEndpoint)
        }
        let email = object["email"]?.string(maxBytes: 320)
        // Apple writes booleans of its tokens as JSON booleans or as "true"/"false".
        let isPrivate: Bool
        switch object["is_private_email"] {
        case .bool(let value): isPrivate = value
        case .string(let text): isPrivate = text == "true"
        default: isPrivate = false
        }
        return TransferredUser(subject: subject, email: email.flatMap { $0.isEmpty ? nil : $0 }, isPrivateEmail: isPrivate)
    }

    private func migrationInfo(_ form: [(String, String)], clientID: String, accessToken: String) async throws(ProviderFailure)
        -> [String: JSONValue]
    {
        let answer = try await post(Apple.userMigrationInfoURL(base: baseURL), form: form, bearer: accessToken, maxBytes: 65_536)
        guard answer.status == 200 else { throw Self.translate(Self.error(of: answer), clientID: clientID) }
        guard let object = (try? JSONValue.parse(answer.body.readableBytesView))?.object else {
            throw .unreadableAnswer(.apple, .tokenEndpoint)
        }
        return object
    }
}
