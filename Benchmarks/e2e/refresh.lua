-- wrk script: POST /v1/sessions/refresh, each refresh token once (rotation makes a token
-- single-use). TOKENS: file of refresh tokens, one per line; API_KEY; THREADS. Threads take
-- disjoint lines and stop when theirs run out.
local counter = 0

function setup(thread)
    thread:set("id", counter)
    counter = counter + 1
end

function init(args)
    local total = tonumber(os.getenv("THREADS") or "2")
    tokens = {}
    local i = 0
    for line in io.lines(os.getenv("TOKENS")) do
        if i % total == id then table.insert(tokens, line) end
        i = i + 1
    end
    index = 0
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Bearer " .. os.getenv("API_KEY")
    wrk.headers["Content-Type"] = "application/json"
    -- Formatted once here, like signin.lua: the load generator's own work per request stays small.
    requests = {}
    for i, token in ipairs(tokens) do
        requests[i] = wrk.format(nil, "/v1/sessions/refresh", nil, '{"refresh_token":"' .. token .. '"}')
    end
    if #requests == 0 then requests[1] = wrk.format(nil, "/v1/sessions/refresh", nil, '{"refresh_token":""}') end
end

function request()
    index = index + 1
    if index > #requests then
        wrk.thread:stop()
        index = 1
    end
    return requests[index] or requests[1]
end

-- Relative to the repository root, where run.sh runs wrk.
done = dofile("Benchmarks/e2e/result.lua")
