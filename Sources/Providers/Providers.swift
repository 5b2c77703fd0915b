// Providers: IdentityProvider protocol, JWKS cache and the shared verifier (issue 3).
