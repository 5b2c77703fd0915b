import BrokerAPI
import BrokerCore

/// Sign in with a provider identity token.
extension APIHandlers {
    func signInWithApple(_ input: Operations.SignInWithApple.Input) async throws -> Operations.SignInWithApple.Output {
        let caller = try await authenticator.authenticateCurrentRequest(requiring: .sessions)
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        let response = try await services.appleSignIn.signIn(tenant: caller.tenant, request)
        return .ok(.init(body: .json(response)))
    }
}
