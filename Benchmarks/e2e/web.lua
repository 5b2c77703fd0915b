-- wrk script for the web sign-in benchmark (web.sh): sends each line of REQUESTS once and
-- writes what each answer leads to into SAVE.<thread id>, ready to be the next phase's REQUESTS.
-- A line is "GET <path>" or "POST <path> <body>" (bodies hold no spaces). CONTENT_TYPE is the
-- POST bodies' type (default application/json); API_KEY, when set, is sent as a bearer key.
-- EXTRACT says what to keep of each answer:
--   authorize_url  the start's authorize URL, as "GET <path>" on MockIdP
--   location       the Location of a redirect (MockIdP's OIDC authorize) as "GET <path>" on the broker
--   apple_form     the hidden fields of MockIdP's Apple authorize page as "POST /apple/callback <form>"
--   code           the broker code on the return URL as "POST <EXCHANGE_PATH> {"code":"..."}"
--   oauth_code     the code on a relying party's redirect URI as "POST <EXCHANGE_PATH> <TOKEN_FORM>&code=..."
--                  (the token request of the OpenID Provider's code flow, code-flow.sh)
-- Threads take disjoint lines and stop when theirs run out (DONE_FILE.<id> says so).
local threads = {}
local counter = 0

function setup(thread)
    thread:set("id", counter)
    counter = counter + 1
    table.insert(threads, thread)
end

function init(args)
    local total = tonumber(os.getenv("THREADS") or "1")
    local headers = {}
    local key = os.getenv("API_KEY")
    if key and key ~= "" then headers["Authorization"] = "Bearer " .. key end
    headers["Content-Type"] = os.getenv("CONTENT_TYPE") or "application/json"
    requests = {}
    local i = 0
    for line in io.lines(os.getenv("REQUESTS")) do
        if i % total == id then
            local method, path, body = string.match(line, "^(%u+) (%S+) ?(%S*)$")
            if method == "GET" then
                table.insert(requests, wrk.format("GET", path, {}, nil))
            elseif method == "POST" then
                table.insert(requests, wrk.format("POST", path, headers, body))
            end
        end
        i = i + 1
    end
    index = 0
    idle = wrk.format("GET", "/healthz", {}, nil)
    stopped = false
    extract = os.getenv("EXTRACT")
    exchange = os.getenv("EXCHANGE_PATH") or "/v1/sign-in/apple/web/exchange"
    token_form = os.getenv("TOKEN_FORM") or ""
    saved = io.open(os.getenv("SAVE") .. "." .. id, "w")
end

function request()
    index = index + 1
    if index > #requests then
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

local function header(headers, name)
    for key, value in pairs(headers) do
        if string.lower(key) == name then return value end
    end
    return nil
end

local function path_of(url)
    return string.match(url, "^https?://[^/]+(/.*)$") or url
end

local function unescape_html(text)
    return (text:gsub("&quot;", '"'):gsub("&lt;", "<"):gsub("&gt;", ">"):gsub("&amp;", "&"))
end

local function encode(text)
    return (text:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

function response(status, headers, body)
    local out
    if extract == "authorize_url" then
        local url = string.match(body, '"authorize_url":"([^"]+)"')
        if url then out = "GET " .. path_of(url) end
    elseif extract == "location" then
        local location = header(headers, "location")
        if location then out = "GET " .. path_of(location) end
    elseif extract == "apple_form" then
        local fields = {}
        for name, value in string.gmatch(body, '<input type="hidden" name="([^"]+)" value="([^"]*)">') do
            table.insert(fields, name .. "=" .. encode(unescape_html(value)))
        end
        if #fields > 0 then out = "POST /apple/callback " .. table.concat(fields, "&") end
    elseif extract == "code" then
        local location = header(headers, "location")
        local code = location and string.match(location, "[?&]code=([^&]+)")
        if code then out = "POST " .. exchange .. ' {"code":"' .. code .. '"}' end
    elseif extract == "oauth_code" then
        local location = header(headers, "location")
        local code = location and string.match(location, "[?&]code=([^&]+)")
        if code then out = "POST " .. exchange .. " " .. token_form .. "&code=" .. code end
    end
    if out then saved:write(out, "\n") end
end

done = dofile("Benchmarks/e2e/result.lua")
