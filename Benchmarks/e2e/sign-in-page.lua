-- wrk script: GET the URL wrk is given (the tenant's hosted sign-in page), as a browser would,
-- without an API key.
wrk.method = "GET"
wrk.headers["Accept-Language"] = "en"

done = dofile("Benchmarks/e2e/result.lua")
