import BrokerAPI
import BrokerCore
import Foundation

/// The generated entries of the OpenID Provider's operations. ``OpenIDProviderRoute`` serves them
/// on the router directly (redirects, pages and OAuth's own JSON), so these are never registered
/// (see ``GeneratedRoutes``); each says so should it ever be reached.
extension APIHandlers {
    func authorizeGet(_ input: Operations.AuthorizeGet.Input) async throws -> Operations.AuthorizeGet.Output {
        throw Self.servedOnTheRouter
    }

    func authorizePost(_ input: Operations.AuthorizePost.Input) async throws -> Operations.AuthorizePost.Output {
        throw Self.servedOnTheRouter
    }

    func tokenEndpoint(_ input: Operations.TokenEndpoint.Input) async throws -> Operations.TokenEndpoint.Output {
        throw Self.servedOnTheRouter
    }

    func userinfoGet(_ input: Operations.UserinfoGet.Input) async throws -> Operations.UserinfoGet.Output {
        throw Self.servedOnTheRouter
    }

    func userinfoPost(_ input: Operations.UserinfoPost.Input) async throws -> Operations.UserinfoPost.Output {
        throw Self.servedOnTheRouter
    }

    func logoutGet(_ input: Operations.LogoutGet.Input) async throws -> Operations.LogoutGet.Output {
        throw Self.servedOnTheRouter
    }

    func logoutPost(_ input: Operations.LogoutPost.Input) async throws -> Operations.LogoutPost.Output {
        throw Self.servedOnTheRouter
    }

    func signInStylesheet(_ input: Operations.SignInStylesheet.Input) async throws -> Operations.SignInStylesheet.Output {
        throw Self.servedOnTheRouter
    }
}
