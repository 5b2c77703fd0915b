"""What runs beside soak.sh's wrk rounds, and the soak's report. Standard library, plus
matplotlib for the plot (installed from PyPI when missing).

    soak.py run     until SIGTERM: every SAMPLE_SECONDS the broker's RSS and open file
                    descriptors and PostgreSQL's client connections (samples.tsv); web sign-ins
                    through the OpenID Connect code flow of `line` at WEB_RATE a second, each
                    a new person (web.tsv); the tenant's webhook deliveries (webhooks.tsv).
    soak.py report  the requirements checked from samples.tsv, rounds.tsv, web.tsv and
                    webhooks.tsv, and the plot (PLOT, a PNG): RSS and p99 over time.

Environment: OUT (the folder of those files), BROKER_PID, PG_PORT, BASE, IDP, API_KEY,
WEBHOOK_PORT, RETURN_URL; report: PLOT, WARMUP_MINUTES (5), EVENTS (the events in the table at the end).
"""

import http.client
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

out = os.environ["OUT"]
stop = threading.Event()


def call(url, method="GET", body=None, headers=None):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=15)
    path = parts.path + ("?" + parts.query if parts.query else "")
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, response.getheader("Location"), data


def web_sign_in(base, idp, api_key, return_url, n):
    """One person through the code flow: start, MockIdP's authorize, the callback, the exchange."""
    headers = {"Authorization": "Bearer " + api_key, "Content-Type": "application/json"}
    status, _, data = call(base + "/v1/sign-in/line/web/start", "POST", json.dumps({"return_url": return_url, "state": f"s{n}"}), headers)
    if status != 200:
        return f"start {status}"
    authorize = json.loads(data)["authorize_url"]
    parts = urllib.parse.urlsplit(authorize)
    status, location, _ = call(idp + parts.path + "?" + parts.query)
    if status not in (302, 303) or not location:
        return f"authorize {status}"
    parts = urllib.parse.urlsplit(location)
    status, location, _ = call(base + parts.path + "?" + parts.query)
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(location or "").query).get("code", [None])[0]
    if status != 303 or not code:
        return f"callback {status}"
    status, _, _ = call(base + "/v1/sign-in/line/web/exchange", "POST", json.dumps({"code": code}), headers)
    return "ok" if status == 200 else f"exchange {status}"


def web_loop():
    rate = float(os.environ.get("WEB_RATE", "5"))
    args = (os.environ["BASE"], os.environ["IDP"], os.environ["API_KEY"], os.environ["RETURN_URL"])
    with open(os.path.join(out, "web.tsv"), "w") as log:
        n, next_at = 0, time.time()
        while not stop.is_set():
            n += 1
            started = time.time()
            try:
                outcome = web_sign_in(*args, n)
            except OSError as error:
                outcome = "connection " + type(error).__name__
            log.write(f"{started:.3f}\t{time.time() - started:.4f}\t{outcome}\n")
            log.flush()
            next_at += 1 / rate
            stop.wait(max(0, next_at - time.time()))


def sample_loop():
    pid = os.environ["BROKER_PID"]
    pg_port = os.environ["PG_PORT"]
    every = float(os.environ.get("SAMPLE_SECONDS", "5"))
    with open(os.path.join(out, "samples.tsv"), "w") as log:
        log.write("time\trss_kb\tfds\tpg_connections\n")
        while not stop.is_set():
            rss = next(line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS"))
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            # The broker's own connections to PostgreSQL (its pool and its LISTEN connection),
            # not the import's or this sampler's: the established sockets of its process.
            sockets = subprocess.run(["ss", "-Htnp", "state", "established", f"dport = :{pg_port}"], capture_output=True, text=True).stdout
            connections = sum(1 for line in sockets.splitlines() if f"pid={pid}," in line)
            log.write(f"{time.time():.3f}\t{rss}\t{fds}\t{connections}\n")
            log.flush()
            stop.wait(every)


class Hook(http.server.BaseHTTPRequestHandler):
    log = None
    lock = threading.Lock()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with Hook.lock:
            Hook.log.write(f"{time.time():.3f}\t{self.headers['webhook-id']}\n")
            Hook.log.flush()
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def run():
    Hook.log = open(os.path.join(out, "webhooks.tsv"), "w")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["WEBHOOK_PORT"])), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threads = [threading.Thread(target=web_loop), threading.Thread(target=sample_loop)]
    for thread in threads:
        thread.start()
    while not stop.is_set():
        stop.wait(1)
    for thread in threads:
        thread.join()
    open(os.path.join(out, "loops.stopped"), "w").close()
    # Deliveries still on their way: until EVENTS_FILE names how many to expect, or 60 s.
    deadline = time.time() + 60
    expected = os.path.join(out, "events.expected")
    while time.time() < deadline:
        if os.path.exists(expected):
            want = int(open(expected).read() or "0")
            with Hook.lock:
                have = len({line.split("\t")[1] for line in open(os.path.join(out, "webhooks.tsv")) if "\t" in line})
            if have >= want:
                break
        time.sleep(0.5)
    server.shutdown()


def table(name):
    with open(os.path.join(out, name)) as file:
        rows = [line.rstrip("\n").split("\t") for line in file if line.strip()]
    return rows


def report():
    warmup = float(os.environ.get("WARMUP_MINUTES", "5")) * 60
    failures = []
    # From the first round on (the samples before it are the setup's).
    begun = float(open(os.path.join(out, "soak.start")).read())
    samples = [(float(t), int(r), int(f), int(c)) for t, r, f, c in table("samples.tsv")[1:] if float(t) >= begun]
    rounds = [(float(t), dict(field.split("=") for field in result.split()[1:])) for t, result in table("rounds.tsv")]
    start = begun
    end = samples[-1][0]
    after = [s for s in samples if s[0] - start >= warmup] or samples[-1:]
    base = after[0]
    peak = max(s[1] for s in after)
    growth = (peak - base[1]) / base[1] * 100
    print(f"RSS: {samples[0][1] / 1024:.0f} MiB at the start, {base[1] / 1024:.0f} MiB after {warmup / 60:.0f} minutes, "
          f"peak after that {peak / 1024:.0f} MiB ({growth:+.1f} %), at the end {samples[-1][1] / 1024:.0f} MiB")
    if growth >= 10:
        failures.append(f"RSS grew {growth:.1f} % after the first {warmup / 60:.0f} minutes (less than 10 % asked)")
    first = [r for t, r in rounds if t - start <= warmup] or [rounds[0][1]]
    last = [r for t, r in rounds if end - t < warmup] or [rounds[-1][1]]
    p99 = lambda rs: sum(float(r["p99_ms"]) for r in rs) / len(rs)  # noqa: E731
    change = (p99(last) - p99(first)) / p99(first) * 100
    median = lambda rs: sorted(float(r["p99_ms"]) for r in rs)[len(rs) // 2]  # noqa: E731
    print(f"p99 (mean of the rounds' p99): first {warmup / 60:.0f} minutes {p99(first):.2f} ms, last {warmup / 60:.0f} minutes "
          f"{p99(last):.2f} ms ({change:+.1f} %); the rounds' median p99: {median(first):.2f} and {median(last):.2f} ms; "
          f"each round's p99: {' '.join(r['p99_ms'] for _, r in rounds)}")
    if abs(change) > 20:
        failures.append(f"p99 of the last minutes is {change:+.1f} % off the first (within 20 % asked)")
    requests = sum(int(r["requests"]) for _, r in rounds)
    errors = sum(int(r["errors"]) + int(r["status_non2xx"]) for _, r in rounds)
    rates = [float(r["rps"]) for _, r in rounds]
    print(f"API requests: {requests} in {len(rounds)} rounds, {min(rates):.0f}–{max(rates):.0f}/s; errors and non-2xx answers: {errors}")
    if errors:
        failures.append(f"{errors} API requests failed")
    web = [w for w in table("web.tsv") if float(w[0]) >= begun]
    web_failed = [w for w in web if w[2] != "ok"]
    print(f"web sign-ins: {len(web)}, failed {len(web_failed)} {sorted({w[2] for w in web_failed})}")
    if web_failed:
        failures.append(f"{len(web_failed)} web sign-ins failed")
    for column, name in ((2, "open file descriptors"), (3, "connections to PostgreSQL")):
        values = [s[column] for s in after]
        print(f"{name}: {min(values)}–{max(values)} after the first {warmup / 60:.0f} minutes "
              f"(first sample {samples[0][column]}, last {samples[-1][column]})")
        if max(values) > max(s[column] for s in samples if s[0] - start < warmup) + 2:
            failures.append(f"{name} rose past the first minutes' peak")
    delivered = [w[1] for w in table("webhooks.tsv")]
    expected = int(open(os.path.join(out, "events.expected")).read())
    print(f"webhooks: {len(set(delivered))} events delivered of {expected}, {len(delivered) - len(set(delivered))} repeated")
    if len(set(delivered)) < expected:
        failures.append(f"{expected - len(set(delivered))} events not delivered")
    plot(samples, rounds, start)
    for failure in failures:
        print("FAILED: " + failure)
    print("soak: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


def plot(samples, rounds, start):
    try:
        import matplotlib
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "matplotlib"], check=True)
        import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (memory, latency) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    minutes = [(s[0] - start) / 60 for s in samples]
    memory.plot(minutes, [s[1] / 1024 for s in samples], color="tab:blue")
    memory.set_ylabel("broker RSS (MiB)")
    memory.set_ylim(bottom=0)
    memory.grid(alpha=0.3)
    latency.plot([(t - start) / 60 for t, _ in rounds], [float(r["p99_ms"]) for _, r in rounds], marker="o", color="tab:red", label="p99")
    latency.plot([(t - start) / 60 for t, _ in rounds], [float(r["p50_ms"]) for _, r in rounds], marker=".", color="tab:gray", label="p50")
    latency.set_ylabel("latency per round (ms)")
    latency.set_xlabel("minutes")
    latency.set_ylim(bottom=0)
    latency.legend()
    latency.grid(alpha=0.3)
    figure.suptitle(os.environ.get("PLOT_TITLE", "Soak: one broker instance, mixed traffic at half capacity"))
    figure.tight_layout()
    figure.savefig(os.environ["PLOT"], dpi=80)
    print(f"plot: {os.environ['PLOT']}")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run()
    else:
        sys.exit(report())
