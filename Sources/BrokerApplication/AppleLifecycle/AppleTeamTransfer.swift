import BrokerCore
import Foundation
import Logging
import Providers
import Storage
import Synchronization

/// Moving a tenant's Apple identities to another team after Apple transferred the app (issue 23
/// §4; decision 0045). The export, run while the app group still belongs to the sending team,
/// asks Apple for each identity's `transfer_sub` for the target team, keeps it on the identity
/// and writes one line per identity. The import, run once the group was moved onto the target
/// team, exchanges each `transfer_sub` for the person's new `sub` and re-keys the identity:
/// same id, same account, no account created. Sign-ins in between link through
/// `transfer_sub` (``SignInService``).
package struct AppleTeamTransfer: Sendable {
    /// One line of the export file: never the old `sub`, never an email.
    package struct Line: Codable, Sendable, Equatable {
        package let account_id: String
        package let identity_id: String
        package let transfer_sub: String
        package let source_team: String
        package let target_team: String

        package init(account_id: String, identity_id: String, transfer_sub: String, source_team: String, target_team: String) {
            self.account_id = account_id
            self.identity_id = identity_id
            self.transfer_sub = transfer_sub
            self.source_team = source_team
            self.target_team = target_team
        }
    }

    package struct Failure: Sendable, Equatable {
        package let identityID: String
        package let error: String
    }

    package struct ExportSummary: Sendable, Equatable {
        package var total = 0
        package var exported = 0
        /// Already in the file being resumed.
        package var skipped = 0
        package var failed: [Failure] = []
    }

    package struct ImportSummary: Sendable, Equatable {
        package var lines = 0
        package var rekeyed = 0
        /// Re-keyed before (an earlier import, or the person signed in during the window).
        package var already = 0
        package var notFound: [String] = []
        package var conflicts: [Failure] = []
        package var failed: [Failure] = []
        package var dryRun = false
    }

    let database: Database
    let tokenClient: AppleTokenClient
    let clientSecrets: AppleClientSecrets
    let actor: String
    let logger: Logger

    package init(database: Database, tokenClient: AppleTokenClient, clientSecrets: AppleClientSecrets, actor: String, logger: Logger) {
        self.database = database
        self.tokenClient = tokenClient
        self.clientSecrets = clientSecrets
        self.actor = actor
        self.logger = logger
    }

    /// Exports the Apple identities of `sourceTeam` (nil: the tenant's only team other than the
    /// target) for `targetTeam`: one ``Line`` to `write` each, skipping the identity ids in
    /// `skip` (a resumed file's), at most `maxPerSecond` calls to Apple.
    package func export(
        tenant: Tenant, targetTeam: String, sourceTeam: String?, skip: Set<String>, maxPerSecond: Int,
        write: @Sendable (Line) throws -> Void, progress: @Sendable (Int, Int) -> Void
    ) async throws -> ExportSummary {
        try await TenantScope.tenant(tenant.id) {
            try AppleTeam.validateIdentifier(targetTeam, name: "target team id")
            let setup = try await setup(of: tenant)
            let source = try Self.sourceTeam(setup, tenant: tenant, named: sourceTeam, target: targetTeam)
            let client = try Self.client(of: source, in: setup, tenant: tenant, role: "sending")
            var summary = ExportSummary(total: try await database.appleTransfers.count(tenantID: tenant.id, sourceTeam: source.teamID))
            var session: MigrationSession?
            let pace = Pace(perSecond: maxPerSecond)
            var after: UUID?
            while true {
                let batch = try await database.appleTransfers.candidates(
                    tenantID: tenant.id, sourceTeam: source.teamID, targetTeam: targetTeam, after: after, limit: 500)
                guard let last = batch.last else { break }
                after = last.identityID
                for candidate in batch {
                    let identityID = candidate.identityID.lowercasedString
                    defer { progress(summary.exported + summary.skipped + summary.failed.count, summary.total) }
                    if skip.contains(identityID) {
                        summary.skipped += 1
                        continue
                    }
                    let transfer: String
                    if let kept = candidate.exportedTransferSub {
                        transfer = kept
                    } else {
                        do {
                            await pace.wait()
                            var current = try await MigrationSession.reuse(session, client, team: source, self)
                            transfer = try await current.call(self) { secret, token in
                                try await tokenClient.transferSubject(
                                    of: candidate.subject, to: targetTeam, clientID: client, clientSecret: secret, accessToken: token)
                            }
                            session = current
                            try await database.appleTransfers.recordExport(
                                tenantID: tenant.id, identityID: candidate.identityID, transferSub: transfer, targetTeam: targetTeam)
                        } catch let failure as ProviderFailure {
                            summary.failed.append(Failure(identityID: identityID, error: Self.describe(failure)))
                            continue
                        }
                    }
                    try write(
                        Line(
                            account_id: candidate.accountID.lowercasedString, identity_id: identityID, transfer_sub: transfer,
                            source_team: source.teamID, target_team: targetTeam))
                    summary.exported += 1
                }
            }
            try await database.appleTransfers.auditExport(
                tenantID: tenant.id, sourceTeam: source.teamID, targetTeam: targetTeam, exported: summary.exported,
                failed: summary.failed.count, actor: actor)
            return summary
        }
    }

    /// Imports `lines` (one target team, configured in the tenant, with an app group on it):
    /// each `transfer_sub` exchanged for the new `sub` and its identity re-keyed. `dryRun`
    /// checks the lines against the database and calls nobody.
    package func importLines(
        tenant: Tenant, lines: [Line], dryRun: Bool, maxPerSecond: Int, progress: @Sendable (Int, Int) -> Void
    ) async throws -> ImportSummary {
        try await TenantScope.tenant(tenant.id) {
            var summary = ImportSummary(lines: lines.count, dryRun: dryRun)
            guard let targetTeam = lines.first?.target_team else { return summary }
            if let other = lines.first(where: { $0.target_team != targetTeam }) {
                throw BrokerError.invalidArgument(
                    "The file names two target teams (\(targetTeam.prefix(10)) and \(other.target_team.prefix(10))); import one export at a time."
                )
            }
            let setup = try await setup(of: tenant)
            guard let target = setup.teams.first(where: { $0.teamID == targetTeam }) else {
                throw BrokerError(
                    code: "apple_team_not_configured", kind: .invalidInput, title: "Target team not configured",
                    detail: "Tenant '\(tenant.slug)' has no Apple team \(targetTeam.prefix(10)), the team this file was exported for.",
                    hint:
                        "Set it first: broker apple team set --tenant \(tenant.slug) --team-id \(targetTeam.prefix(10)) --key-id <KEYID> --private-key-file key.p8"
                )
            }
            let client = try Self.client(of: target, in: setup, tenant: tenant, role: "receiving")
            var session: MigrationSession?
            let pace = Pace(perSecond: maxPerSecond)
            for (index, line) in lines.enumerated() {
                defer { progress(index + 1, lines.count) }
                guard let accountID = UUID(uuidString: line.account_id) else {
                    summary.failed.append(Failure(identityID: line.identity_id, error: "invalid account_id"))
                    continue
                }
                let waiting = try await database.appleTransfers.pending(
                    tenantID: tenant.id, accountID: accountID, transferSub: line.transfer_sub, targetTeam: targetTeam)
                if dryRun, waiting {
                    summary.rekeyed += 1
                    continue
                }
                guard waiting else {
                    // Re-keyed already (by an earlier run or a sign-in), or never exported here.
                    if try await database.appleTransfers.onTeam(
                        tenantID: tenant.id, identityID: line.identity_id, accountID: accountID, team: targetTeam)
                    {
                        summary.already += 1
                    } else {
                        summary.notFound.append(line.identity_id)
                    }
                    continue
                }
                let user: AppleTokenClient.TransferredUser
                do {
                    await pace.wait()
                    var current = try await MigrationSession.reuse(session, client, team: target, self)
                    user = try await current.call(self) { secret, token in
                        try await tokenClient.transferredUser(line.transfer_sub, clientID: client, clientSecret: secret, accessToken: token)
                    }
                    session = current
                } catch let failure as ProviderFailure {
                    summary.failed.append(Failure(identityID: line.identity_id, error: Self.describe(failure)))
                    continue
                }
                switch try await database.appleTransfers.rekey(
                    tenantID: tenant.id, accountID: accountID, transferSub: line.transfer_sub, targetTeam: targetTeam,
                    subject: user.subject,
                    email: user.email, isPrivateEmail: user.isPrivateEmail, actor: actor)
                {
                case .rekeyed: summary.rekeyed += 1
                case .already: summary.already += 1
                case .notFound: summary.notFound.append(line.identity_id)
                case .conflict(let holder):
                    summary.conflicts.append(
                        Failure(
                            identityID: line.identity_id,
                            error: "the new sub belongs to identity \(holder.lowercasedString) of another account"))
                }
            }
            return summary
        }
    }

    // MARK: - Teams and clients

    struct Setup {
        let teams: [AppleTeam]
        let groups: [AppleAppGroup]
    }

    func setup(of tenant: Tenant) async throws -> Setup {
        async let teams = database.apple.teams(tenantID: tenant.id)
        async let groups = database.apple.groups(tenantID: tenant.id)
        return Setup(teams: try await teams, groups: try await groups)
    }

    static func sourceTeam(_ setup: Setup, tenant: Tenant, named: String?, target: String) throws -> AppleTeam {
        if let named {
            guard named != target else { throw BrokerError.invalidArgument("The source and target teams are both \(named.prefix(10)).") }
            guard let team = setup.teams.first(where: { $0.teamID == named }) else {
                throw BrokerError.invalidArgument("Tenant '\(tenant.slug)' has no Apple team \(named.prefix(10)).")
            }
            return team
        }
        let others = setup.teams.filter { $0.teamID != target }
        guard others.count == 1, let only = others.first else {
            throw BrokerError.invalidArgument(
                others.isEmpty
                    ? "Tenant '\(tenant.slug)' has no Apple team other than \(target.prefix(10)) to export from."
                    : "Tenant '\(tenant.slug)' has \(others.count) Apple teams besides the target; say which one sends with --source-team.")
        }
        return only
    }

    /// The primary App ID of the tenant's app group on `team`: the client that talks to Apple
    /// for that team.
    static func client(of team: AppleTeam, in setup: Setup, tenant: Tenant, role: String) throws -> String {
        guard let group = setup.groups.first(where: { $0.teamRef == team.id }) else {
            let hint =
                role == "sending"
                ? "Export before moving the app group; its team must still be \(team.teamID)."
                : "Move the app group onto it first: broker apple group move --tenant \(tenant.slug) --group <PRIMARY_APP_ID> --team-id \(team.teamID)"
            throw BrokerError(
                code: "apple_group_missing", kind: .invalidInput, title: "No app group on the team",
                detail: "Tenant '\(tenant.slug)' has no app group on team \(team.teamID), the \(role) team.", hint: hint)
        }
        return group.primaryAppID
    }

    // MARK: - Apple's migration calls

    /// A `user.migration` access token and client secret of one team, renewed when Apple
    /// answers `invalid_token` (an hour's lifetime, shorter than a large export).
    struct MigrationSession {
        let clientID: String
        let team: AppleTeam
        var secret: String
        var token: String

        /// `session` when there is one, else a new one.
        static func reuse(_ session: MigrationSession?, _ clientID: String, team: AppleTeam, _ transfer: AppleTeamTransfer) async throws
            -> MigrationSession
        {
            if let session { return session }
            return try await open(clientID, team: team, transfer)
        }

        static func open(_ clientID: String, team: AppleTeam, _ transfer: AppleTeamTransfer) async throws -> MigrationSession {
            let secret = try await transfer.clientSecrets.secret(team: team, clientID: clientID)
            let token = try await transfer.tokenClient.migrationAccessToken(clientID: clientID, clientSecret: secret)
            return MigrationSession(clientID: clientID, team: team, secret: secret, token: token)
        }

        mutating func call<T>(_ transfer: AppleTeamTransfer, _ body: (String, String) async throws -> T) async throws -> T {
            do {
                return try await body(secret, token)
            } catch ProviderFailure.codeExchangeRefused(let reason, _) where reason == "invalid_token" {
                self = try await Self.open(clientID, team: team, transfer)
                return try await body(secret, token)
            }
        }
    }

    /// A failure as the summary names it: the code, and Apple's own error when it gave one.
    static func describe(_ failure: ProviderFailure) -> String {
        if case .codeExchangeRefused(let reason, _) = failure { return "\(failure.code): \(reason)" }
        return failure.code
    }

    /// At most `perSecond` calls a second, evenly spaced.
    final class Pace: Sendable {
        let interval: Duration
        let next: Mutex<ContinuousClock.Instant>

        init(perSecond: Int) {
            interval = .seconds(1) / max(1, perSecond)
            next = Mutex(.now)
        }

        func wait() async {
            let start = next.withLock { next -> ContinuousClock.Instant in
                let start = max(next, .now)
                next = start + interval
                return start
            }
            if start > .now { try? await Task.sleep(until: start, clock: .continuous) }
        }
    }
}
