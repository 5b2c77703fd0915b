#!/usr/bin/env bash
# The browser test of a tenant's OpenID Provider (issue 42 §4), beside the test command: a web
# app that nobody here wrote signs a person in through the broker in a real browser.
#   - Apache httpd with Debian's mod_auth_openidc, configured only by its stock directives
#     against the tenant's discovery URL, protects a page that shows REMOTE_USER (the ID token's
#     sub, the broker account id);
#   - headless Chromium (Debian's chromium and chromium-driver, driven by Selenium from PyPI)
#     opens the page, lands on the broker's hosted sign-in page (screenshots in English and
#     Japanese into docs/images/), clicks Sign in with Apple, passes MockIdP's Apple page by
#     clicking its Continue button, and ends on the protected page, which must name the account
#     the Apple identity reached;
#   - a native sign-in of the same Apple identity (POST /v1/sign-in/apple with an identity token
#     minted by MockIdP) must reach the same account.
# Installs what is missing (as root): the Debian packages above, a CJK font for the Japanese
# screenshot, Selenium. Everything else runs on loopback and is stopped on exit: a PostgreSQL
# of its own, MockIdP, the broker, Apache, Chromium.
# Usage: [BIN=DIR] bash scripts/browser-test.sh
# BIN=DIR: the release binaries (broker, mock-idp) already built in DIR; otherwise they are
# built with `swift build -c release --scratch-path .build-release` (incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
say() { echo "browser-test: $*" >&2; }
fail() {
    say "FAIL: $*"
    exit 1
}

# --- Processes, ports, cleanup ---------------------------------------------------------------
work=$(mktemp -d /tmp/identitybroker-browser.XXXXXX)
chmod 711 "$work"
pids=() pg_bin=
run_pg() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
    local status=$?
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [[ -n "$pg_bin" ]] && { run_pg "$pg_bin/pg_ctl" -D "$work/pg" -m fast -w stop >/dev/null 2>&1 || true; }
    if ((status != 0)); then
        for log in broker.log apache-error.log; do
            [[ -s "$work/$log" ]] && { say "the last lines of $log:"; tail -15 "$work/$log" >&2; }
        done
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# --- What is missing: Debian packages, then Selenium ---------------------------------------
scripts/setup.sh
packages=(apache2 libapache2-mod-auth-openidc chromium chromium-driver fonts-noto-cjk curl openssl)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
    [[ $(id -u) -eq 0 ]] || fail "missing packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}"
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Selenium, pinned, in a virtual environment of its own under .build-browser-test (ignored by
# git), as scripts/test.sh keeps schemathesis: its libraries never change the test command's.
# It is handed Debian's chromium and chromedriver, so Selenium Manager never looks for (or
# downloads) a browser or a driver.
selenium_version=4.51.0
venv=.build-browser-test/venv
python=$venv/bin/python
export SE_OFFLINE=true
if ! "$python" -c "import selenium, sys; sys.exit(selenium.__version__ != '$selenium_version')" 2>/dev/null; then
    say "installing Selenium $selenium_version into $venv"
    rm -rf "$venv"
    if ! python3 -m venv "$venv" 2>/dev/null; then
        # Debian's own python3 makes virtual environments with python3-venv.
        [[ $(id -u) -eq 0 ]] || fail "python3 cannot make a virtual environment; run as root or: sudo apt-get install -y python3-venv"
        rm -rf "$venv"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
        python3 -m venv "$venv"
    fi
    "$python" -m pip install -q "selenium==$selenium_version"
fi

# --- The binaries ----------------------------------------------------------------------------
if [[ -n "${BIN:-}" ]]; then
    bin=$BIN
else
    say "building broker and mock-idp (release, .build-release)"
    for product in broker mock-idp; do
        swift build -c release --scratch-path .build-release --product "$product" >"$work/build.log" 2>&1 ||
            { grep -v "CMakeLists\|unhandled; explicitly" "$work/build.log" | tail -30 >&2; fail "the $product build failed"; }
    done
    bin=$(swift build -c release --scratch-path .build-release --show-bin-path)
fi
[[ -x "$bin/broker" && -x "$bin/mock-idp" ]] || fail "no broker and mock-idp in $bin"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# await URL WHAT: polls until URL answers (at most 30 s).
await() {
    local _
    for _ in $(seq 300); do
        curl -s -o /dev/null "$1" && return 0
        sleep 0.1
    done
    fail "$2 did not answer at $1"
}
pg_port=$(free_port) idp_port=$(free_port) broker_port=$(free_port) app_port=$(free_port)
idp=http://127.0.0.1:$idp_port
base=http://127.0.0.1:$broker_port
app=http://127.0.0.1:$app_port
tenant=acme tenant_name="Acme Shop"
issuer=$base/t/$tenant

# --- PostgreSQL of its own (initdb's defaults, over TCP on loopback) -------------------------
pg_bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -1)
[[ -x "$pg_bin/initdb" ]] || fail "PostgreSQL server binaries not found"
mkdir -p "$work/pg"
[[ $(id -u) -eq 0 ]] && chown postgres:postgres "$work/pg"
run_pg "$pg_bin/initdb" -D "$work/pg" -U postgres --auth=trust -E UTF8 >/dev/null
run_pg "$pg_bin/pg_ctl" -D "$work/pg" -l "$work/pg/server.log" -w -s \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $work/pg" start
psql_db() { psql -h 127.0.0.1 -p "$pg_port" -U postgres -AtqX -c "$1" postgres; }
# The role broker serve connects as (the tenant wall applies to it), made before the migrations.
psql_db "CREATE ROLE broker_serve LOGIN"
export DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
BROKER_MASTER_KEY=$(openssl rand -base64 32)
export BROKER_MASTER_KEY BROKER_LOG_LEVEL=warning BROKER_LOG_FORMAT=text
"$bin/broker" db migrate >/dev/null

# --- MockIdP as Apple (and LINE, a second option on the page) --------------------------------
line_secret=browser-line-web-secret
"$bin/mock-idp" serve --port "$idp_port" --key-file "$work/idp-key.pem" --oidc line \
    --oidc-web-client "browser-line:$line_secret" >"$work/idp.log" 2>&1 &
pids+=($!)
await "$idp/oidc/line/.well-known/openid-configuration" MockIdP

# --- The tenant, made with the CLI -----------------------------------------------------------
export BROKER_APPLE_BASE_URL=$idp BROKER_PORT=$broker_port BROKER_PUBLIC_URL=$base
broker() { "$bin/broker" "$@"; }
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt >"$work/AuthKey.p8"
broker tenant create "$tenant" --name "$tenant_name" >/dev/null
broker apple team set --tenant "$tenant" --team-id ACME000001 --key-id ACMEKEY001 --private-key-file "$work/AuthKey.p8" >/dev/null
broker apple group add --tenant "$tenant" --primary-app-id com.example.app >/dev/null
# The Services ID of Sign in with Apple on the web: Apple posts back to the broker's own callback.
# No return URL: that is the REST API's web flow's; the OpenID Provider's flow returns to the
# client's redirect_uri. LINE's `provider enable` still asks for one, unused here.
broker apple client add --tenant "$tenant" --group com.example.app --client-id com.example.web --kind service \
    --redirect-uri "$base/apple/callback" >/dev/null
printf '%s\n' "$line_secret" >"$work/line-secret.txt"
broker provider enable line --tenant "$tenant" --type oidc --issuer "$idp/oidc/line" --client-id browser-line \
    --client-secret-file "$work/line-secret.txt" --return-url "$app/" --display-name LINE --platforms web >/dev/null
# The web app, a confidential client whose redirect URI is mod_auth_openidc's.
redirect_uri=$app/redirect_uri
client=$(broker client create --tenant "$tenant" --name "Apache mod_auth_openidc" --redirect-uri "$redirect_uri" \
    --allow-loopback --json)
client_id=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["client_id"])' <<<"$client")
client_secret=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["client_secret"])' <<<"$client")
api_key=$(broker api-key create --tenant "$tenant" 2>/dev/null)

# --- The broker ------------------------------------------------------------------------------
DATABASE_URL="postgres://broker_serve@127.0.0.1:$pg_port/postgres?sslmode=disable" "$bin/broker" serve >"$work/broker.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do curl -sf "$base/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "$base/readyz" >/dev/null || fail "the broker did not become ready"

# --- Apache httpd with mod_auth_openidc --------------------------------------------------------
# Its own ServerRoot in the work folder; nothing of /etc/apache2 is read. The page is a
# server-side include of REMOTE_USER (OIDCRemoteUserClaim sub: the broker account id) and
# two claims mod_auth_openidc passes on.
modules=/usr/lib/apache2/modules
mkdir -p "$work/apache/www" "$work/apache/run"
chmod 755 "$work/apache" "$work/apache/www"
cat >"$work/apache/www/index.shtml" <<'HTML'
<!doctype html>
<html><head><meta charset="utf-8"><title>Protected page</title></head>
<body><h1>Protected page</h1>
<p>Signed in as <code id="user"><!--#echo var="REMOTE_USER" --></code></p>
<p>Email: <span id="email"><!--#echo var="OIDC_CLAIM_email" --></span>,
signed in with <span id="idp"><!--#echo var="OIDC_CLAIM_idp" --></span></p>
</body></html>
HTML
chmod 644 "$work/apache/www/index.shtml"
passphrase=$(openssl rand -hex 32)
# Modules built into Debian's apache2 (unixd, log_config) are not loaded again.
apache2=/usr/sbin/apache2
loaded=$("$apache2" -l)
load() { grep -q "mod_$1.c" <<<"$loaded" || echo "LoadModule ${1}_module $modules/mod_$1.so"; }
cat >"$work/apache/httpd.conf" <<CONF
ServerRoot $work/apache
ServerName 127.0.0.1:$app_port
Listen 127.0.0.1:$app_port
PidFile $work/apache/run/httpd.pid
DefaultRuntimeDir $work/apache/run
ErrorLog $work/apache-error.log
LogLevel warn auth_openidc:info
$(load mpm_event)
$(load unixd)
$(load authn_core)
$(load authz_core)
$(load authz_user)
$(load mime)
$(load dir)
$(load include)
LoadModule auth_openidc_module $modules/mod_auth_openidc.so
User www-data
Group www-data
DocumentRoot $work/apache/www
DirectoryIndex index.shtml
TypesConfig /dev/null
AddType text/html .shtml
AddOutputFilter INCLUDES .shtml
<Directory $work/apache/www>
    Options +Includes
</Directory>

OIDCProviderMetadataURL $issuer/.well-known/openid-configuration
OIDCClientID $client_id
OIDCClientSecret $client_secret
OIDCRedirectURI $redirect_uri
OIDCCryptoPassphrase $passphrase
OIDCScope "openid email profile"
OIDCPKCEMethod S256
OIDCRemoteUserClaim sub

<Location />
    AuthType openid-connect
    Require valid-user
</Location>
CONF
"$apache2" -t -f "$work/apache/httpd.conf" 2>"$work/apache-error.log" || fail "Apache refused its configuration: $(cat "$work/apache-error.log")"
"$apache2" -f "$work/apache/httpd.conf" -X >>"$work/apache-error.log" 2>&1 &
apache_pid=$!
pids+=("$apache_pid")
# Ready when the protected page sends a browser without a session to the tenant's authorize endpoint.
for _ in $(seq 300); do
    kill -0 "$apache_pid" 2>/dev/null || fail "Apache stopped"
    location=$(curl -s -o /dev/null -w '%{redirect_url}' "$app/" || true)
    [[ "$location" == "$issuer/authorize?"* ]] && break
    sleep 0.1
done
[[ "$location" == "$issuer/authorize?"* ]] || fail "Apache did not send a browser to $issuer/authorize (got '${location:-nothing}')"

# --- The browser -----------------------------------------------------------------------------
say "Chromium: $app/ -> the sign-in page -> Sign in with Apple -> MockIdP -> $app/"
mkdir -p docs/images
APP=$app ISSUER=$issuer IDP=$idp TENANT_NAME=$tenant_name IMAGES=docs/images FAILURE_SHOT=/tmp/identitybroker-browser-failure.png \
    "$python" - >"$work/browser.out" <<'PY' || fail "the browser's sign-in did not end on the protected page (above)"
import os
import sys

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

app, issuer, idp, images = os.environ["APP"], os.environ["ISSUER"], os.environ["IDP"], os.environ["IMAGES"]
tenant_name = os.environ["TENANT_NAME"]


def chromium(language):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=760,560", "--hide-scrollbars", f"--lang={language}"):
        options.add_argument(argument)
    # The language a person set, and MockIdP's Apple page with scripts off: its form does not
    # post itself, the person clicks Continue.
    options.add_experimental_option("prefs", {
        "intl.accept_languages": language,
        "profile.content_settings.exceptions.javascript": {f"{idp},*": {"setting": 2}},
    })
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    driver.set_page_load_timeout(30)
    return driver


def check(condition, what, driver):
    if not condition:
        try:
            driver.save_screenshot(os.environ["FAILURE_SHOT"])
            print(f"browser-test: at {driver.current_url} (screenshot: {os.environ['FAILURE_SHOT']}):\n"
                  f"{driver.page_source[:1500]}", file=sys.stderr)
        finally:
            print(f"browser-test: {what}", file=sys.stderr)
            sys.exit(1)


def sign_in_page(driver, label):
    """Opens the protected page and expects the tenant's hosted sign-in page with an Apple button."""
    driver.get(app + "/")
    check(driver.current_url.startswith(issuer + "/authorize?"), f"the protected page went to {driver.current_url}", driver)
    check(driver.find_element(By.TAG_NAME, "h1").text == tenant_name, "the page is not headed by the tenant's name", driver)
    buttons = driver.find_elements(By.CSS_SELECTOR, 'a[data-provider="apple"]')
    check(len(buttons) == 1, "the sign-in page has no Sign in with Apple button", driver)
    apple = buttons[0]
    check(apple.text == label, f"the Apple button says {apple.text!r}, not {label!r}", driver)
    check(apple.size["width"] >= 140 and apple.size["height"] >= 30, f"the Apple button is {apple.size}", driver)
    return apple


driver = chromium("ja")
try:
    sign_in_page(driver, "Appleでサインイン")
    driver.save_screenshot(os.path.join(images, "sign-in-page-ja.png"))
finally:
    driver.quit()

driver = chromium("en")
try:
    apple = sign_in_page(driver, "Sign in with Apple")
    driver.save_screenshot(os.path.join(images, "sign-in-page-en.png"))
    apple.click()
    # MockIdP's Apple page (Apple's consent, answered at once): a form that posts to the broker.
    check(driver.current_url.startswith(idp + "/auth/authorize?"), f"Sign in with Apple went to {driver.current_url}", driver)
    driver.find_element(By.XPATH, '//button[normalize-space()="Continue"]').click()
    # The broker's callback, then mod_auth_openidc's redirect URI, then the protected page.
    try:
        WebDriverWait(driver, 30).until(ready.presence_of_element_located((By.ID, "user")))
    except WebDriverException:
        check(False, "the protected page did not come", driver)
    check(driver.current_url == app + "/", f"the sign-in ended at {driver.current_url}", driver)
    user = driver.find_element(By.ID, "user").text.strip()
    check(user != "", "the protected page names no user", driver)
    print(user, driver.find_element(By.ID, "email").text.strip(), driver.find_element(By.ID, "idp").text.strip())
finally:
    driver.quit()
PY
read -r web_account web_email web_idp <"$work/browser.out"
say "the protected page names $web_account ($web_email, $web_idp)"
[[ "$web_idp" == apple ]] || fail "the ID token's idp is '$web_idp', not apple"
# MockIdP's Apple page consents for its web person; the identity is the broker account the page names.
apple_subject=000123.web0user0000000000000000000.0001
identity=$(psql_db "SELECT account_id || ' ' || subject FROM identities WHERE provider = 'apple'")
[[ "$identity" == "$web_account $apple_subject" ]] ||
    fail "the protected page names '$web_account', but the Apple identities are: '$identity'"

# --- A native sign-in of the same Apple identity ---------------------------------------------
# MockIdP mints an identity token of the same subject (PREFIX + 1) for the app, with a nonce.
read -r token nonce < <("$bin/mock-idp" mint --provider apple --key-file "$work/idp-key.pem" --audience com.example.app \
    --with-nonce --subject-prefix "${apple_subject%1}" --first 1 --subjects 2 --count 1)
native=$(curl -s -X POST "$base/v1/sign-in/apple" -H "Authorization: Bearer $api_key" -H 'Content-Type: application/json' \
    -d "{\"client_id\": \"com.example.app\", \"identity_token\": \"$token\", \"nonce\": \"$nonce\"}")
read -r native_account is_new < <(python3 -c '
import json, sys
answer = json.load(sys.stdin)
print(answer.get("account", {}).get("id", "-"), answer.get("is_new_account"))' <<<"$native") ||
    fail "the native sign-in answered: $native"
[[ "$native_account" == "$web_account" && "$is_new" == False ]] ||
    fail "the native sign-in reached account '$native_account' (new: $is_new), the browser's was '$web_account': $native"

echo "browser-test: PASS in $(($(date +%s) - started)) s: Apache mod_auth_openidc -> the broker's sign-in page (en, ja: docs/images/sign-in-page-{en,ja}.png) -> Sign in with Apple at MockIdP -> the protected page as account $web_account; the native sign-in of the same Apple identity reached the same account"
