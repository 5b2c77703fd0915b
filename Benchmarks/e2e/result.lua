-- The RESULT line every scenario prints (run.sh greps it): wrk's done() for both scripts.
return function(summary, latency, requests)
    local p = function(q) return latency:percentile(q) / 1000.0 end
    io.write(string.format("RESULT requests=%d duration_s=%.1f rps=%.0f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f errors=%d status_non2xx=%d\n",
        summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
        p(50), p(90), p(99), summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
        summary.errors.status))
end
