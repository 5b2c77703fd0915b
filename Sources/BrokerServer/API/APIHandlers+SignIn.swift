import BrokerAPI
import BrokerCore

/// Sign in with a provider identity token.
extension APIHandlers {
    func signInWithApple(_ input: Operations.SignInWithApple.Input) async throws -> Operations.SignInWithApple.Output {
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        return .ok(.init(body: .json(try await signInWithApple(request))))
    }

    /// The operation itself; ``AppleSignInRoute`` serves it on the router directly, the
    /// generated entry above (unregistered, see ``GeneratedRoutes``) only unwraps its input.
    func signInWithApple(_ request: Components.Schemas.AppleSignInRequest) async throws -> Components.Schemas.SignInResponse {
        let caller = try await authenticator.authenticateCurrentRequest(requiring: .sessions)
        return try await services.appleSignIn.signIn(tenant: caller.tenant, request)
    }
}
