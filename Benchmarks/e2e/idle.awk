# Reads `perf sched timehist` (POSIX awk; mawk is enough) (one line a switch-out: time, [cpu], task[tid/pid], wait, sch delay,
# run time, in ms) and says what the cores' idle time is made of (idle.sh). Variables: broker
# (the broker's pid), rate (sign-ins a second during the recording).
function kind(task,    pid, name) {
    if (task == "<idle>") return "idle"
    name = task; sub(/\[.*$/, "", name)
    pid = task; sub(/^.*\[/, "", pid); sub(/\]$/, "", pid); sub(/^.*\//, "", pid)
    # The broker's event loops (NIO-…) and the threads of Swift's global executor (Dispatch's
    # "com.apple.root.default-qos…", cut to the kernel's 15 characters).
    if (pid == broker) return (name ~ /^NIO/) ? "broker-loops" : "broker-pool"
    if (name ~ /^postgres/) return "postgres"
    if (name ~ /^wrk/) return "wrk"
    if (name ~ /^mock-idp/) return "mock-idp"
    if (name ~ /^(perf|sleep)/) return "perf"
    return "other"
}
function bucket(ms) {
    if (ms < 0.02) return "1 <20us"
    if (ms < 0.05) return "2 20-50us"
    if (ms < 0.1) return "3 50-100us"
    if (ms < 0.2) return "4 100-200us"
    if (ms < 0.5) return "5 200-500us"
    if (ms < 1) return "6 0.5-1ms"
    return "7 >=1ms"
}
/^ *[0-9]+\.[0-9]+ +\[[0-9]+\]/ {
    t = $1 * 1000; cpu = $2; gsub(/[\[\]]/, "", cpu); cpu += 0
    run = $NF; delay = $(NF - 1)
    task = $3; for (i = 4; i <= NF - 3; i++) task = task " " $i
    k = kind(task)
    if (first == "") first = t - run
    last = t
    n[cpu]++; s[cpu, n[cpu]] = t - run; e[cpu, n[cpu]] = t; c[cpu, n[cpu]] = k; d[cpu, n[cpu]] = delay
    if (k == "idle") { ni[cpu]++; is[cpu, ni[cpu]] = t - run; ie[cpu, ni[cpu]] = t }
    cpus[cpu] = 1
    if (k != "idle") { runtime[k] += run; switches[k]++; delays[k] += delay }
}
END {
    span = last - first
    ncpu = 0; for (x in cpus) ncpu++
    for (x in cpus) for (i = 1; i <= n[x]; i++) {
        if (c[x, i] != "idle") continue
        len = e[x, i] - s[x, i]; idle += len; stretches++
        b = bucket(len); bt[b] += len; bn[b]++
        if (i < n[x]) { ended[c[x, i + 1]] += len; endedn[c[x, i + 1]]++ }
        if (i > 1) { before[c[x, i - 1]] += len }
    }
    # What the other core ran while this one was idle (two cores): overlap of this core's idle
    # stretches with the other core's runs, by kind.
    if (ncpu == 2) {
        split("", list); m = 0; for (x in cpus) list[++m] = x
        for (a = 1; a <= 2; a++) {
            x = list[a]; y = list[3 - a]; j = 1
            for (i = 1; i <= n[x]; i++) {
                if (c[x, i] != "idle") continue
                while (j <= n[y] && e[y, j] <= s[x, i]) j++
                for (jj = j; jj <= n[y] && s[y, jj] < e[x, i]; jj++) {
                    lo = (s[x, i] > s[y, jj]) ? s[x, i] : s[y, jj]
                    hi = (e[x, i] < e[y, jj]) ? e[x, i] : e[y, jj]
                    if (hi > lo) other[c[y, jj]] += hi - lo
                }
            }
        }
    }
    # Time a task waited to run (woken, runnable: its `sch delay`) on one core while the other
    # core sat idle, by kind: idle that had work, queued on the wrong core.
    if (ncpu == 2) for (a = 1; a <= 2; a++) {
        x = list[a]; y = list[3 - a]
        for (i = 1; i <= n[x]; i++) {
            if (c[x, i] == "idle" || d[x, i] <= 0) continue
            lo0 = s[x, i] - d[x, i]; hi0 = s[x, i]
            # the first idle stretch of y that ends after lo0 (binary search)
            l = 1; h = ni[y] + 1
            while (l < h) { mid = int((l + h) / 2); if (ie[y, mid] <= lo0) l = mid + 1; else h = mid }
            for (jj = l; jj <= ni[y] && is[y, jj] < hi0; jj++) {
                lo = (lo0 > is[y, jj]) ? lo0 : is[y, jj]; hi = (hi0 < ie[y, jj]) ? hi0 : ie[y, jj]
                if (hi > lo) { wrong[c[x, i]] += hi - lo; no[y, jj]++; ol[y, jj, no[y, jj]] = lo; oh[y, jj, no[y, jj]] = hi }
            }
        }
    }
    # The union of those waits within each idle stretch (two tasks may wait at once).
    for (key in no) {
        m = no[key]
        for (i = 2; i <= m; i++) for (j = i; j > 1 && ol[key, j - 1] > ol[key, j]; j--) {
            tl = ol[key, j]; ol[key, j] = ol[key, j - 1]; ol[key, j - 1] = tl
            th = oh[key, j]; oh[key, j] = oh[key, j - 1]; oh[key, j - 1] = th
        }
        cl = ol[key, 1]; ch = oh[key, 1]
        for (i = 2; i <= m; i++) {
            if (ol[key, i] > ch) { wrongall += ch - cl; cl = ol[key, i]; ch = oh[key, i] } else if (oh[key, i] > ch) ch = oh[key, i]
        }
        wrongall += ch - cl
    }
    signins = rate * span / 1000
    printf "   recorded %.2f s on %d cores, about %d sign-ins; idle %.1f %% of the cores' time, %d idle stretches (%.2f a sign-in), %.1f us a sign-in\n", \
        span / 1000, ncpu, signins, 100 * idle / (span * ncpu), stretches, stretches / signins, 1000 * idle / signins
    printf "   idle time by the length of its stretch:"
    for (i = 1; i <= 7; i++) for (b in bt) if (substr(b, 1, 1) == i "") {
        label = b; sub(/^[0-9] /, "", label); printf "  %s %.0f %% (%d)", label, 100 * bt[b] / idle, bn[b]
    }
    printf "\n"
    if (ncpu == 2) {
        printf "   while one core was idle, the other ran:"
        for (k in other) printf "  %s %.0f %%", k, 100 * other[k] / idle
        printf "   (idle: both idle at once)\n"
    }
    if (ncpu == 2) {
        printf "   idle time while a task waited to run on the other core: %.0f %%; by the kind that waited (overlaps counted in each):", 100 * wrongall / idle
        for (k in wrong) printf "  %s %.0f %%", k, 100 * wrong[k] / idle
        printf "\n"
    }
    printf "   what ended an idle stretch (share of idle time, stretches):"
    for (k in ended) printf "  %s %.0f %% (%d)", k, 100 * ended[k] / idle, endedn[k]
    printf "\n   what ran just before it:"
    for (k in before) printf "  %s %.0f %%", k, 100 * before[k] / idle
    printf "\n   by kind of task: CPU us a sign-in, switches a sign-in, average wake-to-run delay us\n"
    for (k in runtime) if (switches[k] > 0)
        printf "     %-12s %7.1f us  %6.2f  %6.1f us\n", k, 1000 * runtime[k] / signins, switches[k] / signins, 1000 * delays[k] / switches[k]
}
