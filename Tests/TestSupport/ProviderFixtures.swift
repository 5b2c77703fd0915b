import Foundation

/// The real provider tokens and key sets, kept in the repository under
/// `Tests/Fixtures/provider-tokens` (copied from the project's shared fixtures; `sources.json`
/// and `README.md` there say where each one comes from), so a bare clone tests on its own.
public enum ProviderFixtures {
    /// `<package root>/Tests/Fixtures/provider-tokens`.
    public static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/provider-tokens", isDirectory: true)

    /// Every real Apple token (under `apple/`) and the key set it verifies with.
    public static let appleTokens: [(token: String, jwks: String)] = [
        ("idtoken_apple_86D88Kf_2020-02-17_vapor_jwt.jwt", "jwks_apple_86D88Kf_2020_nerdzlab.json"),
        ("idtoken_apple_86D88Kf_2020-04-30_nerdzlab.jwt", "jwks_apple_86D88Kf_2020_nerdzlab.json"),
        ("idtoken_apple_FftONTxoEg_2024-11-03_vapor_jwt.jwt", "jwks_apple_2024-07-31_panva_wellknown.json"),
        ("idtoken_apple_W6WcOKB_2022-04-08_vapor_jwt.jwt", "jwk_apple_W6WcOKB_afuture.json"),
        ("idtoken_apple_W6WcOKB_2023-07-16_namecare.jwt", "jwk_apple_W6WcOKB_afuture.json"),
        ("idtoken_apple_W6WcOKB_2023-11-05_risc0.jwt", "jwk_apple_W6WcOKB_afuture.json"),
        ("idtoken_apple_W6WcOKB_2023-12-24_afuture_real_user_status2.jwt", "jwk_apple_W6WcOKB_afuture.json"),
        ("idtoken_apple_dMlERBaFdK_2025-02-02_vapor_jwt.jwt", "jwk_apple_dMlERBaFdK_respectme.json"),
        ("idtoken_apple_fh6Bs8C_2024-02-20_vapor_jwt.jwt", "jwks_apple_W6WcOKB_fh6Bs8C_YuyXoY_2023_namecare.json"),
    ]

    /// Every real Google token (under `google/`) and the key-set snapshot taken in the same
    /// commit of the same repository (risc0/demos), which publishes its kid.
    public static let googleTokens: [(token: String, jwks: String)] = [
        ("idtoken_google_f5f4bf46_1699138994_risc0.jwt", "jwks_google_f5f4bf46_f833e8a7_2023-11-06_risc0.json"),
        ("idtoken_google_f5f4bf46_1699257748_risc0.jwt", "jwks_google_f5f4bf46_f833e8a7_2023-11-06_risc0.json"),
        ("idtoken_google_f5f4bf46_1699417331_risc0.jwt", "jwks_google_f5f4bf46_f833e8a7_2023-11-06_risc0.json"),
        ("idtoken_google_5b370696_1699946173_risc0.jwt", "jwks_google_2023-11-14_risc0.json"),
        ("idtoken_google_e4adfb43_1701561405_risc0.jwt", "jwks_google_2023-12-02_risc0.json"),
    ]

    /// Every Google key-set snapshot (under `google/`).
    public static let googleKeySets = [
        "jwks_google_f5f4bf46_f833e8a7_2023-11-06_risc0.json", "jwks_google_2023-11-14_risc0.json",
        "jwks_google_2023-12-02_risc0.json",
    ]

    /// The real Facebook Limited Login token (under `facebook/`) and the JWK published for it.
    public static let facebookTokens: [(token: String, jwks: String)] = [
        ("idtoken_facebook_limited_b3640b9b_2024-11-28_tvm_sdk.jwt", "jwk_facebook_b3640b9b_tvm_sdk.json")
    ]

    /// A snapshot of Facebook's published Limited Login keys (2024-10-01) that does not hold the
    /// real token's key (b3640b9b).
    public static let facebookWellKnownKeySet = "facebook/jwks_facebook_2024-10-01_panva_wellknown.json"

    /// The synthetic Google look-alike: Google-shaped claims signed with a test key published in
    /// its own key set (`syntheticGoogleKeySet`), never by Google.
    public static let syntheticGoogleToken = "synthetic/idtoken_fake_google_iss_scottbrady_risc0.jwt"
    public static let syntheticGoogleKeySet = "synthetic/jwks_test_8e4ea9f5_scottbrady_risc0.json"

    /// The fixture at `relativePath` (e.g. `google/...jwt`).
    public static func url(_ relativePath: String) -> URL {
        directory.appendingPathComponent(relativePath)
    }

    /// A fixture token's text without its trailing newline.
    public static func token(_ relativePath: String) throws -> String {
        try String(contentsOf: url(relativePath), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The payload of a compact JWS, decoded without verification (test bookkeeping only).
    public static func unverifiedClaims(ofTokenAt url: URL) throws -> [String: Any] {
        let token = try String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let segments = token.split(separator: ".")
        guard segments.count >= 2 else { return [:] }
        var payload = String(segments[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        return try JSONSerialization.jsonObject(with: Data(base64Encoded: payload) ?? Data()) as? [String: Any] ?? [:]
    }
}
