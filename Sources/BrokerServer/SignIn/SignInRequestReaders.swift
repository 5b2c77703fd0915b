import BrokerApplication
import BrokerCore
import Providers

/// A sign-in body read for its provider: the proof (read by the provider type's own reader,
/// ``ProviderDescriptor/readProof``), the intent and the platform (every provider's). The
/// readers read members as the generated `Decodable` conformances do: a required member
/// present and of its type, an optional one absent or null, an enum member one of its values,
/// members the contract does not name ignored (decision 0011; tests hold them to the generated
/// decoders and to every property of openapi.yaml).
struct SignInBody: Sendable {
    var proof: ProviderProof
    var intent: SignInIntent
    var platform: String?

    /// The platforms a body may name.
    static let platforms: Set<String> = ["ios", "android", "web", "macos", "other"]

    /// Reads the body of `POST /v1/sign-in/{provider}` as a request of `descriptor`'s type.
    static func read(_ descriptor: ProviderDescriptor, _ body: JSONValue) throws(ContractMismatch) -> SignInBody {
        let object = try ContractReader.object(body)
        let proof = try descriptor.readProof(object)
        let intent: SignInIntent = try ContractReader.choice("intent", in: object) ?? .auto
        let platform = try ContractReader.optional("platform", in: object)
        if let platform, !platforms.contains(platform) {
            throw ContractMismatch(description: "member 'platform' has a value the contract does not allow")
        }
        return SignInBody(proof: proof, intent: intent, platform: platform)
    }
}
