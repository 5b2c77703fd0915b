import BrokerAPI
import BrokerCore
import Foundation

/// The generated entries of the web sign-in operations. ``WebSignInRoute`` serves them on the
/// router directly (its callbacks answer a browser with redirects and plain pages, not the
/// generated types), so these are never registered (see ``GeneratedRoutes``); each says so
/// should it ever be reached.
extension APIHandlers {
    func startWebSignIn(_ input: Operations.StartWebSignIn.Input) async throws -> Operations.StartWebSignIn.Output {
        throw Self.servedOnTheRouter
    }

    func exchangeWebSignIn(_ input: Operations.ExchangeWebSignIn.Input) async throws -> Operations.ExchangeWebSignIn.Output {
        throw Self.servedOnTheRouter
    }

    func appleWebCallback(_ input: Operations.AppleWebCallback.Input) async throws -> Operations.AppleWebCallback.Output {
        throw Self.servedOnTheRouter
    }

    func oidcWebCallback(_ input: Operations.OidcWebCallback.Input) async throws -> Operations.OidcWebCallback.Output {
        throw Self.servedOnTheRouter
    }

    static var servedOnTheRouter: BrokerError {
        BrokerError(
            code: "internal_error", kind: .internalFailure, title: "Internal error",
            detail: "This operation is served on the router directly, not by the generated server.")
    }
}
