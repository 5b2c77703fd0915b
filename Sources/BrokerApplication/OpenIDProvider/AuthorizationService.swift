import BrokerCore
import Foundation
import Logging
import Providers
import Storage

/// The authorization endpoint of each tenant's OpenID Provider, `/t/{tenant}/authorize`
/// (issue 42 §2, decision 0082). The broker keeps no browser session: every request either
/// shows the tenant's sign-in page, or starts the web sign-in of the provider chosen (a link of
/// the page, or `provider=` from the client) with the client's redirect URI as its return URL.
/// The provider's callback then sends the person back to the client with an authorization
/// code, which the token endpoint redeems.
package struct AuthorizationService: Sendable {
    package let database: Database
    package let tenants: TenantDirectory
    package let clients: ClientDirectory
    package let webSignIn: WebSignInService
    package let loginCatalogs: LoginCatalogStore
    package let publicURL: String

    package init(
        database: Database, tenants: TenantDirectory, clients: ClientDirectory, webSignIn: WebSignInService,
        loginCatalogs: LoginCatalogStore, publicURL: String
    ) {
        self.database = database
        self.tenants = tenants
        self.clients = clients
        self.webSignIn = webSignIn
        self.loginCatalogs = loginCatalogs
        self.publicURL = publicURL
    }

    /// What the endpoint answers the person's browser with.
    package enum Outcome: Sendable, Equatable {
        /// A page and no redirect: the tenant, the client or the redirect URI is not one the
        /// broker may send the person back to (RFC 6749 §4.1.2.1), or the database did not answer
        /// before they were known.
        case errorPage(status: Int, message: ErrorPageMessage)
        /// 303: to the provider's authorize URL, or back to the client with an error.
        case redirect(String)
        /// The tenant's sign-in page.
        case signInPage(SignInPage)
    }

    /// Why an error page is shown, as words the page can put in either language.
    package enum ErrorPageMessage: String, Sendable, Equatable {
        case unknownTenant = "unknown_tenant"
        case unknownClient = "unknown_client"
        case redirectURIMissing = "redirect_uri_missing"
        case redirectURINotRegistered = "redirect_uri_not_registered"
        case repeatedParameter = "repeated_parameter"
        case unavailable = "temporarily_unavailable"
        case rateLimited = "rate_limited"
    }

    /// The sign-in page of a tenant: its name and the web login options its guideline 4.8
    /// policy gives, in that order, each a link that starts the provider's sign-in.
    package struct SignInPage: Sendable, Equatable {
        package let tenantName: String
        package let options: [Option]

        package struct Option: Sendable, Equatable {
            package let provider: ProviderID
            package let type: ProviderType
            package let displayName: String
            /// The authorization request again, with `provider` (relative to the broker).
            package let href: String
        }
    }

    /// Answers one authorization request. `fields`: its parameters (the query of a `GET`, the
    /// form of a `POST`), the first of each name; `repeated`: the names given more than once.
    package func authorize(tenantSlug: String, fields: [String: String], repeated: Set<String>, context: OperationContext) async
        -> Outcome
    {
        do {
            return try await answer(tenantSlug: tenantSlug, fields: fields, repeated: repeated, context: context)
        } catch {
            context.logger.warning(
                "authorization request: the database did not answer", metadata: ["error": "\(String(describing: type(of: error)))"])
            return .errorPage(status: 503, message: .unavailable)
        }
    }

    private func answer(tenantSlug: String, fields: [String: String], repeated: Set<String>, context: OperationContext) async throws
        -> Outcome
    {
        guard let tenant = try await tenants.tenant(slug: tenantSlug),
            tenant.status == .active
        else { return .errorPage(status: 404, message: .unknownTenant) }
        return try await TenantScope.tenant(tenant.id) {
            // Until the client and its redirect URI are known good, nothing is redirected.
            guard repeated.isDisjoint(with: ["client_id", "redirect_uri"]) else {
                return .errorPage(status: 400, message: .repeatedParameter)
            }
            guard let clientID = fields["client_id"], OAuthClient.isClientID(clientID),
                let client = try await clients.client(tenantID: tenant.id, clientID: clientID)
            else { return .errorPage(status: 400, message: .unknownClient) }
            guard let redirectURI = fields["redirect_uri"] else { return .errorPage(status: 400, message: .redirectURIMissing) }
            guard RedirectURI.matches(redirectURI, registered: client.redirectURIs, isPublic: client.isPublic) else {
                return .errorPage(status: 400, message: .redirectURINotRegistered)
            }
            let issuer = "\(publicURL)/t/\(tenant.slug.rawValue)"
            // The state goes back only when it is one the client could have sent.
            let echoedState = fields["state"].flatMap {
                ClientAuthorizationRequest.refusal(of: $0, named: "state", max: ClientAuthorizationRequest.maxState) == nil ? $0 : nil
            }
            let back = { (error: AuthorizationError) -> Outcome in
                var pairs = [("error", error.error), ("error_description", error.description)]
                if let echoedState, !repeated.contains("state") { pairs.append(("state", echoedState)) }
                pairs.append(("iss", issuer))
                return .redirect(WebSignInService.returnURL(redirectURI, pairs))
            }
            if let name = repeated.sorted().first {
                return back(.invalidRequest("\(name) is given more than once (RFC 6749 §3.1)."))
            }
            let request: ClientAuthorizationRequest
            switch ClientAuthorizationRequest.read(fields, clientID: clientID, redirectURI: redirectURI, isPublic: client.isPublic) {
            case .failure(let error): return back(error)
            case .success(let read): request = read
            }
            if request.promptNone {
                return back(.init("login_required", "The broker keeps no browser session: the person must sign in."))
            }
            let options = try await loginCatalogs.catalog(for: tenant).options(on: .web).options.filter(\.webClient)
            guard let chosen = request.provider else {
                return .signInPage(
                    SignInPage(
                        tenantName: tenant.displayName,
                        options: options.map { option in
                            SignInPage.Option(
                                provider: option.provider, type: option.type, displayName: option.displayName,
                                href: WebSignInService.returnURL(
                                    "/t/\(tenant.slug.rawValue)/authorize",
                                    fields.filter { $0.key != "provider" }.sorted { $0.key < $1.key } + [
                                        ("provider", option.provider.rawValue)
                                    ]))
                        }))
            }
            guard let provider = ProviderID(rawValue: chosen), options.contains(where: { $0.provider == provider }) else {
                return back(.invalidRequest("provider \(chosen) is not one of the tenant's web sign-in options."))
            }
            do {
                let started = try await webSignIn.start(
                    tenant: tenant, provider: provider, clientID: nil, returnURL: redirectURI, callerState: request.state, intent: .auto,
                    relyingParty: WebSignInState.RelyingParty(clientID: clientID, request: request.kept(issuer: issuer)),
                    context: context)
                return .redirect(started.authorizeURL)
            } catch let failure as WebSignInFailure {
                context.logger.warning(
                    "authorization request: the provider's web sign-in could not start",
                    metadata: ["provider": "\(provider)", "failure": "\(failure)"])
                return back(.init("server_error", "The \(provider.rawValue) sign-in is not set up for the web."))
            } catch let failure as ProviderFailure {
                context.logger.warning(
                    "authorization request: the provider's web sign-in could not start",
                    metadata: ["provider": "\(provider)", "code": "\(failure.code)"])
                return back(.init("server_error", "The \(provider.rawValue) sign-in is not set up for the web."))
            } catch {
                guard error.isDatabaseUnavailable else { throw error }
                return back(.init("temporarily_unavailable", "The broker could not start the sign-in for a moment; try again."))
            }
        }
    }
}
