"""A relying party written with Authlib, a stock OAuth / OpenID Connect client library, and
nothing of the broker's (issue 42 §4): discovery, the authorization code flow with PKCE and a
nonce through the tenant's sign-in (the browser's redirects followed by `requests`, no browser),
the ID token validated with Authlib's own JOSE code (signature from the JWKS, iss, aud, nonce,
at_hash), userinfo, a refresh, a token exchange of a native identity token (RFC 8693), and
RP-initiated logout. Run by Tests/brokerTests/AuthlibClientTests.swift; prints one JSON line of
what it saw, and exits non-zero on the first thing that is not as OpenID Connect says.

Usage: authlib_client.py ISSUER CLIENT_ID CLIENT_SECRET REDIRECT_URI POST_LOGOUT_URI PROVIDER NATIVE_TOKEN
"""
import json
import sys
from urllib.parse import parse_qs, urlparse

import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from authlib.oidc.core import CodeIDToken, IDToken

issuer, client_id, client_secret, redirect_uri, post_logout_uri, provider, native_token = sys.argv[1:8]


def check(condition, what):
    if not condition:
        print(f"authlib client: {what}", file=sys.stderr)
        sys.exit(1)


metadata = requests.get(issuer + "/.well-known/openid-configuration", timeout=10).json()
check(metadata["issuer"] == issuer, f"discovery names issuer {metadata['issuer']}")
check("code" in metadata["response_types_supported"], "no code flow in discovery")
check("S256" in metadata["code_challenge_methods_supported"], "no S256 in discovery")
keys = JsonWebKey.import_key_set(requests.get(metadata["jwks_uri"], timeout=10).json())

session = OAuth2Session(
    client_id, client_secret, scope="openid email profile offline_access", redirect_uri=redirect_uri,
    code_challenge_method="S256", token_endpoint_auth_method="client_secret_basic")
verifier = generate_token(64)
nonce = generate_token(20)
url, state = session.create_authorization_url(
    metadata["authorization_endpoint"], code_verifier=verifier, nonce=nonce, provider=provider)

# The browser: follow every redirect until the client's redirect URI.
for _ in range(10):
    answer = requests.get(url, allow_redirects=False, timeout=10)
    check(answer.status_code in (302, 303), f"{url.split('?')[0]} answered {answer.status_code}: {answer.text[:200]}")
    url = answer.headers["Location"]
    if url.startswith(redirect_uri):
        break
returned = parse_qs(urlparse(url).query)
check(returned.get("iss") == [issuer], f"the authorization response's iss is {returned.get('iss')}")
check(returned.get("state") == [state], "the state did not come back")

token = session.fetch_token(metadata["token_endpoint"], authorization_response=url, code_verifier=verifier)
claims = jwt.decode(
    token["id_token"], keys, claims_cls=CodeIDToken,
    claims_options={"iss": {"essential": True, "value": issuer}},
    claims_params={"nonce": nonce, "client_id": client_id, "access_token": token["access_token"]})
claims.validate()
check(claims["aud"] == client_id, f"aud is {claims['aud']}")
check(claims.get("idp") == provider, f"idp is {claims.get('idp')}")

userinfo = session.get(metadata["userinfo_endpoint"], timeout=10).json()
check(userinfo["sub"] == claims["sub"], "userinfo names another person")

refreshed = session.refresh_token(metadata["token_endpoint"], refresh_token=token["refresh_token"])
check(refreshed["refresh_token"] != token["refresh_token"], "the refresh token did not rotate")
again = jwt.decode(refreshed["id_token"], keys, claims_cls=IDToken, claims_params={"client_id": client_id})
again.validate()
check(again["sub"] == claims["sub"], "the refreshed ID token names another person")

exchanged = session.fetch_token(
    metadata["token_endpoint"], grant_type="urn:ietf:params:oauth:grant-type:token-exchange",
    subject_token=native_token, subject_token_type="urn:ietf:params:oauth:token-type:id_token")
check(exchanged.get("issued_token_type") == "urn:ietf:params:oauth:token-type:access_token", "no issued_token_type")
native = jwt.decode(exchanged["id_token"], keys, claims_cls=IDToken, claims_params={"client_id": client_id})
native.validate()

logout = requests.get(
    metadata["end_session_endpoint"],
    params={"id_token_hint": refreshed["id_token"], "post_logout_redirect_uri": post_logout_uri, "state": "bye"},
    allow_redirects=False, timeout=10)
check(logout.status_code == 303 and logout.headers["Location"] == post_logout_uri + "?state=bye", f"logout answered {logout.status_code}")
after = requests.post(
    metadata["token_endpoint"], data={"grant_type": "refresh_token", "refresh_token": refreshed["refresh_token"]},
    auth=(client_id, client_secret), timeout=10)
check(after.status_code == 400 and after.json()["error"] == "invalid_grant", "the session outlived its logout")

print(json.dumps({"sub": claims["sub"], "native_sub": native["sub"], "email": claims.get("email"), "userinfo": userinfo}))
