-- wrk script: GET /v1/login-options?platform=$PLATFORM (what an app asks on every launch).
-- API_KEY: the tenant's key.
wrk.method = "GET"
wrk.path = "/v1/login-options?platform=" .. (os.getenv("PLATFORM") or "ios")
wrk.headers["Authorization"] = "Bearer " .. os.getenv("API_KEY")

done = dofile("Benchmarks/e2e/result.lua")
