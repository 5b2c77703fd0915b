import BrokerCore
import Foundation
import Storage

/// The operator's actions on a tenant's relying parties (`broker client ...`, issue 42 §1,
/// decision 0081): each input checked before anything is stored, the secret returned once.
public struct ClientAdmin: Sendable {
    package let database: Database
    package let actor: String

    public init(database: Database, actor: String) {
        self.database = database
        self.actor = actor
    }

    /// What `create` and `rotate-secret` hand back: the client, and a confidential client's new
    /// secret (shown once, never stored).
    public struct Issued: Sendable {
        public let client: OAuthClient
        public let secret: String?
    }

    public static let maximumRedirectURIs = 20

    /// Registers a client: a confidential one gets a secret, a public one (`isPublic`) none.
    public func create(
        tenant slug: String, name: String, redirectURIs: [String], postLogoutRedirectURIs: [String] = [], isPublic: Bool,
        allowLoopback: Bool, now: Date = Date()
    ) async throws -> Issued {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let name = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...100).contains(name.count) else {
            throw BrokerError.invalidArgument("The client name must be 1 to 100 characters.", hint: "For example: --name web")
        }
        try FreeText.require(name, option: "--name")
        let redirects = try Self.checked(redirectURIs, option: "--redirect-uri", isPublic: isPublic, allowLoopback: allowLoopback)
        guard !redirects.isEmpty else {
            throw BrokerError.invalidArgument(
                "Give at least one --redirect-uri.", hint: "The URI the app receives the code at, e.g. https://app.example.com/callback")
        }
        let logouts = try Self.checked(
            postLogoutRedirectURIs, option: "--post-logout-redirect-uri", isPublic: isPublic, allowLoopback: allowLoopback)
        let secret = isPublic ? nil : ClientSecret.generate()
        let client = OAuthClient(
            tenantID: tenant.id, clientID: OAuthClient.newClientID(), name: name, isPublic: isPublic, redirectURIs: redirects,
            postLogoutRedirectURIs: logouts, allowLoopback: allowLoopback, createdAt: now)
        try await database.oauthClients.insert(client, secretHash: secret?.hash, actor: actor)
        return Issued(client: client, secret: secret?.value)
    }

    public func list(tenant slug: String) async throws -> [OAuthClient] {
        let tenant = try await TenantAdmin.find(slug, in: database)
        return try await database.oauthClients.list(tenantID: tenant.id)
    }

    public func show(tenant slug: String, clientID: String) async throws -> OAuthClient {
        let tenant = try await TenantAdmin.find(slug, in: database)
        guard let client = try await database.oauthClients.find(tenantID: tenant.id, clientID: try Self.clientID(clientID, tenant: slug))
        else { throw Self.notFound(clientID, tenant: slug) }
        return client
    }

    /// Removes the client: its redirect URIs and secret stop working at once.
    public func remove(tenant slug: String, clientID: String) async throws -> OAuthClient {
        let tenant = try await TenantAdmin.find(slug, in: database)
        guard
            let client = try await database.oauthClients.remove(
                tenantID: tenant.id, clientID: try Self.clientID(clientID, tenant: slug), actor: actor)
        else { throw Self.notFound(clientID, tenant: slug) }
        return client
    }

    /// A new secret for a confidential client; the old one stops working at once.
    public func rotateSecret(tenant slug: String, clientID: String, now: Date = Date()) async throws -> Issued {
        let tenant = try await TenantAdmin.find(slug, in: database)
        let id = try Self.clientID(clientID, tenant: slug)
        let secret = ClientSecret.generate()
        guard
            let client = try await database.oauthClients.rotateSecret(
                tenantID: tenant.id, clientID: id, secretHash: secret.hash, actor: actor, now: now)
        else {
            if let found = try await database.oauthClients.find(tenantID: tenant.id, clientID: id), found.isPublic {
                throw BrokerError(
                    code: "client_is_public", kind: .conflict, title: "Public client",
                    detail: "Client \(id) of tenant '\(slug)' is public: it has no secret to rotate.",
                    hint: "A public client proves itself with PKCE; register a confidential one without --public if it needs a secret.")
            }
            throw Self.notFound(clientID, tenant: slug)
        }
        return Issued(client: client, secret: secret.value)
    }

    /// The URIs as given, each checked (``RedirectURI/refusal(_:isPublic:allowLoopback:)``), repeats dropped.
    static func checked(_ uris: [String], option: String, isPublic: Bool, allowLoopback: Bool) throws -> [String] {
        var kept: [String] = []
        for uri in uris where !kept.contains(uri) {
            if let refusal = RedirectURI.refusal(uri, isPublic: isPublic, allowLoopback: allowLoopback) {
                throw BrokerError.invalidArgument(
                    "\(option) '\(uri.prefix(200))' cannot be registered: \(refusal).",
                    hint: "Give the URI exactly as the app will send it; it is compared character for character.")
            }
            kept.append(uri)
        }
        guard kept.count <= maximumRedirectURIs else {
            throw BrokerError.invalidArgument("At most \(maximumRedirectURIs) of \(option) per client.")
        }
        return kept
    }

    static func clientID(_ text: String, tenant slug: String) throws -> String {
        guard OAuthClient.isClientID(text) else {
            throw BrokerError.invalidArgument(
                "'\(text.prefix(60))' is not a client id (ibc_ and 22 characters).",
                hint: "The ids are listed by 'broker client list --tenant \(slug)'.")
        }
        return text
    }

    static func notFound(_ clientID: String, tenant slug: String) -> BrokerError {
        BrokerError(
            code: "client_not_found", kind: .notFound, title: "Client not found",
            detail: "Tenant '\(slug)' has no client \(clientID.prefix(60)).", hint: "See 'broker client list --tenant \(slug)'.")
    }
}
