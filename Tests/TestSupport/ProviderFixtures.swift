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
