-- overload_small.lua - wrk script for bench/overload.sh: the "normal" request,
-- a small JSON tile served on the HTTP thread (it never waits for a worker).
wrk.method = "POST"
wrk.path = "/v1/tile"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"input":{"dtype":"float32","shape":[2,2],"data":[1,2,3,4]},"repeats":[2,2]}'
