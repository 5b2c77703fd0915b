import Foundation
import Hummingbird

/// `POST /mock/faults` (served by ``MockIdPServer/router(apple:google:facebook:oidc:)`` only):
/// sets faults of a running mock, e.g. `{"facebook.me": "other_user", "google.keys": "unavailable"}`,
/// and answers every provider's current faults. Names: `apple.keys`, `google.keys`,
/// `facebook.keys` (none, unavailable, empty_set, malformed, slow_body); `apple.token` (none,
/// omit_id_token, other_subject, slow_body); `facebook.debug_token`, `facebook.me` (none,
/// internal_error, unavailable, reset_connection, hang, other_user, slow_body); for each OpenID
/// Connect issuer `oidc.<name>.discovery` (none, unavailable, hang, wrong_issuer, malformed) and
/// `oidc.<name>.keys` (none, unavailable, hang, empty_set, malformed). The faults that serve an
/// arbitrary body (`.answer(status:body:)`) are set in process only.
extension MockIdPServer {
    public static let faultsPath = "/mock/faults"

    static let keysFaults: [String: MockKeysFault] = [
        "none": .none, "unavailable": .unavailable, "empty_set": .emptySet, "malformed": .malformed, "slow_body": .slowBody,
    ]
    static let tokenFaults: [String: MockAppleIdP.TokenFault] = [
        "none": .none, "omit_id_token": .omitIDToken, "other_subject": .otherSubject, "slow_body": .slowBody,
    ]
    static let graphFaults: [String: MockFacebookIdP.GraphFault] = [
        "none": .none, "internal_error": .internalError, "unavailable": .unavailable, "reset_connection": .resetConnection,
        "hang": .hang, "other_user": .otherUser, "slow_body": .slowBody,
    ]
    static let oidcDiscoveryFaults: [String: MockOIDCIssuer.DiscoveryFault] = [
        "none": .none, "unavailable": .unavailable, "hang": .hang, "wrong_issuer": .wrongIssuer, "malformed": .malformed,
    ]
    static let oidcKeysFaults: [String: MockOIDCIssuer.KeysFault] = [
        "none": .none, "unavailable": .unavailable, "hang": .hang, "empty_set": .emptySet, "malformed": .malformed,
    ]

    static func addFaultRoute(
        to router: Router<Context>, apple: MockAppleIdP?, google: MockGoogleIdP?, facebook: MockFacebookIdP?,
        oidc: [MockOIDCIssuer] = []
    ) {
        let issuers = Dictionary(oidc.map { ($0.name, $0) }) { first, _ in first }
        router.post(RouterPath(faultsPath)) { request, _ -> Response in
            let body = try await request.body.collect(upTo: 65_536)
            guard let settings = try? JSONDecoder().decode([String: String].self, from: Data(body.readableBytesView)) else {
                return faultError("Expected a JSON object of fault names, e.g. {\"facebook.me\": \"hang\"}.")
            }
            // Check every setting before applying any.
            var changes: [@Sendable () -> Void] = []
            for (name, value) in settings.sorted(by: { $0.key < $1.key }) {
                switch name {
                case "apple.keys": if let apple, let fault = keysFaults[value] { changes.append { apple.keysFault = fault }; continue }
                case "apple.token": if let apple, let fault = tokenFaults[value] { changes.append { apple.tokenFault = fault }; continue }
                case "google.keys": if let google, let fault = keysFaults[value] { changes.append { google.keysFault = fault }; continue }
                case "facebook.keys":
                    if let facebook, let fault = keysFaults[value] { changes.append { facebook.keysFault = fault }; continue }
                case "facebook.debug_token":
                    if let facebook, let fault = graphFaults[value] { changes.append { facebook.debugTokenFault = fault }; continue }
                case "facebook.me":
                    if let facebook, let fault = graphFaults[value] { changes.append { facebook.meFault = fault }; continue }
                default:
                    if let change = oidcFaultChange(name, value, issuers) { changes.append(change); continue }
                }
                return faultError("Unknown fault \(name.prefix(40)): \(value.prefix(40)).")
            }
            for change in changes { change() }
            var current: [String: String] = [:]
            if let apple {
                current["apple.keys"] = name(apple.keysFault, in: keysFaults)
                current["apple.token"] = name(apple.tokenFault, in: tokenFaults)
            }
            if let google { current["google.keys"] = name(google.keysFault, in: keysFaults) }
            if let facebook {
                current["facebook.keys"] = name(facebook.keysFault, in: keysFaults)
                current["facebook.debug_token"] = name(facebook.debugTokenFault, in: graphFaults)
                current["facebook.me"] = name(facebook.meFault, in: graphFaults)
            }
            for (issuerName, issuer) in issuers {
                current["oidc.\(issuerName).discovery"] = name(issuer.discoveryFault, in: oidcDiscoveryFaults)
                current["oidc.\(issuerName).keys"] = name(issuer.keysFault, in: oidcKeysFaults)
            }
            return json(.ok, try JSONSerialization.data(withJSONObject: current, options: [.sortedKeys]))
        }
    }

    /// The change `oidc.<name>.discovery` or `oidc.<name>.keys` set to `value` asks for, or nil
    /// when the name or the value is unknown.
    private static func oidcFaultChange(_ name: String, _ value: String, _ issuers: [String: MockOIDCIssuer])
        -> (@Sendable () -> Void)?
    {
        guard name.hasPrefix("oidc.") else { return nil }
        let rest = name.dropFirst("oidc.".count)
        guard let dot = rest.lastIndex(of: "."), let issuer = issuers[String(rest[..<dot])] else { return nil }
        switch rest[rest.index(after: dot)...] {
        case "discovery":
            guard let fault = oidcDiscoveryFaults[value] else { return nil }
            return { issuer.discoveryFault = fault }
        case "keys":
            guard let fault = oidcKeysFaults[value] else { return nil }
            return { issuer.keysFault = fault }
        default:
            return nil
        }
    }

    private static func name<Fault: Equatable>(_ fault: Fault, in names: [String: Fault]) -> String {
        names.first { $0.value == fault }?.key ?? "unknown"
    }

    private static func faultError(_ message: String) -> Response {
        json(.badRequest, (try? JSONSerialization.data(withJSONObject: ["error": message], options: [.sortedKeys])) ?? Data())
    }
}
