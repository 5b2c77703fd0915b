import BrokerCore
import Foundation
import Providers

/// Which of a tenant's providers a token exchange's subject token comes from, by its `iss`
/// (RFC 8693, decision 0083): Apple's, Google's and Facebook's issuers name their types; any
/// other issuer is the OpenID Connect provider configured with it (or with the `{tid}` template
/// it fills). The provider then verifies the token as a native sign-in's: the `iss` read here is
/// only where to look.
enum SubjectTokenIssuers {
    /// `configurations` reads the tenant's provider configurations, only when the issuer is not
    /// Apple's (the commonest exchange reads nothing).
    static func provider(issuer: String, configurations: () async throws -> [ProviderConfiguration]) async rethrows -> ProviderID? {
        if issuer == Apple.issuer { return .apple }
        for configuration in try await configurations() where configuration.enabled {
            switch configuration.type {
            case .google where Google.issuers.contains(issuer): return configuration.provider
            case .facebook where issuer == Facebook.issuer: return configuration.provider
            case .apple, .google, .facebook: continue
            default:
                guard let configured = configuration.settings["issuer"]?.string else { continue }
                if configured == issuer
                    || (IssuerTemplate.isTemplate(configured) && ImportProviderResolver.issuer(issuer, matches: configured))
                {
                    return configuration.provider
                }
            }
        }
        return nil
    }
}
