// The types and the server protocol (`APIProtocol`) of this target are generated at build time
// from openapi.yaml (a link to the top-level contract) by swift-openapi-generator's plugin.

/// The version of the REST contract these types were generated from.
public enum BrokerAPIContract {
    public static let version = "0.1.0"
}
