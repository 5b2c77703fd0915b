-- wrk script for one round of the soak (soak.sh): a mix of API requests at a steady rate.
-- TOKENS: "token nonce" lines (`mock-idp mint --with-nonce`), returning and new people shuffled;
-- NOTIFICATIONS: Apple server-to-server notification bodies, one per line; API_KEY; CLIENT_ID;
-- THREADS; DELAY_MS: the pause of each connection before each request, which sets the rate.
-- Of every 20 requests: 13 refresh rotations (the refresh token of an earlier answer of this
-- thread, each used once, its successor kept for a later rotation; a sign-in while there is
-- none), 1 Apple notification, and 6 Apple sign-ins (apps refresh far more often than people
-- sign in). Each token and body is sent once;
-- a thread that runs out starts over with sign-ins refused as replays, which the round's
-- RESULT would show as non-2xx answers: soak.sh mints more than a round needs.
local counter = 0

function setup(thread)
    thread:set("id", counter)
    counter = counter + 1
end

local function lines_of(file, total)
    local kept, i = {}, 0
    for line in io.lines(file) do
        if i % total == id then table.insert(kept, line) end
        i = i + 1
    end
    return kept
end

function init(args)
    local total = tonumber(os.getenv("THREADS") or "1")
    local client = os.getenv("CLIENT_ID")
    headers = {
        ["Authorization"] = "Bearer " .. os.getenv("API_KEY"),
        ["Content-Type"] = "application/json",
    }
    sign_ins = {}
    for _, line in ipairs(lines_of(os.getenv("TOKENS"), total)) do
        local token, nonce = string.match(line, "^(%S+) (%S+)$")
        table.insert(sign_ins, wrk.format("POST", "/v1/sign-in/apple", headers,
            '{"client_id":"' .. client .. '","identity_token":"' .. token .. '","nonce":"' .. nonce .. '"}'))
    end
    notifications = {}
    for _, body in ipairs(lines_of(os.getenv("NOTIFICATIONS"), total)) do
        table.insert(notifications, wrk.format("POST", "/apple/notifications", { ["Content-Type"] = "application/json" }, body))
    end
    refresh_tokens = {}
    next_sign_in, next_notification, slot = 0, 0, 0
    delay_ms = tonumber(os.getenv("DELAY_MS") or "0")
end

function delay()
    return delay_ms
end

local function sign_in()
    next_sign_in = next_sign_in % #sign_ins + 1
    return sign_ins[next_sign_in]
end

function request()
    slot = (slot + 1) % 20
    if slot < 13 and #refresh_tokens > 0 then
        local token = table.remove(refresh_tokens, 1)
        return wrk.format("POST", "/v1/sessions/refresh", headers, '{"refresh_token":"' .. token .. '"}')
    elseif slot == 13 and #notifications > 0 then
        next_notification = next_notification % #notifications + 1
        return notifications[next_notification]
    end
    return sign_in()
end

function response(status, response_headers, body)
    if status == 200 then
        local token = string.match(body, '"refresh_token":"([^"]+)"')
        -- Enough to feed the rotations; the rest of the sessions are left as they are.
        if token and #refresh_tokens < 200 then table.insert(refresh_tokens, token) end
    end
end

-- Relative to the repository root, where soak.sh runs wrk.
done = dofile("Benchmarks/e2e/result.lua")
