import BrokerCore
import Foundation
import Providers

/// What a client needs to start one provider's sign-in on a platform
/// (`GET /v1/login-options`).
package struct LoginOption: Sendable, Equatable {
    package let provider: ProviderID
    /// The provider's type (`apple`, `google`, `facebook`, `oidc`, ...).
    package let type: ProviderType
    /// The name to show: Apple, Google, Facebook, or the operator's `--display-name` (else the id).
    package let displayName: String
    /// The client id to start with: Apple's first client for the platform (the group's primary
    /// App ID first), Google's first client id, Facebook's app id.
    package let clientID: String
    /// Every client id of the provider for the platform.
    package let clientIDs: [String]
    /// How the nonce is compared: `sha256` (send SHA-256 of the raw nonce to the provider),
    /// `raw`, or nil when the provider's flow takes none (classic Facebook Login).
    package let nonceMode: String?
    /// Whether a sign-in without a nonce is refused.
    package let nonceRequired: Bool
    /// Counts as the guideline 4.8 equivalent, privacy-preserving option under the tenant's mode.
    package let qualifies: Bool
    /// Where the broker's web flow of the provider starts (`/v1/sign-in/{provider}/web/start`,
    /// relative to the broker), when the tenant turned it on; nil otherwise.
    package let startEndpoint: String?
    /// Whether the tenant set up the provider's web flow (an Apple Services ID; another
    /// provider's client secret): the tenant's OpenID Provider can then send a person to it,
    /// even where the REST web flow has no return URL to offer (`startEndpoint` nil).
    package var webClient: Bool = false

    package static func startPath(_ provider: ProviderID) -> String { "/v1/sign-in/\(provider.rawValue)/web/start" }
}

/// The providers to show on one platform, the qualifying option first, with the tenant's
/// standing under guideline 4.8 when it is in violation there.
package struct LoginOptions: Sendable, Equatable {
    package let platform: ProviderPlatform
    package let options: [LoginOption]
    package let mode: LoginPolicyMode
    /// The providers offered without a qualifying option beside them (ios and macos only);
    /// nil when the platform is compliant or the tenant exempt.
    package let violation: [ProviderID]?
}

/// A tenant's sign-in configuration as login options and sign-in counting read it: the policy
/// snapshot, the Apple clients and every other provider's settings.
package struct LoginCatalog: Sendable {
    package let policy: LoginPolicy
    package let appleClients: [AppleClient]
    package let primaryAppIDs: Set<String>
    package let configurations: [ProviderConfiguration]

    package func options(on platform: ProviderPlatform) -> LoginOptions {
        var options: [LoginOption] = []
        for provider in policy.providers(on: platform) {
            if provider == .apple {
                let clients = appleClients.filter { $0.platforms.contains(platform) }
                    .sorted { primaryAppIDs.contains($0.clientID) && !primaryAppIDs.contains($1.clientID) }
                guard let first = clients.first else { continue }
                var option =
                    LoginOption(
                        provider: .apple, type: .apple, displayName: "Apple", clientID: first.clientID,
                        clientIDs: clients.map(\.clientID), nonceMode: first.nonceMode.rawValue, nonceRequired: first.nonceRequired,
                        qualifies: true,
                        startEndpoint: clients.contains { $0.kind == .service && !$0.returnURLs.isEmpty }
                            ? LoginOption.startPath(.apple) : nil)
                option.webClient = clients.contains { $0.kind == .service }
                options.append(option)
                continue
            }
            guard let configuration = configurations.first(where: { $0.provider == provider }), configuration.enabled,
                let first = configuration.clientIDs.first
            else { continue }
            // Classic Facebook Login takes no nonce; every other id-token flow takes the raw one.
            let classicFacebook = configuration.type == .facebook && !configuration.limitedLogin
            var option =
                LoginOption(
                    provider: provider, type: configuration.type,
                    displayName: configuration.displayName ?? ProviderRegistry.displayName(of: provider),
                    clientID: first, clientIDs: configuration.clientIDs, nonceMode: classicFacebook ? nil : NonceMode.raw.rawValue,
                    nonceRequired: configuration.settings["nonce_required"] == .bool(true), qualifies: policy.qualifies(provider),
                    startEndpoint: configuration.settings["web"] == nil ? nil : LoginOption.startPath(provider))
            option.webClient = configuration.settings["web"] != nil
            options.append(option)
        }
        // The equivalent option first, at equal prominence; otherwise the providers' own order.
        let ordered = options.filter(\.qualifies) + options.filter { !$0.qualifies }
        var violation: [ProviderID]?
        if case .violation(let providers) = policy.compliance(on: platform) { violation = providers }
        return LoginOptions(platform: platform, options: ordered, mode: policy.settings.mode, violation: violation)
    }
}
