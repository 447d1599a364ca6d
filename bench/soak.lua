-- soak.lua - wrk script: a rotating mix of valid and invalid tiled requests.
--
-- Every request carries X-Request-Id "soak-K" (K = its kind); the daemon
-- echoes it, so response() knows what each answer should be: the status, and
-- a piece of the body (a substring, or the exact trailing bytes). Counts by
-- status and by kind, and up to a few mismatching answers, are printed by
-- done(), followed by one machine-readable "SOAK ..." line.
--
--   wrk -t2 -c32 -d600s --timeout 10s -s bench/soak.lua http://127.0.0.1:8080 -- REQUESTS THREADS
--
-- REQUESTS (default 100000) is the total over all threads; each of the THREADS
-- (default 2; pass wrk's -t) stops after its share, so -d is only an upper bound.
-- SOAK_ONLY=A,B sends only the kinds whose name contains A or B (for debugging).

local function le16(v) return string.char(v % 256, math.floor(v / 256) % 256) end

-- A .npy v1.0 file: descr, shape as a Python tuple string, data bytes.
local function npy(descr, shape, data)
  local dict = "{'descr': '" .. descr .. "', 'fortran_order': False, 'shape': " .. shape .. ", }"
  local len = 10 + #dict + 1
  local pad = (64 - len % 64) % 64
  local header = dict .. string.rep(" ", pad) .. "\n"
  return "\147NUMPY\1\0" .. le16(#header) .. header .. data
end

local function i2(values)
  local out = {}
  for i, v in ipairs(values) do out[i] = le16(v) end
  return table.concat(out)
end

local function i32(values)
  local out = {}
  for i, v in ipairs(values) do out[i] = le16(v % 65536) .. le16(math.floor(v / 65536)) end
  return table.concat(out)
end

local JSON = "application/json"
local RAW = "application/octet-stream"
local NPY = "application/x-npy"

-- gzip of {"input":{"dtype":"int8","shape":[3],"data":[1,2,3]},"repeats":[2]}
local GZ_DOC = "\31\139\8\0\0\0\0\0\2\3\171\86\202\204\43\40\45\81\178\170\86\74\41\169\44\72\85\178\2\10\148\88\40"
  .. "\233\40\21\103\36\130\184\209\198\177\58\74\41\137\37\137\64\166\161\142\145\142\113\108\173\142\82\81\106\65"
  .. "\106\98\73\49\80\200\40\182\22\0\182\148\101\185\67\0\0\0"

local V2_BIN_HEAD = '{"inputs":[{"name":"input","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":8}},'
  .. '{"name":"repeats","shape":[1],"datatype":"INT64","data":[2]}],'
  .. '"outputs":[{"name":"output","parameters":{"binary_data":true}}]}'

-- kind: method, path, content type (nil: none), extra headers, body, expected status,
-- and `find` (a substring of the body) or `suffix` (the body's exact last bytes) or
-- `header` (a response header's exact value).
kinds = {
  -- valid
  {name = "v1 json float32", method = "POST", path = "/v1/tile", ctype = JSON,
   body = '{"input":{"dtype":"float32","shape":[2,2],"data":[1,2,3,4]},"repeats":[1,2]}',
   status = 200, find = '"data":[1.0,2.0,1.0,2.0,3.0,4.0,3.0,4.0]'},
  {name = "v1 json nested int64", method = "POST", path = "/v1/tile", ctype = JSON,
   body = '{"input":{"dtype":"int64","data":[[1,2],[3,4]]},"repeats":[2,1]}',
   status = 200, find = '"shape":[4,2],"data":[1,2,3,4,1,2,3,4]'},
  {name = "v1 json strings numpy", method = "POST", path = "/v1/tile", ctype = JSON,
   body = '{"input":{"dtype":"string","shape":[2],"data":["ab","c"]},"repeats":[2,2],"semantics":"numpy"}',
   status = 200, find = '"data":["ab","c","ab","c","ab","c","ab","c"]'},
  {name = "v1 json onnx1 to raw", method = "POST", path = "/v1/tile", ctype = JSON, accept = RAW,
   body = '{"input":{"dtype":"float16","shape":[2],"data":[1,2]},"tiles":2,"axis":0,"semantics":"onnx1"}',
   status = 200, suffix = "\0\60\0\64\0\60\0\64"},
  {name = "v1 json gzip body", method = "POST", path = "/v1/tile", ctype = JSON, encoding = "gzip", body = GZ_DOC,
   status = 200, find = '"data":[1,2,3,1,2,3]'},
  {name = "v1 raw uint8", method = "POST", path = "/v1/tile?dtype=uint8&shape=3&repeats=2", ctype = RAW,
   body = "\1\2\3", status = 200, suffix = "\1\2\3\1\2\3"},
  {name = "v1 raw int32 2d", method = "POST", path = "/v1/tile?dtype=int32&shape=2,1&repeats=1,3", ctype = RAW,
   body = i32({7, 9}), status = 200, suffix = i32({7, 7, 7, 9, 9, 9})},
  {name = "v1 npy", method = "POST", path = "/v1/tile?repeats=2,1", ctype = NPY,
   body = npy("<i2", "(2, 3)", i2({1, 2, 3, 4, 5, 6})), status = 200, suffix = i2({1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6})},
  {name = "v2 json", method = "POST", path = "/v2/models/tile/infer", ctype = JSON,
   body = '{"inputs":[{"name":"input","shape":[2],"datatype":"INT32","data":[1,2]},'
     .. '{"name":"repeats","shape":[1],"datatype":"INT64","data":[2]}]}',
   status = 200, find = '"data":[1,2,1,2]'},
  {name = "v2 binary", method = "POST", path = "/v2/models/tile/versions/13/infer", ctype = RAW,
   headers = {["Inference-Header-Content-Length"] = tostring(#V2_BIN_HEAD)},
   body = V2_BIN_HEAD .. i32({5, 6}), status = 200, suffix = i32({5, 6, 5, 6})},
  -- 80 KiB: above --inline-max (64K), so built on a worker; below soak.sh's --stream-threshold (96K).
  {name = "v1 raw offloaded", method = "POST", path = "/v1/tile?dtype=uint8&shape=4&repeats=20480", ctype = RAW,
   body = "\1\2\3\4", status = 200, suffix = string.rep("\1\2\3\4", 8)},
  -- 128 KiB: streamed in 8 chunks with soak.sh's --stream-chunk 16K.
  {name = "v1 raw streamed", method = "POST", path = "/v1/tile?dtype=uint16&shape=2&repeats=32768", ctype = RAW,
   body = "\1\2\3\4", status = 200, suffix = string.rep("\1\2\3\4", 8)},
  {name = "v1 json gzip response", method = "POST", path = "/v1/tile", ctype = JSON, accept_encoding = "gzip",
   body = '{"input":{"dtype":"uint8","shape":[4],"data":[1,2,3,4]},"repeats":[512]}',
   status = 200, header = {"Content-Encoding", "gzip"}},
  {name = "v2 ready", method = "GET", path = "/v2/health/ready", status = 200, find = '{"ready":true}'},
  -- invalid
  {name = "bad dtype", method = "POST", path = "/v1/tile", ctype = JSON,
   body = '{"input":{"dtype":"int33","shape":[1],"data":[1]},"repeats":[1]}', status = 400, find = "unknown dtype"},
  {name = "bad data type", method = "POST", path = "/v1/tile", ctype = JSON,
   body = '{"input":{"dtype":"int32","shape":[2],"data":["abc",2]},"repeats":[1]}', status = 400, find = "is a string"},
  {name = "bad utf-8", method = "POST", path = "/v1/tile", ctype = JSON,
   body = '{"input":{"dtype":"string","shape":[1],"data":["a\255b"]},"repeats":[1]}', status = 400,
   find = "invalid UTF-8"},
  {name = "bad nesting", method = "POST", path = "/v1/tile", ctype = JSON,
   body = '{"input":{"dtype":"int32","data":' .. string.rep("[", 200) .. "1" .. string.rep("]", 200)
     .. '},"repeats":[1]}', status = 400, find = "deeper than"},
  {name = "bad raw length", method = "POST", path = "/v1/tile?dtype=int32&shape=3&repeats=1", ctype = RAW,
   body = "\0\0\0\0", status = 400, find = "body has 4 bytes"},
  {name = "bad query param", method = "POST", path = "/v1/tile?dtype=uint8&shape=1&repeats=1&bogus=1", ctype = RAW,
   body = "\0", status = 400, find = "bogus"},
  {name = "bad shape overflow", method = "POST", path = "/v1/tile?dtype=uint8&shape=4294967296,4294967296,4&repeats=1,1,1",
   ctype = RAW, body = "\0\0\0\0", status = 413, find = "overflows"},
  {name = "bad npy object", method = "POST", path = "/v1/tile?repeats=1", ctype = NPY,
   body = npy("|O", "(1,)", "\128\4\75\1\46"), status = 400, find = "object"},
  {name = "bad v2 binary size", method = "POST", path = "/v2/models/tile/infer", ctype = RAW,
   headers = {["Inference-Header-Content-Length"] = tostring(#V2_BIN_HEAD)},
   body = V2_BIN_HEAD .. "\0\0\0", status = 400, find = "binary_data_size"},
  {name = "bad semantics", method = "POST", path = "/v1/tile", ctype = JSON,
   body = '{"input":{"dtype":"int32","shape":[2],"data":[1,2]},"repeats":[0],"semantics":"directml"}', status = 400,
   find = "repeat >= 1"},
  {name = "bad too big", method = "POST", path = "/v1/tile", ctype = JSON,
   body = '{"input":{"dtype":"uint8","shape":[1],"data":[1]},"repeats":[4611686018427387904]}', status = 413,
   find = "bytes"},
  {name = "bad content type", method = "POST", path = "/v1/tile", ctype = "text/plain", body = "{}", status = 415,
   find = "text/plain"},
  {name = "bad no content type", method = "POST", path = "/v1/tile", body = "{}", status = 415,
   find = "missing Content-Type"},
  {name = "bad accept", method = "POST", path = "/v1/tile", ctype = JSON, accept = "image/png",
   body = '{"input":{"dtype":"int32","shape":[1],"data":[1]},"repeats":[1]}', status = 406, find = "image/png"},
  {name = "bad encoding", method = "POST", path = "/v1/tile", ctype = JSON, encoding = "br", body = "{}",
   status = 415, find = "Content-Encoding"},
  {name = "bad gzip", method = "POST", path = "/v1/tile", ctype = JSON, encoding = "gzip",
   body = "\31\139\8\0garbage!", status = 400, find = "not valid gzip"},
  {name = "bad path", method = "GET", path = "/v1/nothing", status = 404, find = "no such endpoint"},
  {name = "bad method", method = "PUT", path = "/v1/tile", ctype = JSON, body = "{}", status = 405, find = "PUT"},
}

local reqs = {}
local nkinds = #kinds
local counter = 0
local quota = 0
local nthreads = 1
local stopped = false
-- Per-thread results, read by done() with thread:get(); flat tables only
-- (wrk cannot copy nested ones).
st_responses, st_unknown = 0, 0
st_status, st_ok, st_bad, st_examples = {}, {}, {}, {}

local function wrk_pid()
  local f = io.open("/proc/self/stat")
  local pid = f and f:read("*n")
  if f then f:close() end
  return pid
end

function init(args)
  local total = tonumber(args[1] or os.getenv("SOAK_REQUESTS") or "100000")
  nthreads = tonumber(args[2] or os.getenv("SOAK_THREADS") or "2")
  quota = math.ceil(total / nthreads)
  for i, k in ipairs(kinds) do
    local h = {["X-Request-Id"] = "soak-" .. i}
    if k.ctype then h["Content-Type"] = k.ctype end
    if k.accept then h["Accept"] = k.accept end
    if k.encoding then h["Content-Encoding"] = k.encoding end
    if k.accept_encoding then h["Accept-Encoding"] = k.accept_encoding end
    for name, value in pairs(k.headers or {}) do h[name] = value end
    reqs[i] = wrk.format(k.method, k.path, h, k.body)
    st_ok[i] = 0
    st_bad[i] = 0
  end
  -- Threads start at different kinds so that the mix is even from the start.
  counter = ((thread_no or 1) - 1) * 7 % nkinds
end

-- Debugging: SOAK_ONLY=A,B sends only the kinds whose name contains A or B.
local only = os.getenv("SOAK_ONLY")
local function wanted(name)
  for part in string.gmatch(only, "[^,]+") do
    if string.find(name, part, 1, true) then return true end
  end
  return false
end

function request()
  counter = counter % nkinds + 1
  if only then
    for _ = 1, nkinds do
      if wanted(kinds[counter].name) then break end
      counter = counter % nkinds + 1
    end
  end
  return reqs[counter]
end

local function matches(k, headers, body)
  if k.header and headers[k.header[1]] ~= k.header[2] then return false end
  if k.find then return string.find(body, k.find, 1, true) ~= nil end
  if k.suffix then return #body >= #k.suffix and string.sub(body, -#k.suffix) == k.suffix end
  return true
end

-- A thread that has its share stops; the last one to do so ends the run
-- (wrk otherwise sleeps for the whole -d) with the SIGINT wrk handles.
local function thread_done()
  stopped = true
  wrk.thread:stop()
  local pid = wrk_pid()
  if not pid then return end
  local path = "/tmp/wrk-soak-" .. pid .. ".done"
  local f = io.open(path, "a")
  if not f then return end
  f:write("x\n")
  f:close()
  local n = 0
  for _ in io.lines(path) do n = n + 1 end
  if n >= nthreads then
    os.remove(path)
    -- Once every thread has exited only wrk's main thread is left to take the signal.
    os.execute("(sleep 0.2; kill -INT " .. pid .. ") &")
  end
end

function response(status, headers, body)
  st_responses = st_responses + 1
  st_status[status] = (st_status[status] or 0) + 1
  local id = headers["X-Request-Id"] or headers["x-request-id"]
  local i = id and tonumber(string.match(id, "^soak%-(%d+)$"))
  local k = i and kinds[i]
  if not k then
    st_unknown = st_unknown + 1
  elseif status == k.status and matches(k, headers, body or "") then
    st_ok[i] = st_ok[i] + 1
  else
    st_bad[i] = st_bad[i] + 1
    if #st_examples < 5 then
      st_examples[#st_examples + 1] = k.name .. ": got " .. status .. " " .. string.sub(body or "", 1, 160)
    end
  end
  if st_responses >= quota and not stopped then thread_done() end
end

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
  thread:set("thread_no", #threads)
end

function done(summary, latency, requests)
  local status, ok, bad, examples = {}, {}, {}, {}
  local responses, unknown = 0, 0
  for _, t in ipairs(threads) do
    responses = responses + t:get("st_responses")
    unknown = unknown + t:get("st_unknown")
    for code, n in pairs(t:get("st_status")) do status[code] = (status[code] or 0) + n end
    for i, n in pairs(t:get("st_ok")) do ok[i] = (ok[i] or 0) + n end
    for i, n in pairs(t:get("st_bad")) do bad[i] = (bad[i] or 0) + n end
    for _, e in ipairs(t:get("st_examples")) do examples[#examples + 1] = e end
  end
  local valid_ok, invalid_ok, mismatches = 0, 0, unknown
  io.write("kind                      expect      ok     bad\n")
  for i, k in ipairs(kinds) do
    local o, b = ok[i] or 0, bad[i] or 0
    io.write(string.format("%-25s %6d %7d %7d\n", k.name, k.status, o, b))
    if k.status < 300 then valid_ok = valid_ok + o else invalid_ok = invalid_ok + o end
    mismatches = mismatches + b
  end
  local codes = {}
  for code in pairs(status) do codes[#codes + 1] = code end
  table.sort(codes)
  io.write("by status:")
  for _, code in ipairs(codes) do io.write(string.format(" %d=%d", code, status[code])) end
  io.write("\n")
  for _, e in ipairs(examples) do io.write("mismatch: " .. e .. "\n") end
  local e = summary.errors
  local socket_errors = e.connect + e.read + e.write + e.timeout
  local seconds = summary.duration / 1e6
  io.write(string.format("latency p50 %.2f ms p99 %.2f ms max %.2f ms; %.0f requests/s\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    summary.requests / seconds))
  io.write(string.format("SOAK responses=%d valid_2xx=%d invalid_4xx=%d mismatches=%d socket_errors=%d "
    .. "connect=%d read=%d write=%d timeout=%d seconds=%.1f rps=%.0f\n",
    responses, valid_ok, invalid_ok, mismatches, socket_errors, e.connect, e.read, e.write, e.timeout,
    seconds, summary.requests / seconds))
end
