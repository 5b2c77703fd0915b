import BrokerAPI
import BrokerCore

/// Sign in with a provider identity token.
extension APIHandlers {
    func signInWithApple(_ input: Operations.SignInWithApple.Input) async throws -> Operations.SignInWithApple.Output {
        let caller = try await authenticator.authenticateCurrentRequest(requiring: .sessions)
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        return .ok(.init(body: .json(try await services.appleSignIn.signIn(tenant: caller.tenant, request))))
    }

    /// The same operation for ``AppleSignInRoute``, which serves it on the router directly.
    func signInWithApple(_ request: Components.Schemas.AppleSignInRequest) async throws -> Components.Schemas.SignInResponse {
        let caller = try await authenticator.authenticateCurrentRequest(requiring: .sessions)
        return try await services.appleSignIn.signIn(tenant: caller.tenant, request)
    }
}
