-- wrk script: POST /v1/sign-in/apple with MockIdP-minted identity tokens.
-- TOKENS: file with one token per line; API_KEY; CLIENT_ID; MODE=returning (cycle through the
-- tokens) or new (each token once: every request is a new user; threads take disjoint lines).
local threads = {}
local counter = 0

function setup(thread)
    thread:set("id", counter)
    counter = counter + 1
    table.insert(threads, thread)
end

function init(args)
    local file = os.getenv("TOKENS")
    local total = tonumber(os.getenv("THREADS") or "2")
    tokens = {}
    local i = 0
    for line in io.lines(file) do
        if i % total == id then table.insert(tokens, line) end
        i = i + 1
    end
    index = 0
    mode = os.getenv("MODE") or "returning"
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Bearer " .. os.getenv("API_KEY")
    wrk.headers["Content-Type"] = "application/json"
    client = os.getenv("CLIENT_ID")
end

function request()
    index = index + 1
    if index > #tokens then
        if mode == "new" then
            -- Out of fresh tokens: stop this thread's load rather than reuse one.
            wrk.thread:stop()
        end
        index = 1
    end
    local body = '{"client_id":"' .. client .. '","identity_token":"' .. (tokens[index] or "") .. '"}'
    return wrk.format(nil, "/v1/sign-in/apple", nil, body)
end

local non200 = 0
-- SAVE_REFRESH=<path prefix>: each thread appends the refresh tokens it receives to
-- <prefix>.<thread id> (for the refresh scenario; not set in measured runs).
local saved = nil
function response(status, headers, body)
    if status ~= 200 then non200 = non200 + 1 end
    local prefix = os.getenv("SAVE_REFRESH")
    if prefix and status == 200 then
        saved = saved or io.open(prefix .. "." .. id, "a")
        local token = string.match(body, '"refresh_token":"(ibr_[^"]+)"')
        if token then saved:write(token, "\n") end
    end
end

-- Relative to the repository root, where run.sh runs wrk.
done = dofile("Benchmarks/e2e/result.lua")
