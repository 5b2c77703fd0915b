import Foundation
import TestSupport
import Testing

/// One real Google or Facebook Limited Login token of Tests/Fixtures and its key set, as
/// `broker token verify` is given them.
struct CLIRealToken: Sendable, CustomTestStringConvertible {
    let provider: String
    let tokenPath: String
    let jwksPath: String

    var testDescription: String { URL(fileURLWithPath: tokenPath).lastPathComponent }

    static let google: [CLIRealToken] = ProviderFixtures.googleTokens.map {
        CLIRealToken(
            provider: "google", tokenPath: ProviderFixtures.url("google/" + $0.token).path,
            jwksPath: ProviderFixtures.url("google/" + $0.jwks).path)
    }
    static let facebook: [CLIRealToken] = ProviderFixtures.facebookTokens.map {
        CLIRealToken(
            provider: "facebook", tokenPath: ProviderFixtures.url("facebook/" + $0.token).path,
            jwksPath: ProviderFixtures.url("facebook/" + $0.jwks).path)
    }
    static let all = google + facebook

    /// The claims read without verifying (to pick the instant, audience, nonce and domain).
    struct Claims {
        let issuedAt: Double
        let expiresAt: Double
        let audience: String
        let subject: String
        let nonce: String
        let hostedDomain: String?
        let authorizedParty: String?
        let hasNotBefore: Bool
    }

    func claims() throws -> Claims {
        let payload = try ProviderFixtures.unverifiedClaims(ofTokenAt: URL(fileURLWithPath: tokenPath))
        return Claims(
            issuedAt: try #require((payload["iat"] as? NSNumber)?.doubleValue),
            expiresAt: try #require((payload["exp"] as? NSNumber)?.doubleValue),
            audience: try #require(payload["aud"] as? String), subject: try #require(payload["sub"] as? String),
            nonce: try #require(payload["nonce"] as? String), hostedDomain: payload["hd"] as? String,
            authorizedParty: payload["azp"] as? String, hasNotBefore: payload["nbf"] != nil)
    }
}

/// `broker token verify --provider google|facebook` on the real tokens in Tests/Fixtures, at a
/// fixed clock. Every run passes `--jwks` with a file, and the provider URLs point at a loopback
/// port where nothing listens: the CLI never reaches the network here.
@Suite struct GoogleFacebookTokenVerifyCLITests {
    static let cli = BrokerCLI(
        databaseURL: nil,
        extra: ["BROKER_GOOGLE_JWKS_URL": "http://127.0.0.1:9/certs", "BROKER_FACEBOOK_JWKS_URL": "http://127.0.0.1:9/jwks"])

    static func instant(_ seconds: Double) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds))
    }

    /// `token verify` with the token's own audience, nonce and (Google) hosted domain, at `at`,
    /// each replaceable.
    static func verify(
        _ real: CLIRealToken, at: Double? = nil, audience: String? = nil, nonce: String? = nil, hostedDomain: String? = nil,
        jwks: String? = nil, json: Bool = false
    ) throws -> (BrokerCLI.Result, CLIRealToken.Claims) {
        let claims = try real.claims()
        var arguments = [
            "token", "verify", "--provider", real.provider, "--token", "@\(real.tokenPath)", "--jwks", jwks ?? real.jwksPath,
            "--at", instant(at ?? claims.issuedAt + 60), "--audience", audience ?? claims.audience, "--nonce", nonce ?? claims.nonce,
        ]
        if let domain = hostedDomain ?? claims.hostedDomain { arguments += ["--hosted-domain", domain] }
        if json { arguments.append("--json") }
        return (try cli.run(arguments), claims)
    }

    /// The text report's check lines: name → (passed, detail).
    static func checks(_ output: String) -> [String: (passed: Bool, detail: String)] {
        var checks: [String: (passed: Bool, detail: String)] = [:]
        for line in output.split(separator: "\n") where line.hasPrefix("ok   ") || line.hasPrefix("FAIL ") {
            let rest = line.dropFirst(5)
            let name = rest.prefix(10).trimmingCharacters(in: .whitespaces)
            let detail = String(rest.dropFirst(11))
            if checks[name] == nil { checks[name] = (line.hasPrefix("ok"), detail) }
        }
        return checks
    }

    @Test(arguments: CLIRealToken.all)
    func aRealTokenVerifiesAndEveryCheckIsPrinted(_ real: CLIRealToken) throws {
        let (result, claims) = try Self.verify(real)
        #expect(result.status == 0, "\(result.output)")
        #expect(!result.output.contains("FAIL"))
        #expect(result.output.contains("valid: sub \(claims.subject)"))
        let checks = Self.checks(result.output)
        var expected: Set<String> = [
            "size", "structure", "alg", "header", "kid", "signature", "iss", "aud", "sub", "iat", "exp", "nonce", "azp",
        ]
        if real.provider == "google" { expected.insert("hd") }
        if claims.hasNotBefore { expected.insert("nbf") }
        #expect(Set(checks.keys) == expected, "\(result.output)")
        #expect(checks.values.allSatisfy { $0.passed })
        #expect(checks["alg"]?.detail == "RS256")
        #expect(checks["aud"]?.detail == claims.audience)
        #expect(checks["sub"]?.detail == claims.subject)
        #expect(checks["nonce"]?.detail == "matches (raw)")
        #expect(checks["iss"]?.detail == (real.provider == "google" ? "https://accounts.google.com" : "https://www.facebook.com"))
        #expect(checks["azp"]?.detail == (claims.authorizedParty ?? "absent"))
        if real.provider == "google" {
            #expect(claims.authorizedParty == claims.audience)
            #expect(checks["hd"]?.detail == "risczero.com")
        } else {
            #expect(claims.authorizedParty == nil)
        }
    }

    @Test(arguments: CLIRealToken.all)
    func theJSONReportIsValidAndListsEveryCheck(_ real: CLIRealToken) throws {
        let (result, claims) = try Self.verify(real, json: true)
        #expect(result.status == 0, "\(result.output)")
        let body = try result.object()
        #expect(body["valid"] as? Bool == true)
        #expect(body["subject"] as? String == claims.subject)
        #expect(body["code"] == nil || body["code"] is NSNull)
        let checks = try #require(body["checks"] as? [[String: Any]])
        #expect(checks.allSatisfy { $0["passed"] as? Bool == true })
        let byName = Dictionary(checks.compactMap { check in (check["check"] as? String).map { ($0, check) } }) { first, _ in first }
        #expect(byName["azp"]?["detail"] as? String == (claims.authorizedParty ?? "absent"))
        #expect(byName["nonce"]?["detail"] as? String == "matches (raw)")
        #expect(byName["signature"] != nil && byName["exp"] != nil && byName["aud"] != nil)
        #expect((byName["hd"]?["detail"] as? String) == (real.provider == "google" ? "risczero.com" : nil))
    }

    @Test(arguments: CLIRealToken.all)
    func aRealTokenIsRefusedPastExpiryOrForAnotherAudienceOrNonce(_ real: CLIRealToken) throws {
        let claims = try real.claims()
        let expired = try Self.verify(real, at: claims.expiresAt + 61).0
        #expect(expired.status == 1, "\(expired.output)")
        #expect(expired.output.contains("invalid: token_expired"))
        #expect(Self.checks(expired.output)["exp"]?.passed == false)
        let stillInSkew = try Self.verify(real, at: claims.expiresAt + 59).0
        #expect(stillInSkew.status == 0, "\(stillInSkew.output)")

        let otherAudience = try Self.verify(
            real, audience: real.provider == "google" ? "1234-other.apps.googleusercontent.com" : "1234567890"
        ).0
        #expect(otherAudience.status == 1)
        #expect(otherAudience.output.contains("invalid: audience_mismatch"))
        #expect(Self.checks(otherAudience.output)["aud"]?.passed == false)

        let otherNonce = try Self.verify(real, nonce: "not-" + claims.nonce, json: true).0
        #expect(otherNonce.status == 1)
        let body = try otherNonce.object()
        #expect(body["valid"] as? Bool == false)
        #expect(body["code"] as? String == "nonce_mismatch")
        let failed = (body["checks"] as? [[String: Any]] ?? []).filter { $0["passed"] as? Bool == false }.compactMap {
            $0["check"] as? String
        }
        #expect(failed == ["nonce"])
    }

    @Test(arguments: CLIRealToken.google)
    func aGoogleTokenIsRefusedForAnotherHostedDomain(_ real: CLIRealToken) throws {
        let result = try Self.verify(real, hostedDomain: "example.com").0
        #expect(result.status == 1, "\(result.output)")
        #expect(result.output.contains("invalid: hosted_domain_mismatch"))
        let hd = Self.checks(result.output)["hd"]
        #expect(hd?.passed == false)
        #expect(hd?.detail.contains("example.com") == true)
        // Case does not matter.
        #expect(try Self.verify(real, hostedDomain: "RISCZERO.com").0.status == 0)
    }

    @Test func withoutAudienceAndNonceTheyAreShownNotCompared() throws {
        let real = try #require(CLIRealToken.google.first)
        let claims = try real.claims()
        let result = try Self.cli.run(
            "token", "verify", "--provider", "google", "--token", "@\(real.tokenPath)", "--jwks", real.jwksPath, "--at",
            Self.instant(claims.issuedAt + 60))
        #expect(result.status == 0, "\(result.output)")
        let checks = Self.checks(result.output)
        #expect(checks["aud"]?.detail == "\(claims.audience) (not compared: no audience given)")
        #expect(checks["azp"]?.detail == "\(claims.audience) (not compared: no audience given)")
        #expect(checks["hd"]?.detail == "risczero.com (no domain required)")
        #expect(checks["nonce"]?.passed == true)
    }

    @Test func theSyntheticGoogleLookAlikeIsRefusedWithGooglesKeys() throws {
        let token = ProviderFixtures.url(ProviderFixtures.syntheticGoogleToken).path
        let claims = try ProviderFixtures.unverifiedClaims(ofTokenAt: URL(fileURLWithPath: token))
        let audience = try #require(claims["aud"] as? String)
        let at = Self.instant(try #require((claims["iat"] as? NSNumber)?.doubleValue) + 60)
        for keySet in ProviderFixtures.googleKeySets {
            let result = try Self.cli.run(
                "token", "verify", "--provider", "google", "--token", "@\(token)", "--jwks", ProviderFixtures.url("google/" + keySet).path,
                "--at", at, "--audience", audience)
            #expect(result.status == 1, "\(keySet): \(result.output)")
            #expect(result.output.contains("invalid: unknown_key"))
            #expect(Self.checks(result.output)["kid"]?.passed == false)
            let json = try Self.cli.run(
                "token", "verify", "--provider", "google", "--token", "@\(token)", "--jwks", ProviderFixtures.url("google/" + keySet).path,
                "--at", at, "--audience", audience, "--json")
            #expect(json.status == 1)
            #expect(try json.object()["code"] as? String == "unknown_key")
            #expect(try json.object()["valid"] as? Bool == false)
        }
        // Only the key gives it away: with its own test key it passes Google's policy.
        let own = try Self.cli.run(
            "token", "verify", "--provider", "google", "--token", "@\(token)", "--jwks",
            ProviderFixtures.url(ProviderFixtures.syntheticGoogleKeySet).path, "--at", at, "--audience", audience)
        #expect(own.status == 0, "\(own.output)")
    }

    /// A tenant's own id has no policy without the tenant's settings; what is not an id is refused.
    @Test func anUnknownProviderIsRefusedWithAHint() throws {
        let real = try #require(CLIRealToken.google.first)
        let result = try Self.cli.run(
            "token", "verify", "--provider", "github", "--token", "@\(real.tokenPath)", "--jwks", real.jwksPath)
        #expect(result.status == 1, "\(result.output)")
        #expect(result.output.contains("'github' is a tenant's own provider"), "\(result.output)")
        #expect(result.output.contains("hint: Add --tenant <slug>."), "\(result.output)")
        let json = try Self.cli.run(
            "token", "verify", "--provider", "github", "--token", "@\(real.tokenPath)", "--jwks", real.jwksPath, "--json")
        #expect(json.status == 1)
        let error = try #require(try json.object()["error"] as? [String: Any])
        #expect(error["hint"] as? String == "Add --tenant <slug>.")
        let notAnID = try Self.cli.run(
            "token", "verify", "--provider", "Git Hub", "--token", "@\(real.tokenPath)", "--jwks", real.jwksPath)
        #expect(notAnID.status == 1, "\(notAnID.output)")
        #expect(notAnID.output.contains("'Git Hub' is not a provider id."), "\(notAnID.output)")
        #expect(notAnID.output.contains("hint: Use --provider apple, google, facebook or a tenant's own id with --tenant."))
    }

    @Test(arguments: ["apple", "facebook"])
    func aHostedDomainIsForGoogleOnly(_ provider: String) throws {
        let real = try #require(provider == "facebook" ? CLIRealToken.facebook.first : CLIRealToken.google.first)
        let result = try Self.cli.run(
            "token", "verify", "--provider", provider, "--token", "@\(real.tokenPath)", "--jwks", real.jwksPath,
            "--hosted-domain", "risczero.com")
        #expect(result.status == 1, "\(result.output)")
        #expect(result.output.contains("--hosted-domain applies to Google tokens only."))
        #expect(result.output.contains("hint: Add --provider google."))
        // Nothing was verified.
        #expect(!result.output.contains("valid:"))
    }
}
