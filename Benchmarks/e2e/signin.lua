-- wrk script: POST /v1/sign-in/{provider} with MockIdP-minted tokens.
-- TOKENS: file with one "token nonce" pair per line (`mock-idp mint --with-nonce`); API_KEY;
-- CLIENT_ID. Each token is posted once (the broker refuses a replayed identity token); threads
-- take disjoint lines and stop when theirs run out. Whether a request is a new or a returning
-- user depends on the subjects the file was minted for.
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
    lines = {}
    local i = 0
    for line in io.lines(file) do
        if i % total == id then table.insert(lines, line) end
        i = i + 1
    end
    index = 0
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Bearer " .. os.getenv("API_KEY")
    wrk.headers["Content-Type"] = "application/json"
    local client = os.getenv("CLIENT_ID")
    -- PROVIDER: apple (default), facebook (Limited Login), facebook_classic (lines hold one
    -- access token each, no nonce), or google or any other provider id (an OpenID Connect
    -- provider such as line): {"id_token", "nonce"} to /v1/sign-in/<PROVIDER>.
    -- PROVIDER=apple_notification: each line is a whole JSON body (`mock-idp mint
    -- --notification TYPE`), posted to /apple/notifications.
    -- PROVIDER=token_exchange: each Apple token is traded at the tenant's token endpoint
    -- (RFC 8693, TENANT and OAUTH_CLIENT_ID, a public client), a form without the API key.
    local provider = os.getenv("PROVIDER") or "apple"
    local path = "/v1/sign-in/" .. (provider == "facebook_classic" and "facebook" or provider)
    if provider == "apple_notification" then path = "/apple/notifications" end
    if provider == "token_exchange" then
        path = "/t/" .. os.getenv("TENANT") .. "/token"
        wrk.headers["Authorization"] = nil
        wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
    end
    requests = {}
    for i, line in ipairs(lines) do
        local body
        if provider == "apple_notification" then
            body = line
        elseif provider == "facebook_classic" then
            body = '{"access_token":"' .. string.match(line, "^(%S+)") .. '"}'
        else
            local token, nonce = string.match(line, "^(%S+) (%S+)$")
            if provider == "token_exchange" then
                body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&client_id="
                    .. os.getenv("OAUTH_CLIENT_ID") .. "&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aid_token"
                    .. "&subject_token=" .. token .. "&nonce=" .. nonce
            elseif provider == "apple" then
                body = '{"client_id":"' .. client .. '","identity_token":"' .. token .. '","nonce":"' .. nonce .. '"}'
            elseif provider == "facebook" then
                body = '{"limited_login_token":"' .. token .. '","nonce":"' .. nonce .. '"}'
            else
                body = '{"id_token":"' .. token .. '","nonce":"' .. nonce .. '"}'
            end
        end
        requests[i] = wrk.format(nil, path, nil, body)
    end
    lines = nil
    idle = wrk.format("GET", "/healthz", {}, nil)
    stopped = false
    if #requests == 0 then
        -- An empty token file: send one (rejected) request rather than fail in Lua.
        requests[1] = wrk.format(nil, "/v1/sign-in/apple", nil, '{"client_id":"' .. client .. '","identity_token":""}')
    end
end

-- Each request is formatted once, in init: the load generator shares the two cores with the
-- broker and PostgreSQL, so its own work per request is kept small.
function request()
    index = index + 1
    if index > #requests then
        -- Out of fresh tokens: stop this thread's load rather than replay one, and say so in
        -- DONE_FILE.<thread id> when asked (wrk itself waits out its duration). Connections
        -- that still ask before the thread stops get a harmless GET /healthz.
        if not stopped then
            stopped = true
            local done = os.getenv("DONE_FILE")
            if done then
                local marker = io.open(done .. "." .. id, "w")
                if marker then marker:close() end
            end
            wrk.thread:stop()
        end
        return idle
    end
    return requests[index]
end

-- SAVE_REFRESH=<path prefix>: each thread appends the refresh tokens it receives to
-- <prefix>.<thread id> (for the refresh scenario; not set in measured runs). Without it no
-- response() is defined, so wrk hands no response to Lua (non-2xx statuses are counted by wrk).
local prefix = os.getenv("SAVE_REFRESH")
if prefix then
    local saved = nil
    function response(status, headers, body)
        if status == 200 then
            saved = saved or io.open(prefix .. "." .. id, "a")
            local token = string.match(body, '"refresh_token":"(ibr_[^"]+)"')
            if token then saved:write(token, "\n") end
        end
    end
end

-- Relative to the repository root, where run.sh runs wrk.
done = dofile("Benchmarks/e2e/result.lua")
