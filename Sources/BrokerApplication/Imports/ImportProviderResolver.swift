import BrokerCore
import Foundation
import Providers
import Storage

/// Turns a record's identities, named as the source names them, into the tenant's provider ids
/// and scopes (issue 24): an Apple `sub` is only meaningful under the team that issued it, a
/// Facebook id under its app id, an OpenID `sub` under its issuer. A scope the file gives must
/// be the one the tenant's configuration gives, or the identity would never match a sign-in.
package struct ImportProviderResolver: Sendable {
    package struct Target: Sendable, Equatable {
        package let provider: String
        package let type: ProviderType
        /// The scope identities of this provider take; nil for an issuer template (`{tid}`),
        /// whose records must carry their own.
        package let scope: String?
        /// A `{tid}` issuer: the scope a record gives must match it.
        package let issuerTemplate: String?
    }

    /// Source provider name → the tenant's provider.
    let targets: [String: Target]
    /// The Apple team of imported Apple identities, and the client their refresh tokens were
    /// obtained with (the team's first primary App ID).
    let appleTeam: String?
    let appleClientID: String?
    let tenantID: UUID
    let secrets: SecretBox

    /// Reads the tenant's providers. `map` is `--map-provider SOURCE=ID`; `apple` and the
    /// tenant's own provider ids map to themselves unless mapped.
    package static func load(
        tenant: Tenant, database: Database, secrets: SecretBox, appleTeam requestedTeam: String?, map: [String: String]
    ) async throws -> ImportProviderResolver {
        let configurations = try await database.providerConfigs.list(tenantID: tenant.id)
        let teams = try await database.apple.teams(tenantID: tenant.id)
        var team: AppleTeam?
        if let requestedTeam {
            guard let found = teams.first(where: { $0.teamID == requestedTeam }) else {
                throw BrokerError(
                    code: "apple_team_not_configured", kind: .invalidInput, title: "Apple team not configured",
                    detail: "Tenant '\(tenant.slug)' has no Apple team \(requestedTeam.prefix(10)).",
                    hint:
                        "Set it first (broker apple team set --tenant \(tenant.slug) --team-id \(requestedTeam.prefix(10)) ...), or pass the team the tenant has."
                )
            }
            team = found
        } else if teams.count == 1 {
            team = teams.first
        }
        var clientID: String?
        if let team {
            clientID = try await database.apple.groups(tenantID: tenant.id).first { $0.teamRef == team.id }?.primaryAppID
        }

        var targets: [String: Target] = [:]
        func target(for id: String) -> Target? {
            if id == ProviderID.apple.rawValue {
                return Target(provider: id, type: .apple, scope: team?.teamID, issuerTemplate: nil)
            }
            guard let configuration = configurations.first(where: { $0.provider.rawValue == id }) else { return nil }
            switch configuration.type {
            case .google: return Target(provider: id, type: .google, scope: "", issuerTemplate: nil)
            case .facebook: return Target(provider: id, type: .facebook, scope: configuration.appID, issuerTemplate: nil)
            case .apple: return Target(provider: id, type: .apple, scope: team?.teamID, issuerTemplate: nil)
            default:
                // An OpenID Connect provider: its identities are scoped to its issuer.
                guard let issuer = configuration.settings["issuer"]?.string else { return nil }
                return IssuerTemplate.isTemplate(issuer)
                    ? Target(provider: id, type: configuration.type, scope: nil, issuerTemplate: issuer)
                    : Target(provider: id, type: configuration.type, scope: issuer, issuerTemplate: nil)
            }
        }
        // A name that is one of the tenant's provider ids is that provider (the `jsonl` format
        // names them so); other names need `--map-provider`.
        for id in ProviderID.reserved.map(\.rawValue) + configurations.map(\.provider.rawValue) {
            if let found = target(for: id) { targets[id] = found }
        }
        for (source, id) in map {
            guard let found = target(for: id) else {
                throw BrokerError(
                    code: "provider_not_configured", kind: .invalidInput, title: "Provider not configured",
                    detail: "--map-provider \(source)=\(id): tenant '\(tenant.slug)' has no provider '\(id)'.",
                    hint: "List the tenant's providers with: broker provider list --tenant \(tenant.slug)")
            }
            targets[source] = found
        }
        return ImportProviderResolver(
            targets: targets, appleTeam: team?.teamID, appleClientID: clientID, tenantID: tenant.id, secrets: secrets)
    }

    /// The record as the database takes it, or the reason it cannot be imported.
    package func resolve(_ record: ImportRecord) -> Result<ImportRow, ImportRecordError> {
        var identities: [ImportRowIdentity] = []
        for identity in record.identities {
            guard let target = targets[identity.provider] else {
                if ProviderID.reserved.contains(where: { $0.rawValue == identity.provider }) {
                    return .failure(.init("provider \(identity.provider) is not configured for the tenant"))
                }
                return .failure(.init("provider \(identity.provider) is not mapped: add --map-provider \(identity.provider)=<provider id>"))
            }
            let scope: String
            if let template = target.issuerTemplate {
                guard let given = identity.providerScope, Self.issuer(given, matches: template) else {
                    return .failure(
                        .init("provider \(target.provider) has a multi-tenant issuer: each identity needs its provider_scope (the issuer)"))
                }
                scope = given
            } else {
                guard let configured = target.scope else {
                    return .failure(
                        .init(
                            target.type == .apple
                                ? "the tenant has several Apple teams (or none): pass --apple-team"
                                : "provider \(target.provider) has no scope configured"))
                }
                if let given = identity.providerScope, given != configured {
                    return .failure(
                        .init("\(target.provider) identity \(identity.subject) is scoped to \(given), not the tenant's \(configured)"))
                }
                scope = configured
            }
            var sealed: Data?
            if let token = identity.providerRefreshToken, !token.isEmpty {
                guard target.type == .apple else {
                    return .failure(.init("a provider_refresh_token is kept for Apple identities only"))
                }
                do {
                    sealed = try secrets.seal(
                        Data(token.utf8),
                        context: AppleProvider.refreshTokenSealingContext(tenantID: tenantID, teamID: scope, subject: identity.subject))
                } catch {
                    return .failure(.init("the refresh token could not be sealed"))
                }
            }
            identities.append(
                ImportRowIdentity(
                    provider: target.provider, providerScope: scope, subject: identity.subject, email: identity.email,
                    emailVerified: identity.emailVerified, isPrivateEmail: identity.isPrivateEmail, sealedRefreshToken: sealed,
                    refreshTokenClientID: sealed == nil ? nil : appleClientID))
        }
        if let duplicate = Self.firstDuplicate(identities) {
            return .failure(.init("identity \(duplicate.provider) \(duplicate.subject) appears twice"))
        }
        let email = record.email ?? record.identities.lazy.compactMap(\.email).first
        let verified = record.email != nil ? record.emailVerified : (record.identities.first { $0.email == email }?.emailVerified ?? false)
        return .success(
            ImportRow(
                externalID: record.externalID, email: email, emailVerified: verified,
                isPrivateEmail: ProviderIdentity.isAppleRelay(email), name: record.name, status: record.status,
                createdAt: record.createdAt, identities: identities))
    }

    /// Whether `issuer` is `template` with a tenant id in place of `{tid}`.
    static func issuer(_ issuer: String, matches template: String) -> Bool {
        let parts = template.components(separatedBy: IssuerTemplate.placeholder)
        guard parts.count == 2, issuer.hasPrefix(parts[0]), issuer.hasSuffix(parts[1]),
            issuer.utf8.count > parts[0].utf8.count + parts[1].utf8.count
        else { return false }
        let tid = issuer.dropFirst(parts[0].count).dropLast(parts[1].count)
        return IssuerTemplate.isTenantID(String(tid))
    }

    private static func firstDuplicate(_ identities: [ImportRowIdentity]) -> ImportRowIdentity? {
        var seen = Set<ExactText>()
        for identity in identities
        where !seen.insert(ExactText("\(identity.provider)\u{0}\(identity.providerScope)\u{0}\(identity.subject)")).inserted {
            return identity
        }
        return nil
    }
}

/// Why one record cannot be imported (reported with its line; the import goes on).
package struct ImportRecordError: Error, Equatable {
    package let reason: String
    package init(_ reason: String) { self.reason = reason }
}
