import BrokerCore
import Foundation
import Logging
import Providers
import Storage

/// How often stored Apple refresh tokens are checked, and how fast (configuration).
public struct AppleCredentialChecks: Sendable, Equatable {
    /// Seconds between two checks of one token; 0 turns the worker off.
    public var interval: TimeInterval
    /// Calls a second to Apple for checks, all instances together.
    public var maxCallsPerSecond: Int

    public init(interval: TimeInterval = 86_400, maxCallsPerSecond: Int = 10) {
        self.interval = interval
        self.maxCallsPerSecond = maxCallsPerSecond
    }
}

/// Apple credential-state checks (issue 23 §3; decision 0043): each stored Apple refresh token
/// is validated through the refresh grant at most once per interval, spread over it, at most
/// `maxCallsPerSecond` calls a second across all instances. `invalid_grant` means the person
/// stopped using Sign in with Apple with the app: it is handled as Apple's `consent-revoked`.
/// Apple unreachable, failing or refusing the client is retried later and never taken for a
/// revocation.
package struct AppleCredentialChecker: Sendable {
    let database: Database
    let store: ProviderSettingsStore
    let secrets: SecretBox
    let tokenClient: AppleTokenClient
    let clientSecrets: AppleClientSecrets
    let settings: AppleCredentialChecks
    let logger: Logger

    /// When a failed check is tried again.
    static let retryAfter: TimeInterval = 600
    /// The pacing slot every instance shares.
    static let pacing = "apple_credential_checks"

    package init(
        database: Database, store: ProviderSettingsStore, secrets: SecretBox, tokenClient: AppleTokenClient,
        clientSecrets: AppleClientSecrets, settings: AppleCredentialChecks, logger: Logger
    ) {
        self.database = database
        self.store = store
        self.secrets = secrets
        self.tokenClient = tokenClient
        self.clientSecrets = clientSecrets
        self.settings = settings
        self.logger = logger
    }

    /// What a run of checks found.
    package struct Report: Sendable, Equatable {
        package var checked = 0
        package var valid = 0
        package var revoked = 0
        package var failed = 0

        package init(checked: Int = 0, valid: Int = 0, revoked: Int = 0, failed: Int = 0) {
            (self.checked, self.valid, self.revoked, self.failed) = (checked, valid, revoked, failed)
        }
    }

    /// Checks the tokens due by `dueBy` (of `tenantID`, or of every tenant), each once, paced;
    /// takes nothing new once `stop` is requested.
    package func checkDue(tenantID: UUID? = nil, dueBy: Date = Date(), stop: GracefulStop? = nil) async throws -> Report {
        var report = Report()
        while !Task.isCancelled, stop?.isRequested != true {
            let slot = try await database.appleCredentials.takeSlot(Self.pacing, rate: settings.maxCallsPerSecond)
            if slot.wait > .zero {
                if let stop { guard await stop.sleep(for: slot.wait) else { break } } else { try await Task.sleep(for: slot.wait) }
            }
            guard let verdict = try await database.appleCredentials.checkNext(tenantID: tenantID, dueBy: dueBy, { due in await check(due) })
            else { break }
            report.checked += 1
            switch verdict {
            case .valid: report.valid += 1
            case .revoked: report.revoked += 1
            case .failed: report.failed += 1
            }
        }
        return report
    }

    /// `broker apple check-credentials`: the tenant's tokens that are due (`all`: every one, now).
    package func checkTenant(_ tenantID: UUID, all: Bool) async throws -> Report {
        try await TenantScope.tenant(tenantID) {
            let start = Date()
            try await database.appleCredentials.schedule(tenantID: tenantID, interval: max(settings.interval, 1))
            if all { _ = try await database.appleCredentials.makeDue(tenantID: tenantID, at: start) }
            return try await checkDue(tenantID: tenantID, dueBy: start)
        }
    }

    /// Runs until cancelled or `stop` is requested: schedules new tokens, checks the due ones,
    /// then waits a minute. At a stop the check in flight finishes and is recorded; cancelled,
    /// it gives its lease back.
    package func run(stop: GracefulStop = GracefulStop()) async {
        guard settings.interval > 0 else { return }
        while !Task.isCancelled, !stop.isRequested {
            do {
                try await database.appleCredentials.schedule(interval: settings.interval)
                let report = try await checkDue(stop: stop)
                if report.checked > 0 {
                    logger.info(
                        "Apple credential checks",
                        metadata: ["checked": "\(report.checked)", "revoked": "\(report.revoked)", "failed": "\(report.failed)"])
                }
            } catch is CancellationError {
                return
            } catch {
                logger.debug(
                    "Apple credential checks unavailable; trying again", metadata: ["error": "\(String(describing: type(of: error)))"])
            }
            guard await stop.sleep(for: .seconds(60)) else { return }
        }
    }

    /// One refresh grant at Apple for `due`.
    func check(_ due: AppleCredentialRepository.Due) async -> AppleCredentialRepository.Verdict {
        let now = Date()
        let retry = AppleCredentialRepository.Verdict.failed(retryAt: now.addingTimeInterval(Self.retryAfter))
        let metadata: Logger.Metadata = ["identity_id": "\(due.identityID.lowercasedString)", "client_id": "\(due.clientID ?? "-")"]
        // What cannot be checked by waiting ten minutes is tried again an interval later.
        let muchLater = AppleCredentialRepository.Verdict.failed(retryAt: now.addingTimeInterval(max(settings.interval, Self.retryAfter)))
        guard let clientID = due.clientID else {
            logger.warning("an Apple refresh token names no client; it cannot be checked", metadata: metadata)
            return muchLater
        }
        let token: Data
        do {
            token = try secrets.open(
                due.sealedToken,
                context: AppleProvider.refreshTokenSealingContext(tenantID: due.tenantID, teamID: due.teamID, subject: due.subject),
                what: "Apple refresh token")
        } catch {
            logger.warning("an Apple refresh token does not open; it cannot be checked", metadata: metadata)
            return muchLater
        }
        do {
            guard let resolved = try await store.appleClient(tenantID: due.tenantID, clientID: clientID) else {
                logger.warning("the client of an Apple refresh token is no longer configured; it cannot be checked", metadata: metadata)
                return retry
            }
            let secret = try await clientSecrets.secret(team: resolved.team, clientID: clientID)
            let valid = try await tokenClient.isValid(
                refreshToken: String(decoding: token, as: UTF8.self), clientID: clientID, clientSecret: secret)
            if valid { return .valid(next: now.addingTimeInterval(max(settings.interval, 1))) }
            logger.notice("Apple no longer honours a refresh token: handled as consent-revoked", metadata: metadata)
            return .revoked
        } catch {
            if Task.isCancelled {
                // The broker's stop cancelled the call: not Apple's failure. Due again now.
                logger.notice("Apple credential check interrupted by the broker's stop; its lease is given back", metadata: metadata)
                return .failed(retryAt: now)
            }
            var failed = metadata
            failed["error"] = "\((error as? ProviderFailure)?.code ?? String(describing: type(of: error)))"
            logger.warning("Apple credential check failed; trying again later", metadata: failed)
            return retry
        }
    }
}
