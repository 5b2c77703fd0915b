import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation

/// The calling tenant.
extension APIHandlers {
    func getCurrentTenant(_ input: Operations.GetCurrentTenant.Input) async throws -> Operations.GetCurrentTenant.Output {
        let caller = try await authenticator.authenticate(currentCaller, requiring: .tenant)
        let tenant = caller.tenant
        let info = Components.Schemas.TenantInfo(
            slug: tenant.slug.rawValue,
            name: tenant.displayName,
            status: tenant.status == .active ? .active : .disabled,
            issuer: services.issuer(for: tenant.slug),
            session: .init(
                accessTokenTtl: tenant.session.accessTokenTTL,
                refreshTokenAbsoluteTtl: tenant.session.refreshTokenAbsoluteTTL,
                refreshTokenIdleTtl: tenant.session.refreshTokenIdleTTL,
                maxSessionsPerAccount: tenant.session.maxSessionsPerAccount,
                audiences: tenant.effectiveAudiences),
            linking: .init(autoLinkVerifiedEmail: tenant.linking.autoLinkVerifiedEmail),
            apiKey: .init(
                id: caller.apiKey.id.lowercasedString, prefix: caller.apiKey.prefix,
                scopes: caller.apiKey.scopes.map(\.rawValue)),
            createdAt: tenant.createdAt)
        return .ok(.init(body: .json(info)))
    }
}
