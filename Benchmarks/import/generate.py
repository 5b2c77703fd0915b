#!/usr/bin/env python3
"""Writes a synthetic user file for `broker import users` (issue 24's import benchmark).

    generate.py --format jsonl|firebase|auth0|supabase --accounts N [--identities-per-account 1.5]
                [--seed S] [--team TEAM000001] [--facebook-app 1000000000001] --out FILE
                [--copy-dir DIR --tenant-id UUID [--copy-ids v7|v4]] [--omit-scope]

Every account has one or two social identities (Google, Facebook, Apple), so that the file holds
N accounts and N x --identities-per-account identities (rounded down); every record is one the format's
reader in Sources/BrokerApplication/Imports/ imports (none is skipped, none is an error) into a
tenant with the Apple team --team and the Facebook app id --facebook-app. The same seed gives the
same file, byte for byte. Output is streamed: memory stays small whatever N.

--copy-dir DIR also writes DIR/accounts.tsv and DIR/identities.tsv, the rows the import would
write, in PostgreSQL's COPY text format, for the raw COPY baseline (Benchmarks/import/run.sh):
  accounts:   id, tenant_id, external_id, given_name, family_name, display_name, email,
              email_verified, is_private_email, status, created_at
  identities: id, tenant_id, account_id, provider, provider_scope, subject, email, email_verified,
              is_private_email, created_at
Row ids are version 7 (time-ordered) UUIDs like the broker's (--copy-ids v4: random ones); they
come from their own seeded generator, so the user file is the same with or without --copy-dir.

Python 3 standard library only.
"""

import argparse
import json
import math
import os
import random
import re
import sys
import time
from json.encoder import encode_basestring as json_string

FORMATS = ("jsonl", "firebase", "auth0", "supabase")
RELAY_DOMAIN = "privaterelay.appleid.com"
LOWERCASE = "abcdefghijklmnopqrstuvwxyz"
OTHER_PROVIDERS = {"google": ("facebook", "apple"), "facebook": ("google", "apple"), "apple": ("google", "facebook")}

GIVEN_NAMES = (
    "Ada Alan Grace Katherine Margaret Linus Barbara Dennis Frances Edsger John Donald Radia Ken Hedy Tim Sophie Claude "
    "Niklaus Leslie Shafi Whitfield Ivan Adele Jean Karen Yukihiro Guido Bjarne James Anders Rasmus Larry Brendan Mary "
    "Carol Lynn Annie Susan Joan Evelyn Kathleen Betty Ruth Marlyn Fran Jennifer Kay Lois Dorothy Gladys Valerie Alice "
    "Emma Olivia Ava Isabella Mia Charlotte Amelia Harper Liam Noah Oliver Elijah Lucas Mason Logan Ethan Aiden Jacob "
    "Mateo Sofia Lucia Martina Valentina Hugo Leo Paul Louis Gabriel Raphael Arthur Jules Chloe Ines Lea Manon Camille "
    "Haruto Yuto Sota Yui Hina Aoi Min Jin Seo Ji Wei Fang Li Ming Priya Arjun Aarav Ananya Diya Omar Layla Yusuf Amira"
).split()
FAMILY_NAMES = (
    "Lovelace Turing Hopper Johnson Hamilton Torvalds Liskov Ritchie Allen Dijkstra McCarthy Knuth Perlman Thompson "
    "Lamarr Berners-Lee Wilson Shannon Wirth Lamport Goldwasser Diffie Sutherland Goldberg Sammet Jones Matsumoto "
    "Rossum Stroustrup Gosling Hejlsberg Lerdorf Wall Eich Keller Shaw Clarke Easley Kare Boyd Rosenberg Hamilton "
    "Booth Snyder Holberton Spence Bartik Meltzer Teitelbaum Wescoff Lichterman Vaughan Gleason Keller Hoover Smith "
    "Garcia Martinez Rodriguez Lopez Gonzalez Perez Sanchez Ramirez Torres Flores Rivera Gomez Diaz Reyes Morales Cruz "
    "Muller Schmidt Schneider Fischer Weber Meyer Wagner Becker Schulz Hoffmann Martin Bernard Dubois Thomas Robert "
    "Richard Petit Durand Leroy Moreau Sato Suzuki Takahashi Tanaka Watanabe Ito Yamamoto Nakamura Kim Lee Park Choi "
    "Chen Wang Zhang Liu Yang Huang Patel Sharma Singh Kumar Gupta Khan Ali Hassan Ahmed Rossi Russo Ferrari Esposito"
).split()

# Subjects and external ids are bijections of the account number, x -> (x * A + B) mod M with A
# prime to M, so they are unique without remembering the ones already used. A is M times the
# golden ratio's fraction (nudged to be prime to M): consecutive accounts land far apart in the
# range, spread evenly, so the unique indexes see inserts all over, as with real ids.
GOOGLE_MOD = 10**20  # 21 digits, the first one 1
FACEBOOK_MODS = {length: 9 * 10 ** (length - 1) for length in (15, 16, 17)}  # 15 to 17 digits, no leading 0
APPLE_MOD = 1 << 128  # 32 hex digits
FIREBASE_MOD = 62**28  # 28 base62 characters
SUPABASE_MOD = 1 << 122  # the random bits of a version 4 UUID


def golden_multiplier(modulus):
    a = (math.isqrt(5 * modulus * modulus) - modulus) // 2
    while math.gcd(a, modulus) != 1:
        a += 1
    return a


BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
BASE62_PAIRS = [low + high for high in BASE62 for low in BASE62]  # pair i: digits i % 62, i // 62

# created_at: uniform over 2019-01-01T00:00:00Z .. 2025-12-31T23:59:59.999Z, in milliseconds.
CREATED_FROM_MS = 1546300800000
CREATED_UNTIL_MS = 1767225600000
# Version 7 row ids of the COPY baseline: one millisecond per account from this instant on.
COPY_ID_EPOCH_MS = 1767225600000

TEAM_ID = re.compile(r"^[A-Z0-9]{10}$")
UUID_TEXT = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def parse_arguments(argv):
    parser = argparse.ArgumentParser(
        description="Write a synthetic user file for `broker import users` (and, with --copy-dir, the same rows as COPY input).")
    parser.add_argument("--format", required=True, choices=FORMATS, help="the file's format (broker import users --from)")
    parser.add_argument("--accounts", required=True, type=int, help="how many accounts (one per record)")
    parser.add_argument("--identities-per-account", type=float, default=1.5,
                        help="average identities per account, 1.0 to 2.0 (each account has 1 or 2; default 1.5)")
    parser.add_argument("--seed", type=int, default=1, help="the same seed writes the same file (default 1)")
    parser.add_argument("--team", default="TEAM000001", help="the tenant's Apple team id (jsonl provider_scope of Apple identities)")
    parser.add_argument("--facebook-app", default="1000000000001", help="the tenant's Facebook app id (jsonl provider_scope)")
    parser.add_argument("--out", required=True, help="the file to write ('-': standard output)")
    parser.add_argument("--omit-scope", action="store_true", help="jsonl: leave provider_scope out (the tenant's configuration decides)")
    parser.add_argument("--copy-dir", help="also write DIR/accounts.tsv and DIR/identities.tsv (COPY text format) for the COPY baseline")
    parser.add_argument("--tenant-id", help="with --copy-dir: the tenant id written in every row (default: the placeholder @TENANT@)")
    parser.add_argument("--copy-ids", choices=("v7", "v4"), default="v7",
                        help="with --copy-dir: row ids as time-ordered version 7 UUIDs like the broker's (default), or random version 4")
    args = parser.parse_args(argv)
    if args.accounts < 0:
        parser.error("--accounts must be 0 or more")
    if not 1.0 <= args.identities_per_account <= 2.0:
        parser.error("--identities-per-account must be from 1.0 to 2.0 (each account has one or two identities)")
    if not TEAM_ID.match(args.team):
        parser.error("--team must be 10 uppercase letters or digits")
    if not args.facebook_app.isdigit():
        parser.error("--facebook-app must be digits")
    if args.tenant_id is not None:
        args.tenant_id = args.tenant_id.lower()
        if not UUID_TEXT.match(args.tenant_id):
            parser.error("--tenant-id must be a UUID")
        if not args.copy_dir:
            parser.error("--tenant-id goes with --copy-dir")
    return args


_DAYS = {}


def iso_ms(ms):
    """2024-01-02T03:04:05.678Z. The date of each day is formatted once."""
    seconds, millis = divmod(ms, 1000)
    day, second = divmod(seconds, 86400)
    date = _DAYS.get(day)
    if date is None:
        date = _DAYS[day] = time.strftime("%Y-%m-%dT", time.gmtime(day * 86400))
    minute, second = divmod(second, 60)
    hour, minute = divmod(minute, 60)
    return "%s%02d:%02d:%02d.%03dZ" % (date, hour, minute, second, millis)


def uuid_text(value):
    h = "%032x" % value
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def v4_layout(bits122):
    """122 bits spread over a version 4, RFC 9562 variant UUID."""
    return ((bits122 >> 74) << 80) | (4 << 76) | (((bits122 >> 62) & 0xFFF) << 64) | (2 << 62) | (bits122 & ((1 << 62) - 1))


class Generator:
    """The accounts of one seed: the same numbers in the same order whatever the format."""

    def __init__(self, args):
        self.args = args
        self.random = random.Random(args.seed)
        # Offsets of the bijections: another seed gives other subjects and ids.
        moduli = {"google": GOOGLE_MOD, "apple": APPLE_MOD, "firebase": FIREBASE_MOD, "supabase": SUPABASE_MOD}
        moduli.update({"facebook%d" % length: modulus for length, modulus in FACEBOOK_MODS.items()})
        setup = random.Random("offsets-%d" % args.seed)
        self.bijections = {name: (golden_multiplier(modulus), setup.randrange(modulus), modulus) for name, modulus in moduli.items()}
        self.two_identities = args.identities_per_account - 1.0

    def scrambled(self, name, n):
        """The n-th value of the bijection `name`: unique for each n below its modulus."""
        a, b, modulus = self.bijections[name]
        return (n * a + b) % modulus

    def subject(self, provider, n):
        r = self.random
        if provider == "google":
            return str(GOOGLE_MOD + self.scrambled("google", n))
        if provider == "facebook":
            # 15 to 17 digits, mostly 17; unique within each length, so unique.
            roll = r.random()
            length = 15 if roll < 0.15 else 16 if roll < 0.35 else 17
            return str(10 ** (length - 1) + self.scrambled("facebook%d" % length, n))
        return "001234.%032x.%04d" % (self.scrambled("apple", n), int(r.random() * 10000))

    def external_id(self, n, identities):
        fmt = self.args.format
        if fmt == "jsonl":
            return "user-%d" % n
        if fmt == "firebase":
            value = self.scrambled("firebase", n)
            pairs = []
            for _ in range(14):
                value, pair = divmod(value, 3844)
                pairs.append(BASE62_PAIRS[pair])
            return "".join(pairs)
        if fmt == "auth0":
            provider, subject = identities[0][0], identities[0][1]
            return "%s|%s" % ("google-oauth2" if provider == "google" else provider, subject)
        return uuid_text(v4_layout(self.scrambled("supabase", n)))

    def account(self, n):
        """Account n (1-based): a dict with the values every format writes. Identities are
        (provider, subject, email or None, email_verified, is_private_email) as the import keeps them."""
        r = self.random
        uniform = r.random  # one call per choice: faster than choice() and randrange()
        named = uniform() >= 0.03
        given = GIVEN_NAMES[int(uniform() * len(GIVEN_NAMES))] if named else None
        family = FAMILY_NAMES[int(uniform() * len(FAMILY_NAMES))] if named else None
        email = None
        verified = False
        if uniform() >= 0.05:
            local = ("%s.%s%d" % (given, family, n)).lower().replace("-", "") if named else "user%d" % n
            email = local + "@example.com"
            verified = uniform() >= 0.03
        created_ms = CREATED_FROM_MS + int(uniform() * (CREATED_UNTIL_MS - CREATED_FROM_MS))
        disabled = uniform() < 0.005

        roll = uniform()
        first = "google" if roll < 0.5 else "facebook" if roll < 0.8 else "apple"
        providers = [first]
        # Exactly floor(N x (average - 1)) accounts have a second identity, spread evenly.
        if int(n * self.two_identities) > int((n - 1) * self.two_identities):
            others = OTHER_PROVIDERS[first]
            providers.append(others[0] if uniform() < 0.6 else others[1])
        identities = []
        for provider in providers:
            subject = self.subject(provider, n)
            identity_email = email
            if provider == "apple" and uniform() < 0.5:
                identity_email = "".join(r.choices(LOWERCASE, k=10)) + "@" + RELAY_DOMAIN
            # What every reader concludes alike: an identity email is verified when it is the
            # account's verified email (Firebase keeps no per-provider flag).
            identity_verified = identity_email is not None and identity_email == email and verified
            identity_private = identity_email is not None and identity_email.endswith("@" + RELAY_DOMAIN)
            identities.append((provider, subject, identity_email, identity_verified, identity_private))
        return {
            "n": n, "external_id": self.external_id(n, identities), "given": given, "family": family, "email": email,
            "verified": verified, "created_ms": created_ms, "created": iso_ms(created_ms), "disabled": disabled, "identities": identities,
        }


# One record per format. Members as each reader reads them (Sources/BrokerApplication/Imports/).

JSON_BOOL = {True: "true", False: "false"}


def jsonl_line(a, args):
    """The record as one JSON text, written by hand: the format the benchmark reads most, and
    this is three times as fast as building a dict for json.dumps (the same bytes)."""
    q = json_string
    parts = ['{"external_id":', q(a["external_id"])]
    if a["email"] is not None:
        parts += [',"email":', q(a["email"])]
    parts += [',"email_verified":', JSON_BOOL[a["verified"]]]
    if a["given"] is not None:
        parts += [',"name":{"given_name":', q(a["given"]), ',"family_name":', q(a["family"]), "}"]
    parts += [',"status":"disabled"' if a["disabled"] else ',"status":"active"', ',"created_at":', q(a["created"]), ',"identities":[']
    for index, (provider, subject, email, verified, private) in enumerate(a["identities"]):
        parts += [',{"provider":' if index else '{"provider":', q(provider), ',"subject":', q(subject)]
        if not args.omit_scope:
            parts += [',"provider_scope":', q(args.team if provider == "apple" else args.facebook_app if provider == "facebook" else "")]
        if email is not None:
            parts += [',"email":', q(email), ',"email_verified":', JSON_BOOL[verified]]
            if private:
                parts.append(',"is_private_email":true')
        parts.append("}")
    parts.append("]}")
    return "".join(parts)


FIREBASE_PROVIDERS = {"google": "google.com", "facebook": "facebook.com", "apple": "apple.com"}


def firebase_record(a, args, r):
    record = {"localId": a["external_id"]}
    if a["email"] is not None:
        record["email"] = a["email"]
    record["emailVerified"] = a["verified"]
    display = "%s %s" % (a["given"], a["family"]) if a["given"] is not None else None
    if display is not None:
        record["displayName"] = display
    if a["disabled"]:
        record["disabled"] = True
    record["lastSignedInAt"] = str(min(a["created_ms"] + r.randrange(0, 200 * 86400000), CREATED_UNTIL_MS))
    record["createdAt"] = str(a["created_ms"])
    infos = []
    for provider, subject, email, _, _ in a["identities"]:
        info = {"providerId": FIREBASE_PROVIDERS[provider], "rawId": subject}
        if email is not None:
            info["email"] = email
        if display is not None and provider != "apple":
            info["displayName"] = display
        infos.append(info)
    record["providerUserInfo"] = infos
    return record


AUTH0_PROVIDERS = {"google": "google-oauth2", "facebook": "facebook", "apple": "apple"}


def auth0_record(a, args):
    record = {"user_id": a["external_id"]}
    if a["email"] is not None:
        record["email"] = a["email"]
        record["email_verified"] = a["verified"]
    if a["given"] is not None:
        record["name"] = "%s %s" % (a["given"], a["family"])
        record["given_name"] = a["given"]
        record["family_name"] = a["family"]
    elif a["email"] is not None:
        record["name"] = a["email"]  # what Auth0 writes when it has no name; the reader ignores it
    record["created_at"] = a["created"]
    if a["disabled"]:
        record["blocked"] = True
    identities = []
    for index, (provider, subject, email, verified, _) in enumerate(a["identities"]):
        name = AUTH0_PROVIDERS[provider]
        identity = {"provider": name, "user_id": subject, "connection": name, "isSocial": True}
        # The primary identity (the first) takes the user's email unless it has a profile of its
        # own; the linked ones carry theirs in profileData.
        if email is not None and (index > 0 or email != a["email"]):
            identity["profileData"] = {"email": email, "email_verified": verified}
        identities.append(identity)
    record["identities"] = identities
    return record


def supabase_record(a, args):
    created = a["created"][:-1] + "+00:00"  # as to_jsonb writes a timestamptz
    record = {
        "id": a["external_id"], "aud": "authenticated", "role": "authenticated", "email": a["email"], "encrypted_password": "",
        "email_confirmed_at": created if a["verified"] else None, "phone": None, "created_at": created,
        "banned_until": "infinity" if a["disabled"] else None, "is_anonymous": False, "deleted_at": None,
    }
    metadata = {}
    if a["given"] is not None:
        metadata["full_name"] = metadata["name"] = "%s %s" % (a["given"], a["family"])
    record["raw_user_meta_data"] = metadata
    identities = []
    for provider, subject, email, verified, _ in a["identities"]:
        data = {"sub": subject}
        if email is not None:
            data["email"] = email
            data["email_verified"] = verified
        identities.append({"provider": provider, "provider_id": subject, "user_id": a["external_id"], "identity_data": data})
    record["identities"] = identities
    return record


def copy_text(value):
    """A COPY text field: NULL as \\N. Generated values hold no backslash, tab or line break: nothing to escape."""
    return "\\N" if value is None else value


def copy_bool(value):
    return "t" if value else "f"


class CopyRows:
    """accounts.tsv and identities.tsv: the rows the import writes (ImportProviderResolver, ImportSession)."""

    def __init__(self, args):
        os.makedirs(args.copy_dir, exist_ok=True)
        self.args = args
        self.tenant = args.tenant_id or "@TENANT@"
        self.random = random.Random("copy-ids-%d" % args.seed)
        self.accounts = open(os.path.join(args.copy_dir, "accounts.tsv"), "w", encoding="utf-8", newline="\n")
        self.identities = open(os.path.join(args.copy_dir, "identities.tsv"), "w", encoding="utf-8", newline="\n")
        self.account_lines = []
        self.identity_lines = []

    def row_id(self, n):
        if self.args.copy_ids == "v4":
            return uuid_text(v4_layout(self.random.getrandbits(122)))
        # 48 bits of milliseconds, version 7, 12 random bits, the variant, 62 random bits.
        ms = COPY_ID_EPOCH_MS + n
        rand = self.random.getrandbits(74)
        return "%08x-%04x-7%03x-%04x-%012x" % (
            ms >> 16, ms & 0xFFFF, rand >> 62, 0x8000 | ((rand >> 48) & 0x3FFF), rand & 0xFFFFFFFFFFFF)

    def add(self, a):
        t, b = copy_text, copy_bool
        args = self.args
        # The account's email: its own, else its first identity's (ImportProviderResolver.resolve).
        email, verified = a["email"], a["verified"]
        if email is None:
            for _, _, identity_email, identity_verified, _ in a["identities"]:
                if identity_email is not None:
                    email, verified = identity_email, identity_verified
                    break
        private = email is not None and email.lower().endswith("@" + RELAY_DOMAIN)
        display = "%s %s" % (a["given"], a["family"]) if a["given"] is not None else None
        created = a["created"]
        account_id = self.row_id(a["n"])
        self.account_lines.append("\t".join((
            account_id, self.tenant, a["external_id"], t(a["given"]), t(a["family"]), t(display), t(email), b(verified), b(private),
            "disabled" if a["disabled"] else "active", created)) + "\n")
        for provider, subject, identity_email, identity_verified, identity_private in a["identities"]:
            scope = args.team if provider == "apple" else args.facebook_app if provider == "facebook" else ""
            self.identity_lines.append("\t".join((
                self.row_id(a["n"]), self.tenant, account_id, provider, scope, subject, t(identity_email), b(identity_verified),
                b(identity_private), created)) + "\n")

    def flush(self):
        self.accounts.write("".join(self.account_lines))
        self.identities.write("".join(self.identity_lines))
        self.account_lines.clear()
        self.identity_lines.clear()

    def close(self):
        self.flush()
        self.accounts.close()
        self.identities.close()


def main(argv):
    args = parse_arguments(argv)
    started = time.monotonic()
    generator = Generator(args)
    extras = random.Random("extras-%d" % args.seed)  # members no reader keeps (Firebase lastSignedInAt)
    copy = CopyRows(args) if args.copy_dir else None
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8", newline="\n")
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    fmt = args.format
    counts = {"google": 0, "facebook": 0, "apple": 0}
    lines = []
    if fmt == "firebase":
        # One JSON document, one users[] element per line.
        out.write('{"users": [\n')
    for n in range(1, args.accounts + 1):
        a = generator.account(n)
        for identity in a["identities"]:
            counts[identity[0]] += 1
        if fmt == "jsonl":
            lines.append(jsonl_line(a, args) + "\n")
        elif fmt == "firebase":
            lines.append(encode(firebase_record(a, args, extras)) + (",\n" if n < args.accounts else "\n"))
        elif fmt == "auth0":
            lines.append(encode(auth0_record(a, args)) + "\n")
        else:
            lines.append(encode(supabase_record(a, args)) + "\n")
        if copy:
            copy.add(a)
        if len(lines) == 10000:
            out.write("".join(lines))
            lines.clear()
            if copy:
                copy.flush()
    out.write("".join(lines))
    if fmt == "firebase":
        out.write("]}\n")
    if out is not sys.stdout:
        out.close()
    else:
        out.flush()
    if copy:
        copy.close()
    identities = sum(counts.values())
    print("generated %d %s accounts with %d identities (google %d, facebook %d, apple %d) in %.1f s%s" % (
        args.accounts, fmt, identities, counts["google"], counts["facebook"], counts["apple"], time.monotonic() - started,
        "" if args.out == "-" else " -> " + args.out), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
