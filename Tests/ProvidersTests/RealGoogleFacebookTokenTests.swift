import BrokerCore
import Foundation
import TestSupport
import Testing

@testable import Providers

/// One real provider token of Tests/Fixtures/provider-tokens and the key set it verifies with.
struct RealProviderToken: Sendable, CustomTestStringConvertible {
    let provider: ProviderID
    /// Relative to the fixtures folder (`google/…jwt`).
    let file: String
    let keySet: String

    var testDescription: String { file }

    static let google: [RealProviderToken] = ProviderFixtures.googleTokens.map {
        RealProviderToken(provider: .google, file: "google/" + $0.token, keySet: "google/" + $0.jwks)
    }
    static let facebook: [RealProviderToken] = ProviderFixtures.facebookTokens.map {
        RealProviderToken(provider: .facebook, file: "facebook/" + $0.token, keySet: "facebook/" + $0.jwks)
    }
    static let all = google + facebook

    /// The issuer the provider writes in this token.
    var issuer: String { provider == .google ? "https://accounts.google.com" : "https://www.facebook.com" }
}

/// What a test reads from a fixture token without verifying it (to pick its clock, audience,
/// nonce and hosted domain).
struct UnverifiedToken {
    let text: String
    let issuedAt: Date
    let expiresAt: Date
    let audience: String
    let subject: String
    let nonce: String?
    let hostedDomain: String?
    let authorizedParty: String?
    let tokenID: String?
    let email: String?

    init(_ relativePath: String) throws {
        text = try ProviderFixtures.token(relativePath)
        let claims = try ProviderFixtures.unverifiedClaims(ofTokenAt: ProviderFixtures.url(relativePath))
        issuedAt = Date(timeIntervalSince1970: try #require((claims["iat"] as? NSNumber)?.doubleValue))
        expiresAt = Date(timeIntervalSince1970: try #require((claims["exp"] as? NSNumber)?.doubleValue))
        audience = try #require(claims["aud"] as? String)
        subject = try #require(claims["sub"] as? String)
        nonce = claims["nonce"] as? String
        hostedDomain = claims["hd"] as? String
        authorizedParty = claims["azp"] as? String
        tokenID = claims["jti"] as? String
        email = claims["email"] as? String
    }

    /// One minute after issue: inside every real token's lifetime.
    var inside: Date { issuedAt.addingTimeInterval(60) }

    /// The options a tenant configured exactly for this token would verify it with.
    var ownOptions: TokenCheckOptions {
        TokenCheckOptions(audiences: [audience], rawNonce: nonce, hostedDomain: hostedDomain)
    }
}

/// The real Google id tokens and the real Facebook Limited Login token, verified through each
/// provider's own policy (its descriptor's `tokenPolicy`: the function its sign-in and
/// `broker token verify` use) over the fixture key sets, at a fixed clock inside their lifetime,
/// and refused with the right code past it or against the wrong audience, nonce, hosted domain
/// or key set. See Tests/Fixtures/provider-tokens/README.md for where each one comes from.
@Suite struct RealGoogleFacebookTokenTests {
    typealias F = VerifierFixture

    static func keys(_ relativePath: String) throws -> JWKSCache {
        JWKSCache(source: .fixed(try Data(contentsOf: ProviderFixtures.url(relativePath))), logger: F.logger)
    }

    /// The verifier `provider`'s sign-in builds for `options`, over a fixture key set.
    static func verifier(_ provider: ProviderID, keySet: String, _ options: TokenCheckOptions) throws
        -> (IdentityTokenVerifier, NonceExpectation)
    {
        let (policy, expectation) = provider.builtInDescriptor.tokenPolicy(nil, options)
        return (IdentityTokenVerifier(policy: policy, keys: try keys(keySet)), expectation)
    }

    /// The names of the checks that failed, in order.
    static func failedChecks(_ verifier: IdentityTokenVerifier, _ token: String, nonce: NonceExpectation, at: Date) async
        -> [String]
    {
        await verifier.check(token, nonce: nonce, at: at).checks.filter { !$0.passed }.map(\.name)
    }

    @Test func theFixtureListsNameEveryRealGoogleAndFacebookToken() throws {
        for (folder, listed) in [
            ("google", ProviderFixtures.googleTokens.map(\.token)), ("facebook", ProviderFixtures.facebookTokens.map(\.token)),
        ] {
            let files = try FileManager.default.contentsOfDirectory(atPath: ProviderFixtures.url(folder).path)
            #expect(Set(files.filter { $0.hasPrefix("idtoken_") }) == Set(listed), "\(folder)")
            #expect(listed.count == (folder == "google" ? 5 : 1))
        }
        #expect(FileManager.default.fileExists(atPath: ProviderFixtures.url(ProviderFixtures.syntheticGoogleToken).path))
        #expect(FileManager.default.fileExists(atPath: ProviderFixtures.url(ProviderFixtures.syntheticGoogleKeySet).path))
    }

    @Test(arguments: RealProviderToken.all)
    func verifiesThroughItsProvidersOwnPolicyInsideItsLifetime(_ real: RealProviderToken) async throws {
        let token = try UnverifiedToken(real.file)
        let nonce = try #require(token.nonce, "every real Google and Facebook fixture token carries a nonce")
        let (verifier, expectation) = try Self.verifier(real.provider, keySet: real.keySet, token.ownOptions)
        // Google and Facebook put the raw nonce in the token.
        #expect(expectation.rawNonce == nonce)
        #expect(expectation.mode == .raw)
        #expect(!expectation.skip)
        #expect(verifier.policy.issuers.contains(real.issuer))
        #expect(verifier.policy.algorithms == ["RS256"])

        let claims = try await verifier.verify(token.text, nonce: expectation, at: token.inside)
        #expect(claims.issuer == real.issuer)
        #expect(claims.subject == token.subject)
        #expect(claims.audiences == [token.audience])
        #expect(claims.issuedAt == token.issuedAt)
        #expect(claims.expiresAt == token.expiresAt)
        #expect(claims.expiresAt.timeIntervalSince(claims.issuedAt) == 3_600)
        #expect(claims.nonce == nonce)
        #expect(claims.tokenID == token.tokenID)
        #expect(claims.hostedDomain == token.hostedDomain)
        #expect(claims.authorizedParty == token.authorizedParty)

        let report = await verifier.check(token.text, nonce: expectation, at: token.inside)
        #expect(report.isValid)
        #expect(report.claims == claims)
        #expect(report.checks.allSatisfy { $0.passed }, "\(report.checks.filter { !$0.passed })")
        let names = Set(report.checks.map(\.name))
        #expect(
            names.isSuperset(of: [
                "size", "structure", "alg", "header", "kid", "signature", "iss", "aud", "sub", "iat", "exp", "nonce", "azp",
            ]))
        #expect(names.contains("hd") == (real.provider == .google))
        let details = Dictionary(report.checks.map { ($0.name, $0.detail) }) { first, _ in first }
        #expect(details["nonce"] == "matches (raw)")
        #expect(details["azp"] == (token.authorizedParty ?? "absent"))
        #expect(details["aud"] == token.audience)
        #expect(details["signature"]?.hasPrefix("RS256 signature verifies with key ") == true)
        if real.provider == .google {
            #expect(token.hostedDomain == "risczero.com")
            #expect(details["hd"] == "risczero.com")
            #expect(claims.emailVerified == true)
            #expect(claims.authorizedParty == token.audience)
        } else {
            #expect(token.authorizedParty == nil)
            #expect(claims.name == PersonName(givenName: "Алина", familyName: "Алиновна"))
        }
    }

    @Test(arguments: RealProviderToken.all)
    func isRefusedAsExpiredOneSecondPastExpiryAndSkew(_ real: RealProviderToken) async throws {
        let token = try UnverifiedToken(real.file)
        let (verifier, expectation) = try Self.verifier(real.provider, keySet: real.keySet, token.ownOptions)
        let late = token.expiresAt.addingTimeInterval(61)
        #expect(await verifier.failureCode(token.text, nonce: expectation, at: late) == "token_expired")
        // Expiry is the only thing wrong with it then.
        #expect(await Self.failedChecks(verifier, token.text, nonce: expectation, at: late) == ["exp"])
        // Within the 60 s skew it still verifies.
        #expect(await verifier.failureCode(token.text, nonce: expectation, at: token.expiresAt.addingTimeInterval(59)) == nil)
        // Before issue (beyond the skew) it is not valid yet.
        #expect(
            await verifier.failureCode(token.text, nonce: expectation, at: token.issuedAt.addingTimeInterval(-400))
                == "token_not_yet_valid")
    }

    @Test(arguments: RealProviderToken.all)
    func isRefusedForAnotherAudience(_ real: RealProviderToken) async throws {
        let token = try UnverifiedToken(real.file)
        let other = real.provider == .google ? "1234-other.apps.googleusercontent.com" : "1234567890"
        var options = token.ownOptions
        options.audiences = [other]
        let (verifier, expectation) = try Self.verifier(real.provider, keySet: real.keySet, options)
        #expect(await verifier.failureCode(token.text, nonce: expectation, at: token.inside) == "audience_mismatch")
        // Google's azp names the token's own client, which is not the configured one either.
        #expect(
            await Self.failedChecks(verifier, token.text, nonce: expectation, at: token.inside)
                == (real.provider == .google ? ["aud", "azp"] : ["aud"]))
        // Configuring the real client beside another one accepts the token.
        options.audiences = [other, token.audience]
        let (both, bothExpectation) = try Self.verifier(real.provider, keySet: real.keySet, options)
        #expect(await both.failureCode(token.text, nonce: bothExpectation, at: token.inside) == nil)
    }

    @Test(arguments: RealProviderToken.all)
    func isRefusedWithAnotherNonce(_ real: RealProviderToken) async throws {
        let token = try UnverifiedToken(real.file)
        let nonce = try #require(token.nonce)
        for wrong in [
            "wrong-" + nonce, String(nonce.dropLast()), F.sha256Hex(nonce),
            nonce.uppercased() == nonce ? nonce.lowercased() : nonce.uppercased(),
        ] {
            var options = token.ownOptions
            options.rawNonce = wrong
            let (verifier, expectation) = try Self.verifier(real.provider, keySet: real.keySet, options)
            #expect(await verifier.failureCode(token.text, nonce: expectation, at: token.inside) == "nonce_mismatch", "\(wrong)")
            #expect(await Self.failedChecks(verifier, token.text, nonce: expectation, at: token.inside) == ["nonce"])
        }
        // Apple's hashed mode is not these providers': the raw nonce is compared whatever
        // nonceMode the options carry.
        var hashed = token.ownOptions
        hashed.nonceMode = .sha256
        let (verifier, expectation) = try Self.verifier(real.provider, keySet: real.keySet, hashed)
        #expect(expectation.mode == .raw)
        #expect(await verifier.failureCode(token.text, nonce: expectation, at: token.inside) == nil)
    }

    @Test(arguments: RealProviderToken.google)
    func aGoogleTokenIsRefusedForAnotherHostedDomain(_ real: RealProviderToken) async throws {
        let token = try UnverifiedToken(real.file)
        for wrong in ["example.com", "eng.risczero.com", "risczero.co", "zero.com"] {
            var options = token.ownOptions
            options.hostedDomain = wrong
            let (verifier, expectation) = try Self.verifier(.google, keySet: real.keySet, options)
            #expect(await verifier.failureCode(token.text, nonce: expectation, at: token.inside) == "hosted_domain_mismatch", "\(wrong)")
            #expect(await Self.failedChecks(verifier, token.text, nonce: expectation, at: token.inside) == ["hd"])
        }
        // The domain is compared without regard to case.
        var upper = token.ownOptions
        upper.hostedDomain = "RiscZero.COM"
        let (verifier, expectation) = try Self.verifier(.google, keySet: real.keySet, upper)
        #expect(await verifier.failureCode(token.text, nonce: expectation, at: token.inside) == nil)
        // Without a required domain the token's hd is reported, not compared.
        var none = token.ownOptions
        none.hostedDomain = nil
        let (open, openExpectation) = try Self.verifier(.google, keySet: real.keySet, none)
        let report = await open.check(token.text, nonce: openExpectation, at: token.inside)
        #expect(report.isValid)
        #expect(report.checks.first { $0.name == "hd" }?.detail == "risczero.com (no domain required)")
    }

    @Test(arguments: RealProviderToken.google)
    func aGoogleTokenWhoseAuthorizedPartyIsNotAClientIsRefused(_ real: RealProviderToken) async throws {
        let token = try UnverifiedToken(real.file)
        var options = token.ownOptions
        options.authorizedParties = ["1234-android.apps.googleusercontent.com"]
        let (verifier, expectation) = try Self.verifier(.google, keySet: real.keySet, options)
        #expect(await verifier.failureCode(token.text, nonce: expectation, at: token.inside) == "audience_mismatch")
        #expect(await Self.failedChecks(verifier, token.text, nonce: expectation, at: token.inside) == ["azp"])
        // The sign-in shape: the requested client as audience, every configured client as azp.
        options.authorizedParties = ["1234-android.apps.googleusercontent.com", token.audience]
        let (signIn, signInExpectation) = try Self.verifier(.google, keySet: real.keySet, options)
        #expect(await signIn.failureCode(token.text, nonce: signInExpectation, at: token.inside) == nil)
    }

    @Test(arguments: ProviderFixtures.googleKeySets)
    func theSyntheticLookAlikeIsRefusedByGooglesRealKeySet(_ keySet: String) async throws {
        let token = try UnverifiedToken(ProviderFixtures.syntheticGoogleToken)
        // Google-shaped in every claim: Google's issuer, its own audience, hd and nonce.
        #expect(token.hostedDomain == "example.com")
        #expect(token.nonce != nil)
        let (verifier, expectation) = try Self.verifier(.google, keySet: "google/" + keySet, token.ownOptions)
        #expect(await verifier.failureCode(token.text, nonce: expectation, at: token.inside) == "unknown_key")
        #expect(await Self.failedChecks(verifier, token.text, nonce: expectation, at: token.inside) == ["kid"])
        // Only its key gives it away: with its own published test key Google's policy passes it.
        let (own, ownExpectation) = try Self.verifier(.google, keySet: ProviderFixtures.syntheticGoogleKeySet, token.ownOptions)
        #expect(await own.failureCode(token.text, nonce: ownExpectation, at: token.inside) == nil)
    }

    @Test func theFacebookTokenIsRefusedByAKeySetWithoutItsKey() async throws {
        let real = try #require(RealProviderToken.facebook.first)
        let token = try UnverifiedToken(real.file)
        let (verifier, expectation) = try Self.verifier(.facebook, keySet: ProviderFixtures.facebookWellKnownKeySet, token.ownOptions)
        #expect(await verifier.failureCode(token.text, nonce: expectation, at: token.inside) == "unknown_key")
    }

    @Test func eachProvidersPolicyRefusesTheOthersIssuer() async throws {
        let facebook = try #require(RealProviderToken.facebook.first)
        let facebookToken = try UnverifiedToken(facebook.file)
        let (asGoogle, googleExpectation) = try Self.verifier(.google, keySet: facebook.keySet, facebookToken.ownOptions)
        #expect(await asGoogle.failureCode(facebookToken.text, nonce: googleExpectation, at: facebookToken.inside) == "issuer_mismatch")
        let google = try #require(RealProviderToken.google.first)
        let googleToken = try UnverifiedToken(google.file)
        var options = googleToken.ownOptions
        options.hostedDomain = nil
        let (asFacebook, facebookExpectation) = try Self.verifier(.facebook, keySet: google.keySet, options)
        #expect(await asFacebook.failureCode(googleToken.text, nonce: facebookExpectation, at: googleToken.inside) == "issuer_mismatch")
        #expect(await Self.failedChecks(asFacebook, googleToken.text, nonce: facebookExpectation, at: googleToken.inside) == ["iss"])
        // Facebook's policy ignores a hosted domain: it has no hd rule.
        options.hostedDomain = "example.com"
        let (policy, _) = FacebookProvider.tokenPolicy(options)
        #expect(policy.claimChecks.map(\.name) == ["azp"])
        #expect(GoogleProvider.tokenPolicy(options).0.claimChecks.map(\.name) == ["azp", "hd"])
    }

    /// The whole Google sign-in verification (settings from the tenant's configuration) on the
    /// real tokens.
    @Test(arguments: RealProviderToken.google)
    func googleSignInVerifiesARealToken(_ real: RealProviderToken) async throws {
        let token = try UnverifiedToken(real.file)
        let tenantID = UUID()
        let provider = GoogleProvider(keys: try Self.keys(real.keySet))
        let configuration = ProviderConfiguration(
            tenantID: tenantID, provider: .google, platforms: [.ios, .web],
            clientIDs: ["1234-ios.apps.googleusercontent.com", token.audience], hostedDomain: "risczero.com")
        let proof = ProviderProof(idToken: token.text, nonce: token.nonce)
        let verified = try await provider.verify(
            proof, settings: .init(configuration: configuration, requestedClientID: nil), tenantID: tenantID, at: token.inside)
        #expect(verified.identity.provider == .google)
        #expect(verified.identity.providerScope == "")
        #expect(verified.identity.subject == token.subject)
        #expect(verified.identity.email == token.email)
        #expect(verified.identity.emailVerified)
        #expect(verified.identity.attributes == ["hd": "risczero.com"])
        #expect(verified.clientID == token.audience)
        #expect(verified.issuedAt == token.issuedAt)
        #expect(verified.replayKey?.count == 32)

        // The body names the other configured client: the token was not issued to it.
        await #expect(throws: ProviderFailure.self) {
            _ = try await provider.verify(
                proof, settings: .init(configuration: configuration, requestedClientID: "1234-ios.apps.googleusercontent.com"),
                tenantID: tenantID, at: token.inside)
        }
        let codes = await Self.failureCodes(
            provider, token: token, tenantID: tenantID,
            configurations: [
                // Another Workspace domain.
                ProviderConfiguration(
                    tenantID: tenantID, provider: .google, platforms: [], clientIDs: [token.audience], hostedDomain: "example.com"),
                // Another client only.
                ProviderConfiguration(
                    tenantID: tenantID, provider: .google, platforms: [], clientIDs: ["1234-web.apps.googleusercontent.com"]),
            ])
        #expect(codes == ["hosted_domain_mismatch", "audience_mismatch"])
        // Expired, on the sign-in path too.
        do {
            _ = try await provider.verify(
                proof, settings: .init(configuration: configuration, requestedClientID: nil), tenantID: tenantID,
                at: token.expiresAt.addingTimeInterval(61))
            Issue.record("an expired token verified")
        } catch {
            #expect(error.code == "token_expired")
        }
    }

    static func failureCodes(
        _ provider: GoogleProvider, token: UnverifiedToken, tenantID: UUID, configurations: [ProviderConfiguration]
    ) async -> [String?] {
        var codes: [String?] = []
        for configuration in configurations {
            do {
                _ = try await provider.verify(
                    ProviderProof(idToken: token.text, nonce: token.nonce),
                    settings: .init(configuration: configuration, requestedClientID: nil), tenantID: tenantID, at: token.inside)
                codes.append(nil)
            } catch {
                codes.append(error.code)
            }
        }
        return codes
    }

    /// The whole Facebook Limited Login verification on the real token.
    @Test func facebookLimitedLoginVerifiesTheRealToken() async throws {
        let real = try #require(RealProviderToken.facebook.first)
        let token = try UnverifiedToken(real.file)
        let tenantID = UUID()
        let provider = FacebookProvider(
            keys: try Self.keys(real.keySet), graph: FacebookGraphClient(baseURL: "http://127.0.0.1:9"), secrets: TestDatabase.secrets)
        let settings = FacebookProvider.FacebookSettings(appID: token.audience, appSecret: "unused-by-limited-login")
        let verified = try await provider.verify(
            ProviderProof(idToken: token.text, nonce: token.nonce), settings: settings, tenantID: tenantID, at: token.inside)
        #expect(verified.identity.provider == .facebook)
        #expect(verified.identity.providerScope == token.audience)
        #expect(verified.identity.subject == token.subject)
        #expect(verified.identity.email == nil)
        #expect(!verified.identity.emailVerified)
        #expect(verified.identity.attributes == ["name": "Алина Алиновна"])
        #expect(verified.identity.name == PersonName(givenName: "Алина", familyName: "Алиновна"))
        #expect(verified.clientID == token.audience)
        #expect(verified.replayKey?.count == 32)

        var codes: [String] = []
        for (proof, settings, at) in [
            // No nonce: Limited Login requires one.
            (ProviderProof(idToken: token.text), settings, token.inside),
            (ProviderProof(idToken: token.text, nonce: "another-nonce"), settings, token.inside),
            (
                ProviderProof(idToken: token.text, nonce: token.nonce),
                FacebookProvider.FacebookSettings(appID: "1234567890", appSecret: "x"), token.inside
            ),
            (ProviderProof(idToken: token.text, nonce: token.nonce), settings, token.expiresAt.addingTimeInterval(61)),
        ] {
            do {
                _ = try await provider.verify(proof, settings: settings, tenantID: tenantID, at: at)
                codes.append("verified")
            } catch {
                codes.append(error.code)
            }
        }
        #expect(codes == ["invalid_request", "nonce_mismatch", "audience_mismatch", "token_expired"])
    }
}

@Suite struct GraphQueryEncodingTests {
    @Test func valuesArePercentEncodedButForUnreservedCharacters() {
        #expect(FormEncoding.encode([("a", "AZaz09-._~"), ("b", "1|s e/c+r&t=é")]) == "a=AZaz09-._~&b=1%7Cs%20e%2Fc%2Br%26t%3D%C3%A9")
        #expect(FormEncoding.encode([("fields", "id,name,email")]) == "fields=id%2Cname%2Cemail")
    }
}
