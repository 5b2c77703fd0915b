import BrokerAPI
import BrokerApplication
import BrokerCore
import Foundation
import Providers

/// Sign in with a provider proof: every provider through the one ``SignInService``.
extension APIHandlers {
    // The generated entries (unregistered, see ``GeneratedRoutes``: ``SignInRoute`` serves
    // these operations on the router directly) hand their body to the same reader.
    func signInWithApple(_ input: Operations.SignInWithApple.Input) async throws -> Operations.SignInWithApple.Output {
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        return .ok(.init(body: .json(try await signIn(provider: .apple, json: try Self.reparsed(request), as: currentCaller))))
    }

    func signInWithGoogle(_ input: Operations.SignInWithGoogle.Input) async throws -> Operations.SignInWithGoogle.Output {
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        return .ok(.init(body: .json(try await signIn(provider: .google, json: try Self.reparsed(request), as: currentCaller))))
    }

    func signInWithFacebook(_ input: Operations.SignInWithFacebook.Input) async throws -> Operations.SignInWithFacebook.Output {
        guard case .json(let request) = input.body else { throw BrokerError.invalidArgument("Send a JSON body.") }
        return .ok(.init(body: .json(try await signIn(provider: .facebook, json: try Self.reparsed(request), as: currentCaller))))
    }

    func signInWithUnknownProvider(_ input: Operations.SignInWithUnknownProvider.Input) async throws
        -> Operations.SignInWithUnknownProvider.Output
    {
        throw SignInProblems.problem(.unknownProvider(input.path.provider))
    }

    /// A generated request as the parsed body the readers take.
    static func reparsed(_ request: some Encodable) throws -> JSONValue {
        try JSONValue.parse(try JSONEncoder().encode(request))
    }

    /// The operation itself, for every provider: the body is read by the provider type's reader.
    /// A reserved id's body is read before the API key is looked at (a body that does not match
    /// the contract is refused first, as the generated code does); any other id's type is the
    /// calling tenant's to say, so its body is read after.
    func signIn(provider: ProviderID, json: JSONValue, as http: HTTPCaller) async throws -> Components.Schemas.SignInResponse {
        var body: SignInBody?
        if let reserved = provider.reservedType, let registered = services.providers[reserved] {
            body = try Self.read(registered.descriptor, json)
        }
        let caller = try await authenticator.authenticate(http, requiring: .sessions)
        do {
            let registered = try await services.providerSettings.registered(provider, tenantID: caller.tenant.id, in: services.providers)
            let request = try body ?? Self.read(registered.descriptor, json)
            let outcome = try await services.signIn.signIn(
                tenant: caller.tenant, provider: provider, type: registered, proof: request.proof, intent: request.intent,
                platform: request.platform, context: http.context)
            return .init(outcome)
        } catch let failure as ProviderFailure {
            throw SignInProblems.problem(failure, tenant: caller.tenant)
        } catch let failure as SignInFailure {
            throw SignInProblems.problem(failure)
        }
    }

    static func read(_ descriptor: ProviderDescriptor, _ json: JSONValue) throws -> SignInBody {
        do {
            return try SignInBody.read(descriptor, json)
        } catch {
            throw SignInRoute.contractMismatch(error.description)
        }
    }
}
