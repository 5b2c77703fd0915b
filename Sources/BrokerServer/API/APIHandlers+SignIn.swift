import BrokerAPI
import BrokerCore
import Providers

/// Sign in with a provider proof: every provider through the one ``SignInService``.
extension APIHandlers {
    // The generated entries (unregistered, see ``GeneratedRoutes``: ``SignInRoute`` serves
    // these operations on the router directly) only unwrap their input.
    func signInWithApple(_ input: Operations.SignInWithApple.Input) async throws -> Operations.SignInWithApple.Output {
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        return .ok(.init(body: .json(try await signIn(provider: .apple, SignInBody(request)))))
    }

    func signInWithGoogle(_ input: Operations.SignInWithGoogle.Input) async throws -> Operations.SignInWithGoogle.Output {
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        return .ok(.init(body: .json(try await signIn(provider: .google, SignInBody(request)))))
    }

    func signInWithFacebook(_ input: Operations.SignInWithFacebook.Input) async throws -> Operations.SignInWithFacebook.Output {
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        do {
            return .ok(.init(body: .json(try await signIn(provider: .facebook, try SignInBody(request)))))
        } catch let error as ContractMismatch {
            throw SignInRoute.contractMismatch(error.description)
        }
    }

    func signInWithUnknownProvider(_ input: Operations.SignInWithUnknownProvider.Input) async throws
        -> Operations.SignInWithUnknownProvider.Output
    {
        throw SignInProblems.problem(.unknownProvider(input.path.provider))
    }

    /// The operation itself, for every provider.
    func signIn(provider: ProviderName, _ body: SignInBody) async throws -> Components.Schemas.SignInResponse {
        let caller = try await authenticator.authenticateCurrentRequest(requiring: .sessions)
        do {
            let outcome = try await services.signIn.signIn(
                tenant: caller.tenant, provider: provider, proof: body.proof, intent: body.intent, platform: body.platform)
            return .init(outcome)
        } catch let failure as ProviderFailure {
            throw SignInProblems.problem(failure, tenant: caller.tenant)
        } catch let failure as SignInFailure {
            throw SignInProblems.problem(failure)
        }
    }
}
