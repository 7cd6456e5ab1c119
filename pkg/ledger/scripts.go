package ledger

import "github.com/redis/go-redis/v9"

// The Lua scripts. Each draw is one script, so it is atomic on the Redis
// server, and each touches a fixed number of keys and fields: O(1), no KEYS
// or SCAN, whatever the tree's size (Restore alone is linear in the agents
// it restores).
//
// Keys, all with the tree's hash tag so a tree lives in one Cluster slot:
//
//	<prefix>:{<tree>}            the tree hash
//	<prefix>:{<tree>}:k:<key>    one reservation, with a TTL
//	<prefix>:{<tree>}:p          the places held: agent -> until (1 int, µs,
//	                             0 until freed)
//	<prefix>:{<tree>}:q          the agents queued for a place: a sorted set
//	                             scored by the order they asked in
//	<prefix>:{<tree>}:x          the queued agents' turns: agent -> 2 ints,
//	                             until when the turn is kept (µs) and the
//	                             claim of the place it is given (µs)
//
// Numbers are stored and exchanged as big-endian int64 (Lua's struct
// library packs and unpacks them in C), never formatted as decimal text in
// Lua: measured on Redis 7.0, 25 string.format calls cost 20 µs of server
// time, more than the rest of a draw. Lua numbers are doubles, so every
// value stays below 2^53 (see MaxAmount).
//
// Tree hash fields:
//
//	c        the ceiling: 9 ints ci co ct cc cs (input, output, total tokens,
//	         cost, steps), ca (agents), cd (depth), t0 (start, µs since the
//	         epoch, from the server's clock when Open is given none), w
//	         (wall, µs); written once
//	s        the counters: 8 ints, spent si so sc ss and reserved ri ro rc rs
//	n        the number of agents registered, as decimal text
//	a:<id>   one agent: 9 ints, its depth (-1 if restored) then its spent
//	         and reserved as in s
//	ql       the number of places (TakePlace's latest limit), as decimal text
//	qn       the order of the last agent queued for a place, a counter
//
// A reservation is one string key with a TTL: its state (r reserved, s
// settled, x released), the grant's answer (whose first 4 ints are the
// estimate), the agent's id and, once settled, the settlement's answer:
//
//	<state:1><grant answer:240><agent>[<settlement answer:240>]
//
// Replies are one string, decoded by reply.go: T (tree unknown), A (agent
// unknown), K (reservation unknown), X (released), OK, a refusal in text
// R,<scope>,<dimension>,<asked>,<remaining>,<limit>[,<deadline µs>], a grant
// G<state><replayed><answer> or a settlement S<replayed><answer>, where an
// answer is the amount (reserved or charged, 4 ints), then the tree's
// counters s, the agent's field and the tree's ceiling c: 240 bytes.
// SettleAndReserve replies with the settlement followed by the grant or by
// the reservation's failure.
//
// Redis calls per script, the main cost on the server besides the call
// itself: Reserve 3 (HMGET the tree, SET the reservation NX, HSET the
// tree), Settle 4 (GET, HMGET, SET, HSET), SettleAndReserve 5 (the tree is
// read and written once for both draws). A reservation is written with NX
// after the checks, so the common path needs no separate lookup; if the
// key exists the draw is a replay and the tree is left alone. The tree's
// TTL is refreshed by Open, Register and Restore, and by each reservation
// that brings the tree's step count to a multiple of 16 (or reserves no
// step), not by every draw.
//
// Measured on the project's shared 2-core machine (Redis 7.0, loaded),
// a Reserve's latency over an EVALSHA of "return 1" splits into about
// 8 µs for its arguments and reply, 14 µs for its three redis.call and
// 7 µs for the Lua arithmetic.

// registerFuncs are the helpers of the register script, which is rare
// enough to afford functions.
const registerFuncs = formats + `
local function d(x) return string.format('%d', x) end

-- over1 refuses if e on top of u breaks cap c, or c is used up.
local function over1(scope, i, c, u, e)
  if c > 0 and (u + e > c or u >= c) then
    local left = c - u
    if left < 0 then left = 0 end
    local name = ({'input_tokens', 'output_tokens', 'tokens', 'cost_micros', 'steps'})[i]
    return 'R,' .. scope .. ',' .. name .. ',' .. d(e) .. ',' .. d(left) .. ',' .. d(c)
  end
  return nil
end

-- late refuses if the tree's deadline t0 + w has passed.
local function late(t0, w)
  if w <= 0 then return nil end
  local tm = redis.call('TIME')
  if tonumber(tm[1]) * 1000000 + tonumber(tm[2]) >= t0 + w then
    return 'R,tree,wall,0,0,' .. d(w) .. ',' .. d(t0 + w)
  end
  return nil
end
`

// formats are the struct formats of the packed fields: 4, 5, 8 and 9
// big-endian int64s.
const formats = `
local P4, P5, P8, P9 = '>i8i8i8i8', '>i8i8i8i8i8', '>i8i8i8i8i8i8i8i8', '>i8i8i8i8i8i8i8i8i8'
`

// The draw arithmetic is spliced into the scripts as text, on plain
// locals, and the draw scripts define no functions: tables, closures and
// calls are what a draw spent most of its Lua time on. Names: c1..c9 the
// ceiling, s1..s8 the tree's counters (spent 1..4, reserved 5..8), a1..a9
// the settled agent's field and g1..g9 the drawing agent's (depth, spent
// 2..5, reserved 6..9), e1..e4 the estimate, k1..k5 the agent's caps.

// settleChunk replaces the estimate in the record rec with the usage in
// the blob xb, in s and a.
const settleChunk = `
do
  local ei, eo, ec, es = struct.unpack(P4, string.sub(rec, 2, 33))
  local xi, xo, xc, xs = struct.unpack(P4, xb)
  s1, s2, s3, s4, s5, s6, s7, s8 = s1 + xi, s2 + xo, s3 + xc, s4 + xs, s5 - ei, s6 - eo, s7 - ec, s8 - es
  a2, a3, a4, a5, a6, a7, a8, a9 = a2 + xi, a3 + xo, a4 + xc, a5 + xs, a6 - ei, a7 - eo, a8 - ec, a9 - es
end
`

// grantChunk checks e against the ceiling and the caps: r is the refusal,
// or nil and e is added to s and g. A cap refuses if the draw would
// exceed it or it is used up (u + max(e, 1) > cap, in integers).
const grantChunk = `
local r = nil
if c9 > 0 then
  local tm = redis.call('TIME')
  if tonumber(tm[1]) * 1000000 + tonumber(tm[2]) >= c8 + c9 then
    r = string.format('R,tree,wall,0,0,%d,%d', c9, c8 + c9)
  end
end
if not r then
  local u1, u2, u4, u5 = s1 + s5, s2 + s6, s3 + s7, s4 + s8
  local v1, v2, v4, v5 = g2 + g6, g3 + g7, g4 + g8, g5 + g9
  local f1, f2, f4, f5 = math.max(e1, 1), math.max(e2, 1), math.max(e3, 1), math.max(e4, 1)
  local f3 = math.max(e1 + e2, 1)
  -- on refusal: scope, dimension, cap, used, asked
  local rs, rd, rc, ru, re
  if c1 > 0 and u1 + f1 > c1 then rs, rd, rc, ru, re = 'tree', 'input_tokens', c1, u1, e1
  elseif c2 > 0 and u2 + f2 > c2 then rs, rd, rc, ru, re = 'tree', 'output_tokens', c2, u2, e2
  elseif c3 > 0 and u1 + u2 + f3 > c3 then rs, rd, rc, ru, re = 'tree', 'tokens', c3, u1 + u2, e1 + e2
  elseif c4 > 0 and u4 + f4 > c4 then rs, rd, rc, ru, re = 'tree', 'cost_micros', c4, u4, e3
  elseif c5 > 0 and u5 + f5 > c5 then rs, rd, rc, ru, re = 'tree', 'steps', c5, u5, e4
  elseif k1 > 0 and v1 + f1 > k1 then rs, rd, rc, ru, re = 'run', 'input_tokens', k1, v1, e1
  elseif k2 > 0 and v2 + f2 > k2 then rs, rd, rc, ru, re = 'run', 'output_tokens', k2, v2, e2
  elseif k3 > 0 and v1 + v2 + f3 > k3 then rs, rd, rc, ru, re = 'run', 'tokens', k3, v1 + v2, e1 + e2
  elseif k4 > 0 and v4 + f4 > k4 then rs, rd, rc, ru, re = 'run', 'cost_micros', k4, v4, e3
  elseif k5 > 0 and v5 + f5 > k5 then rs, rd, rc, ru, re = 'run', 'steps', k5, v5, e4
  else
    s5, s6, s7, s8 = s5 + e1, s6 + e2, s7 + e3, s8 + e4
    g6, g7, g8, g9 = g6 + e1, g7 + e2, g8 + e3, g9 + e4
  end
  if rs then r = string.format('R,%s,%s,%d,%d,%d', rs, rd, re, math.max(rc - ru, 0), rc) end
end
`

// touchChunk refreshes the tree's TTL on every 16th step reserved.
const touchChunk = `
if ttl ~= '0' and (e4 == 0 or (s4 + s8) % 16 == 0) then redis.call('PEXPIRE', t, ttl) end
`

// reserveScript: KEYS tree, reservation; ARGV agent, estimate (4 ints),
// caps (5 ints), key TTL ms, tree TTL ms (0: none).
var reserveScript = redis.NewScript(formats + `
local t, k, agent, eb, ttl = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[5]
local af = 'a:' .. agent
local v = redis.call('HMGET', t, 'c', 's', af)
if not v[1] or not v[3] then
  local rec = redis.call('GET', k)
  if rec then return 'G' .. string.sub(rec, 1, 1) .. '1' .. string.sub(rec, 2, 241) end
  if not v[1] then return 'T' end
  return 'A'
end
local c1, c2, c3, c4, c5, c6, c7, c8, c9 = struct.unpack(P9, v[1])
local s1, s2, s3, s4, s5, s6, s7, s8 = struct.unpack(P8, v[2])
local g1, g2, g3, g4, g5, g6, g7, g8, g9 = struct.unpack(P9, v[3])
local e1, e2, e3, e4 = struct.unpack(P4, eb)
local k1, k2, k3, k4, k5 = struct.unpack(P5, ARGV[3])
` + grantChunk + `
if r then
  local rec = redis.call('GET', k)
  if rec then return 'G' .. string.sub(rec, 1, 1) .. '1' .. string.sub(rec, 2, 241) end
  return r
end
local ns, na = struct.pack(P8, s1, s2, s3, s4, s5, s6, s7, s8), struct.pack(P9, g1, g2, g3, g4, g5, g6, g7, g8, g9)
local ans = eb .. ns .. na .. v[1]
if not redis.call('SET', k, 'r' .. ans .. agent, 'NX', 'PX', ARGV[4]) then
  local rec = redis.call('GET', k)
  return 'G' .. string.sub(rec, 1, 1) .. '1' .. string.sub(rec, 2, 241)
end
redis.call('HSET', t, 's', ns, af, na)
` + touchChunk + `
return 'Gr0' .. ans
`)

// settleScript: KEYS tree, reservation; ARGV actual (4 ints).
var settleScript = redis.NewScript(formats + `
local t, k, xb = KEYS[1], KEYS[2], ARGV[1]
local rec = redis.call('GET', k)
if not rec then
  if redis.call('EXISTS', t) == 0 then return 'T' end
  return 'K'
end
local st = string.sub(rec, 1, 1)
if st == 's' then return 'S1' .. string.sub(rec, -240) end
if st == 'x' then return 'X' end
local af = 'a:' .. string.sub(rec, 242)
local v = redis.call('HMGET', t, 'c', 's', af)
if not v[1] then return 'T' end
if not v[3] then return 'K' end
local s1, s2, s3, s4, s5, s6, s7, s8 = struct.unpack(P8, v[2])
local a1, a2, a3, a4, a5, a6, a7, a8, a9 = struct.unpack(P9, v[3])
` + settleChunk + `
local ns, na = struct.pack(P8, s1, s2, s3, s4, s5, s6, s7, s8), struct.pack(P9, a1, a2, a3, a4, a5, a6, a7, a8, a9)
local ans = xb .. ns .. na .. v[1]
redis.call('SET', k, 's' .. string.sub(rec, 2) .. ans, 'KEEPTTL')
redis.call('HSET', t, 's', ns, af, na)
return 'S0' .. ans
`)

// settleReserveScript: KEYS tree, settled reservation, next reservation;
// ARGV actual (4 ints), agent, estimate, caps, key TTL ms, tree TTL ms.
// It reads and writes the tree once for both draws.
var settleReserveScript = redis.NewScript(formats + `
local t, key1, key2 = KEYS[1], KEYS[2], KEYS[3]
local xb, agent, eb, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[6]
local rec = redis.call('GET', key1)
if not rec then
  if redis.call('EXISTS', t) == 0 then return 'T' end
  return 'K'
end
local st = string.sub(rec, 1, 1)
if st == 'x' then return 'X' end
local af = 'a:' .. agent
local v, srep, af1, ns, na
local s1, s2, s3, s4, s5, s6, s7, s8
local g1, g2, g3, g4, g5, g6, g7, g8, g9
if st == 's' then
  srep = 'S1' .. string.sub(rec, -240)
  v = redis.call('HMGET', t, 'c', 's', af)
  if not v[1] then return srep .. 'T' end
  s1, s2, s3, s4, s5, s6, s7, s8 = struct.unpack(P8, v[2])
  if v[3] then g1, g2, g3, g4, g5, g6, g7, g8, g9 = struct.unpack(P9, v[3]) end
else
  af1 = 'a:' .. string.sub(rec, 242)
  v = redis.call('HMGET', t, 'c', 's', af1, af)
  if not v[1] then return 'T' end
  if not v[3] then return 'K' end
  s1, s2, s3, s4, s5, s6, s7, s8 = struct.unpack(P8, v[2])
  local a1, a2, a3, a4, a5, a6, a7, a8, a9 = struct.unpack(P9, v[3])
` + settleChunk + `
  ns, na = struct.pack(P8, s1, s2, s3, s4, s5, s6, s7, s8), struct.pack(P9, a1, a2, a3, a4, a5, a6, a7, a8, a9)
  local ans = xb .. ns .. na .. v[1]
  redis.call('SET', key1, 's' .. string.sub(rec, 2) .. ans, 'KEEPTTL')
  srep = 'S0' .. ans
  if af1 == af then
    g1, g2, g3, g4, g5, g6, g7, g8, g9 = a1, a2, a3, a4, a5, a6, a7, a8, a9
  elseif v[4] then
    g1, g2, g3, g4, g5, g6, g7, g8, g9 = struct.unpack(P9, v[4])
  end
end
-- ns and na hold the settlement's writes, if any; g1 is nil if the
-- drawing agent is not registered.
local grep
if not g1 then
  local old = redis.call('GET', key2)
  if old then grep = 'G' .. string.sub(old, 1, 1) .. '1' .. string.sub(old, 2, 241) else grep = 'A' end
else
  local c1, c2, c3, c4, c5, c6, c7, c8, c9 = struct.unpack(P9, v[1])
  local e1, e2, e3, e4 = struct.unpack(P4, eb)
  local k1, k2, k3, k4, k5 = struct.unpack(P5, ARGV[4])
` + grantChunk + `
  if r then
    local old = redis.call('GET', key2)
    if old then grep = 'G' .. string.sub(old, 1, 1) .. '1' .. string.sub(old, 2, 241) else grep = r end
  else
    local gs, ga = struct.pack(P8, s1, s2, s3, s4, s5, s6, s7, s8), struct.pack(P9, g1, g2, g3, g4, g5, g6, g7, g8, g9)
    local ans = eb .. gs .. ga .. v[1]
    if redis.call('SET', key2, 'r' .. ans .. agent, 'NX', 'PX', ARGV[5]) then
` + touchChunk + `
      if af1 and af1 ~= af then
        redis.call('HSET', t, 's', gs, af, ga, af1, na)
      else
        redis.call('HSET', t, 's', gs, af, ga)
      end
      return srep .. 'Gr0' .. ans
    end
    local old = redis.call('GET', key2)
    grep = 'G' .. string.sub(old, 1, 1) .. '1' .. string.sub(old, 2, 241)
  end
end
if ns then redis.call('HSET', t, 's', ns, af1, na) end
return srep .. grep
`)

// releaseScript: KEYS tree, reservation.
var releaseScript = redis.NewScript(formats + `
local t, k, xb = KEYS[1], KEYS[2], string.rep('\0', 32)
local rec = redis.call('GET', k)
if not rec then
  if redis.call('EXISTS', t) == 0 then return 'T' end
  return 'K'
end
if string.sub(rec, 1, 1) ~= 'r' then return 'OK' end
local af = 'a:' .. string.sub(rec, 242)
local v = redis.call('HMGET', t, 's', af)
if not v[1] then return 'T' end
if not v[2] then return 'K' end
local s1, s2, s3, s4, s5, s6, s7, s8 = struct.unpack(P8, v[1])
local a1, a2, a3, a4, a5, a6, a7, a8, a9 = struct.unpack(P9, v[2])
` + settleChunk + `
redis.call('HSET', t, 's', struct.pack(P8, s1, s2, s3, s4, s5, s6, s7, s8), af, struct.pack(P9, a1, a2, a3, a4, a5, a6, a7, a8, a9))
redis.call('SET', k, 'x' .. string.sub(rec, 2), 'KEEPTTL')
return 'OK'
`)

// ceilingFunc builds the ceiling field from the limits (7 ints), a start
// in decimal µs (0: the server's now) and the wall (1 int).
const ceilingFunc = `
local function ceiling(limits, t0, wall)
  t0 = tonumber(t0)
  if t0 == 0 then
    local tm = redis.call('TIME')
    t0 = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
  end
  return limits .. struct.pack('>i8', t0) .. wall
end
`

// openScript: KEYS tree, places held, queue, turns; ARGV limits, start,
// wall (see ceilingFunc), tree TTL ms. Places outliving the tree they
// were of are dropped.
var openScript = redis.NewScript(ceilingFunc + `
local t, A = KEYS[1], ARGV
if redis.call('EXISTS', t) == 1 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', t, 'c', ceiling(A[1], A[2], A[3]), 's', string.rep('\0', 64), 'n', '0')
if A[4] ~= '0' then redis.call('PEXPIRE', t, A[4]) end
return 1
`)

// registerScript: KEYS tree; ARGV agent, depth (decimal), tree TTL ms.
var registerScript = redis.NewScript(registerFuncs + `
local t, A = KEYS[1], ARGV
local af = 'a:' .. A[1]
local v = redis.call('HMGET', t, 'c', 's', 'n', af)
if not v[1] then return 'T' end
local depth = tonumber(A[2])
if v[4] then
  if struct.unpack('>i8', v[4]) < 0 then
    redis.call('HSET', t, af, struct.pack('>i8', depth) .. string.sub(v[4], 9))
  end
  return 'OK'
end
local ci, co, ct, cc, cs, ca, cd, t0, w = struct.unpack(P9, v[1])
local r = late(t0, w)
if r then return r end
if cd > 0 and depth > cd then return 'R,tree,depth,' .. d(depth) .. ',0,' .. d(cd) end
local n = tonumber(v[3])
if ca > 0 and n >= ca then return 'R,tree,agents,1,0,' .. d(ca) end
local si, so, sc, ss, ri, ro, rc, rs = struct.unpack(P8, v[2])
r = over1('tree', 1, ci, si + ri, 0) or over1('tree', 2, co, so + ro, 0)
  or over1('tree', 3, ct, si + so + ri + ro, 0) or over1('tree', 4, cc, sc + rc, 0)
  or over1('tree', 5, cs, ss + rs, 0)
if r then return r end
redis.call('HSET', t, af, struct.pack(P9, depth, 0, 0, 0, 0, 0, 0, 0, 0), 'n', d(n + 1))
if A[3] ~= '0' then redis.call('PEXPIRE', t, A[3]) end
return 'OK'
`)

// restoreScript: KEYS tree, places held, queue, turns; ARGV limits,
// start, wall (see ceilingFunc), tree TTL ms, counters (8 ints), count,
// then count pairs of agent and agent field (9 ints). The places are
// not rebuilt (the trace does not hold them): those left are dropped.
var restoreScript = redis.NewScript(ceilingFunc + `
local t, A = KEYS[1], ARGV
if redis.call('EXISTS', t) == 1 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
local count = tonumber(A[6])
for i = 0, count - 1 do
  redis.call('HSET', t, 'a:' .. A[7 + 2 * i], A[8 + 2 * i])
end
redis.call('HSET', t, 'c', ceiling(A[1], A[2], A[3]), 's', A[5], 'n', A[6])
if A[4] ~= '0' then redis.call('PEXPIRE', t, A[4]) end
return 1
`)

// placeFuncs are the helpers of the place scripts, which run once per
// spawn or finish, rare enough to afford functions and whole-set sweeps
// (a tree's places and queue are bounded by its agents).
const placeFuncs = `
local function now()
  local tm = redis.call('TIME')
  return tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end

-- keptTo is when a place given at 'at' with claim c is kept to: 0 for
-- until freed.
local function keptTo(at, c)
  if c > 0 then return at + c end
  return 0
end

-- handOn forgets the places and turns that lapsed by 'at', gives the free
-- places of limit to the first agents queued and tells the watchers on
-- channel ch. It returns the number of places held.
local function handOn(p, q, x, at, limit, ch)
  local held, v = 0, redis.call('HGETALL', p)
  for i = 1, #v, 2 do
    local u = struct.unpack('>i8', v[i + 1])
    if u > 0 and u <= at then redis.call('HDEL', p, v[i]) else held = held + 1 end
  end
  v = redis.call('HGETALL', x)
  for i = 1, #v, 2 do
    if struct.unpack('>i8i8', v[i + 1]) <= at then
      redis.call('HDEL', x, v[i])
      redis.call('ZREM', q, v[i])
    end
  end
  local given = 0
  while limit == 0 or held < limit do
    local head = redis.call('ZRANGE', q, 0, 0)
    if #head == 0 then break end
    local a = head[1]
    local _, c = struct.unpack('>i8i8', redis.call('HGET', x, a) or struct.pack('>i8i8', 0, 0))
    redis.call('ZREM', q, a)
    redis.call('HDEL', x, a)
    redis.call('HSET', p, a, struct.pack('>i8', keptTo(at, c)))
    held, given = held + 1, given + 1
  end
  if given > 0 then redis.call('PUBLISH', ch, '1') end
  return held
end

local function touch(ttl, ...)
  if ttl ~= '0' then
    for _, k in ipairs({...}) do redis.call('PEXPIRE', k, ttl) end
  end
end
`

// takePlaceScript: KEYS tree, places held, queue, turns; ARGV agent,
// limit (decimal), running (1 or 0), claim µs, keep µs (decimal), tree TTL
// ms, the watchers' channel. It replies T, H,<taken> or Q,<ahead>,<taken>.
var takePlaceScript = redis.NewScript(placeFuncs + `
local t, p, q, x, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV
if redis.call('EXISTS', t) == 0 then return 'T' end
local agent, limit, claim, keep = A[1], tonumber(A[2]), tonumber(A[4]), tonumber(A[5])
local at = now()
redis.call('HSET', t, 'ql', A[2])
local held = handOn(p, q, x, at, limit, A[7])
local mine = redis.call('HGET', p, agent)
local reply
if A[3] == '1' then
  if redis.call('ZREM', q, agent) == 1 then redis.call('HDEL', x, agent) end
  if not mine then held = held + 1 end
  redis.call('HSET', p, agent, struct.pack('>i8', 0))
  reply = 'H,' .. held
elseif mine then
  reply = 'H,' .. held
else
  local rank = redis.call('ZRANK', q, agent)
  if rank then
    local _, c = struct.unpack('>i8i8', redis.call('HGET', x, agent) or struct.pack('>i8i8', 0, claim))
    redis.call('HSET', x, agent, struct.pack('>i8i8', at + keep, c))
    reply = 'Q,' .. rank .. ',' .. held
  elseif limit == 0 or held < limit then
    redis.call('HSET', p, agent, struct.pack('>i8', keptTo(at, claim)))
    reply = 'H,' .. (held + 1)
  else
    local n = redis.call('HINCRBY', t, 'qn', 1)
    redis.call('ZADD', q, n, agent)
    redis.call('HSET', x, agent, struct.pack('>i8i8', at + keep, claim))
    reply = 'Q,' .. (redis.call('ZCARD', q) - 1) .. ',' .. held
  end
end
touch(A[6], t, p, q, x)
return reply
`)

// freePlaceScript: KEYS tree, places held, queue, turns; ARGV agent, tree
// TTL ms, the watchers' channel. It replies T, or 1 if the agent held a
// place or was queued and 0 if not.
var freePlaceScript = redis.NewScript(placeFuncs + `
local t, p, q, x, A = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV
if redis.call('EXISTS', t) == 0 then return 'T' end
local freed = redis.call('HDEL', p, A[1])
if redis.call('ZREM', q, A[1]) == 1 then
  redis.call('HDEL', x, A[1])
  freed = 1
end
handOn(p, q, x, now(), tonumber(redis.call('HGET', t, 'ql') or '0'), A[3])
touch(A[2], p, q, x)
return freed
`)
