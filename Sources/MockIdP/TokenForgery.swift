/// How the mock signs a token. `.valid` is what a real provider does; every other case is a
/// deliberately broken token for the verifier's tests (RFC 8725 attacks).
public enum TokenForgery: Sendable, CaseIterable {
    /// RS256 with the current published key.
    case valid
    /// `alg: none` and no signature.
    case algNone
    /// HS256 keyed with the provider's public key (the RS→HS confusion attack).
    case hs256WithPublicKey
    /// RS256 with a key the provider does not publish (kid unknown).
    case unpublishedKey
    /// A valid token whose signature bytes were altered.
    case badSignature
}
