"""The load, the fault and the checks of failover.sh (issue 43, part 2). Standard library only.

Threads send a steady load to one broker: Apple sign-ins (each token once, at SIGNIN_RATE a
second) and refresh rotations (each chain of refresh tokens one after the other, a 503 retried
with the same token after 100 ms as a client does). One more thread reads the events feed as a
backend does (GET /v1/events after the last cursor, every 100 ms), and a loopback HTTP server
takes the tenant's webhook deliveries. At KILL_AT seconds the primary is killed (KILL_CMD), and
PROMOTE_AFTER seconds later the standby promoted (PROMOTE_CMD). After DURATION seconds the load
stops; then the checks, which print a report and make the exit status:

- no 500, no answer later than the request deadline (REQUEST_TIMEOUT + 1 s), no dropped
  connection: during the switch the broker answers 503;
- back to full service within 10 s of the promotion: the last answer that was not 200, or
  took more than a second, came less than 10 s after the promotion finished;
- every sign-in answered 200 is on the new primary: its account and its session (the access
  token's `sid`) are rows there, read through HAProxy after the switch;
- no person has two accounts: every 200 for one Apple `sub` names the same account, and no
  account is left without an identity;
- every refresh chain whose last rotation was answered 200 still works with that token;
- the events feed, read across the switch, has every event of the tenant once, in order, and
  every new account answered 200 its `account.created`;
- every event reached the webhook, none twice (by `webhook-id`).
"""

import base64
import http.client
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter, defaultdict

base = urllib.parse.urlparse(os.environ["BASE"])
api_key = os.environ["API_KEY"]
client_id = os.environ["CLIENT_ID"]
tokens = [line.split() for line in open(os.environ["TOKENS"]) if line.strip()]
duration = float(os.environ.get("DURATION", "40"))
kill_at = float(os.environ.get("KILL_AT", "10"))
promote_after = float(os.environ.get("PROMOTE_AFTER", "2"))
signin_rate = float(os.environ.get("SIGNIN_RATE", "200"))
signin_threads = int(os.environ.get("SIGNIN_THREADS", "6"))
refresh_threads = int(os.environ.get("REFRESH_THREADS", "2"))
request_timeout = float(os.environ.get("REQUEST_TIMEOUT", "10"))
webhook_port = int(os.environ["WEBHOOK_PORT"])
psql = os.environ["PSQL"].split()
out_dir = os.environ["OUT"]

stop = threading.Event()
lock = threading.Lock()
answers = []  # (kind, sent, answered, status, code)
signins = []  # (sub, account_id, sid, is_new)
chains = {}  # chain -> (last status, last token that was answered 200)
refresh_queue = []
feed = []  # event ids in the order the feed gave them
feed_problems = Counter()
webhooks = Counter()
webhook_times = {}


def claims(jwt):
    payload = jwt.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


class Client:
    """One keep-alive connection; a new one after a failure."""

    def __init__(self):
        self.connection = None

    def call(self, method, path, body=None, headers=None):
        if self.connection is None:
            self.connection = http.client.HTTPConnection(base.hostname, base.port, timeout=request_timeout + 5)
        headers = dict(headers or {})
        headers["Authorization"] = "Bearer " + api_key
        if body is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(body)
        try:
            self.connection.request(method, path, body=body, headers=headers)
            response = self.connection.getresponse()
            data = response.read()
            if response.getheader("Connection", "").lower() == "close":
                self.connection.close()
                self.connection = None
            return response.status, data
        except (OSError, http.client.HTTPException) as error:
            self.connection.close()
            self.connection = None
            return None, repr(error).encode()


def record(kind, sent, status, data):
    answered = time.time()
    code = None
    if status is None:
        code = "connection: " + data.decode(errors="replace")[:80]
    elif status != 200:
        try:
            code = json.loads(data).get("code")
        except ValueError:
            code = data[:80].decode(errors="replace")
    with lock:
        answers.append((kind, sent, answered, status, code))


def sign_in_worker(index):
    client = Client()
    interval = signin_threads / signin_rate
    next_at = time.time()
    for token, nonce in tokens[index::signin_threads]:
        if stop.is_set():
            return
        next_at += interval
        sent = time.time()
        status, data = client.call("POST", "/v1/sign-in/apple", {"client_id": client_id, "identity_token": token, "nonce": nonce})
        record("sign-in", sent, status, data)
        if status == 200:
            answer = json.loads(data)
            session = answer["session"]
            with lock:
                signins.append((claims(token)["sub"], answer["account"]["id"], claims(session["access_token"])["sid"], answer["is_new_account"]))
                if len(chains) < 400:
                    chain = len(chains)
                    chains[chain] = (200, session["refresh_token"])
                    refresh_queue.append((chain, session["refresh_token"]))
        time.sleep(max(0, next_at - time.time()))


def refresh_worker():
    client = Client()
    while not stop.is_set():
        with lock:
            item = refresh_queue.pop(0) if refresh_queue else None
        if item is None:
            time.sleep(0.01)
            continue
        chain, token = item
        while not stop.is_set():
            sent = time.time()
            status, data = client.call("POST", "/v1/sessions/refresh", {"refresh_token": token})
            record("refresh", sent, status, data)
            if status == 200:
                successor = json.loads(data)["refresh_token"]
                with lock:
                    chains[chain] = (200, successor)
                    refresh_queue.append((chain, successor))
                break
            with lock:
                chains[chain] = (status, chains[chain][1])
            if status != 503 and status is not None:
                break
            time.sleep(0.1)
        time.sleep(0.005)


def feed_page(client, after):
    path = "/v1/events?limit=500" + ("&after=" + urllib.parse.quote(after) if after else "")
    status, data = client.call("GET", path)
    if status != 200:
        return status, None, after
    page = json.loads(data)
    return status, [event["id"] for event in page["events"]], page["next_cursor"]


def feed_reader(until):
    client = Client()
    cursor = None
    while True:
        status, ids, cursor = feed_page(client, cursor)
        if ids is None:
            feed_problems[status] += 1
        else:
            feed.extend(ids)
            if not ids and until():
                return
        time.sleep(0.1)


class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            webhooks[self.headers["webhook-id"]] += 1
            webhook_times.setdefault(self.headers["webhook-id"], time.time())
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def query(sql):
    result = subprocess.run(psql + ["-XAtc", sql], capture_output=True, text=True, check=True)
    return [line for line in result.stdout.splitlines() if line]


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", webhook_port), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    load_stopped = threading.Event()
    reader = threading.Thread(target=feed_reader, args=(load_stopped.is_set,), daemon=True)
    reader.start()
    workers = [threading.Thread(target=sign_in_worker, args=(i,), daemon=True) for i in range(signin_threads)]
    workers += [threading.Thread(target=refresh_worker, daemon=True) for _ in range(refresh_threads)]
    start = time.time()
    for worker in workers:
        worker.start()
    time.sleep(kill_at)
    killed = time.time()
    subprocess.run(os.environ["KILL_CMD"], shell=True, check=True)
    time.sleep(promote_after)
    promote_started = time.time()
    subprocess.run(os.environ["PROMOTE_CMD"], shell=True, check=True)
    promoted = time.time()
    time.sleep(max(0, start + duration - time.time()))
    stop.set()
    for worker in workers:
        worker.join()
    load_stopped.set()
    reader.join()

    failures = []
    rel = lambda t: t - killed  # noqa: E731
    print(f"load: {len(answers)} answers in {duration:.0f} s; primary killed at {rel(killed):+.2f} s, "
          f"promotion asked at {rel(promote_started):+.2f} s, done at {rel(promoted):+.2f} s")
    by = Counter((kind, status, code) for kind, _, _, status, code in answers)
    for (kind, status, code), count in sorted(by.items(), key=lambda item: (item[0][0], str(item[0][1]))):
        print(f"  {kind:8} {status} {code or ''}: {count}")
    bad = [a for a in answers if a[3] is None or a[3] >= 500 and a[3] != 503 or a[3] not in (None, 200, 503)]
    if bad:
        failures.append(f"{len(bad)} answers neither 200 nor 503 (or no answer)")
    slowest = max(a[2] - a[1] for a in answers)
    print(f"slowest answer: {slowest:.2f} s (the request deadline: {request_timeout:.0f} s)")
    if slowest > request_timeout + 1:
        failures.append(f"an answer took {slowest:.2f} s, past the request deadline")
    refused = [a for a in answers if a[3] != 200]
    if refused:
        first, last = min(a[2] for a in refused), max(a[2] for a in refused)
        print(f"answers other than 200: {len(refused)}, from {rel(first):+.2f} s to {rel(last):+.2f} s after the kill")
    else:
        print("answers other than 200: none")
    # Full service: from then on every answer is 200 and none waited more than a second.
    degraded = [a[2] for a in answers if a[3] != 200 or a[2] - a[1] > 1]
    full = max(degraded) if degraded else killed
    print(f"full service {rel(full):+.2f} s after the kill, {full - promoted:+.2f} s after the promotion finished")
    if full - promoted > 10:
        failures.append(f"full service came {full - promoted:.2f} s after the promotion (at most 10 s)")
    per_second = defaultdict(Counter)
    for _, _, answered, status, _ in answers:
        per_second[int(answered - killed) if answered >= killed else int(answered - killed) - 1][status] += 1
    with open(os.path.join(out_dir, "failover-timeline.txt"), "w") as timeline:
        for second in sorted(per_second):
            timeline.write(f"{second:+d} {dict(per_second[second])}\n")

    # Every sign-in answered 200 is on the new primary.
    primary = query("SELECT pg_is_in_recovery()::text || ' ' || inet_server_port()")
    print(f"checked on: {primary[0]} (in recovery, port)")
    accounts = set(query("SELECT id FROM accounts"))
    sessions = set(query("SELECT id FROM sessions"))
    missing_accounts = [s for s in signins if s[1] not in accounts]
    missing_sessions = [s for s in signins if s[2] not in sessions]
    print(f"sign-ins answered 200: {len(signins)}; accounts missing on the new primary: {len(missing_accounts)}, sessions missing: {len(missing_sessions)}")
    if missing_accounts or missing_sessions:
        failures.append("a sign-in answered 200 is not on the new primary")
    by_sub = defaultdict(set)
    for sub, account, _, _ in signins:
        by_sub[sub].add(account)
    two = [sub for sub, ids in by_sub.items() if len(ids) > 1]
    orphans = query("SELECT count(*) FROM accounts a WHERE NOT EXISTS (SELECT 1 FROM identities i WHERE i.account_id = a.id)")[0]
    returning = sum(1 for s in signins if not s[3])
    print(f"people: {len(by_sub)} ({returning} returning sign-ins); with two accounts: {len(two)}; accounts without an identity: {orphans}")
    if two or orphans != "0":
        failures.append("a person has two accounts, or an account was left half-written")

    # Every chain whose last rotation was answered 200 works with that token.
    client = Client()
    last_ok = [(chain, token) for chain, (status, token) in chains.items() if status == 200]
    broken = 0
    for _, token in last_ok:
        status, _ = client.call("POST", "/v1/sessions/refresh", {"refresh_token": token})
        broken += status != 200
    rotations = sum(1 for a in answers if a[0] == "refresh" and a[3] == 200)
    print(f"refresh rotations answered 200: {rotations}; chains ending on a 200: {len(last_ok)} of {len(chains)}, "
          f"refused afterwards: {broken}")
    if broken:
        failures.append(f"{broken} refresh tokens answered 200 did not survive the failover")

    # The events feed across the switch, against the table; the webhook deliveries.
    table = [f"evt_{n}" for n in query("SELECT id FROM events_outbox ORDER BY tx, id")]
    repeats = [event for event, count in Counter(feed).items() if count > 1]
    print(f"events: {len(table)} in the table; the feed read {len(feed)} across the switch ({len(repeats)} twice, "
          f"{sum(feed_problems.values())} pages not answered 200: {dict(feed_problems)})")
    if feed != table:
        failures.append(f"the feed read across the switch differs from the table (missing {len(set(table) - set(feed))}, "
                        f"extra {len(set(feed) - set(table))}, repeated {len(repeats)})")
    created = {s[1] for s in signins if s[3]}
    announced = set(query("SELECT account_id FROM events_outbox WHERE event_type = 'account.created'"))
    if not created <= announced:
        failures.append(f"{len(created - announced)} new accounts answered 200 have no account.created event")
    deadline = time.time() + 60
    while time.time() < deadline and not set(table) <= set(webhooks):
        time.sleep(0.2)
    twice = [event for event, count in webhooks.items() if count > 1]
    print(f"webhooks: {len(webhooks)} events delivered, {len(set(table) - set(webhooks))} not delivered, "
          f"{len(twice)} delivered twice; new accounts answered 200: {len(created)}")
    if not set(table) <= set(webhooks) or twice:
        failures.append("a webhook event was not delivered, or was delivered twice")
    server.shutdown()
    for failure in failures:
        print("FAILED: " + failure)
    print("failover: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


sys.exit(main())
