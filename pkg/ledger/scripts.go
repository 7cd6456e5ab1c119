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
//
// A reservation is one string key with a TTL: its state (r reserved, s
// settled, x released), the estimate (4 ints), the grant's answer, the
// agent's id and, once settled, the settlement's answer:
//
//	<state:1><estimate:32><grant answer:240><agent>[<settlement answer:240>]
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
// Redis calls per script, the main cost on the server: Reserve 4 (GET,
// HMGET, HSET, SET), Settle 4, SettleAndReserve 6 (one read and one write
// of the tree for both draws). The tree's TTL is refreshed by Open,
// Register and Restore, and by every reservation that brings the tree's
// step count to a multiple of 16 (or reserves no step), not by every draw.
const prelude = `
local P4, P5, P8, P9 = '>i8i8i8i8', '>i8i8i8i8i8', '>i8i8i8i8i8i8i8i8', '>i8i8i8i8i8i8i8i8i8'
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

// drawFuncs are the draw arithmetic, shared by the draw scripts.
const drawFuncs = `
-- granted checks the estimate e against the ceiling cb, given the tree's
-- counters sb and the agent's field ab, and against the agent's caps. It
-- returns a refusal, or nil and the new counters, the new agent field, the
-- answer and whether to refresh the tree's TTL.
local function granted(cb, sb, ab, e, cap)
  local ci, co, ct, cc, cs, ca, cd, t0, w = struct.unpack(P9, cb)
  local r = late(t0, w)
  if r then return r end
  local si, so, sc, ss, ri, ro, rc, rs = struct.unpack(P8, sb)
  local ad, asi, aso, asc, ass, ari, aro, arc, ars = struct.unpack(P9, ab)
  local ei, eo, ec, es = struct.unpack(P4, e)
  local ki, ko, kt, kc, ks = struct.unpack(P5, cap)
  r = over1('tree', 1, ci, si + ri, ei) or over1('tree', 2, co, so + ro, eo)
    or over1('tree', 3, ct, si + so + ri + ro, ei + eo) or over1('tree', 4, cc, sc + rc, ec)
    or over1('tree', 5, cs, ss + rs, es)
    or over1('run', 1, ki, asi + ari, ei) or over1('run', 2, ko, aso + aro, eo)
    or over1('run', 3, kt, asi + aso + ari + aro, ei + eo) or over1('run', 4, kc, asc + arc, ec)
    or over1('run', 5, ks, ass + ars, es)
  if r then return r end
  local ns = struct.pack(P8, si, so, sc, ss, ri + ei, ro + eo, rc + ec, rs + es)
  local na = struct.pack(P9, ad, asi, aso, asc, ass, ari + ei, aro + eo, arc + ec, ars + es)
  return nil, ns, na, e .. ns .. na .. cb, es == 0 or (ss + rs + es) % 16 == 0
end

-- settled returns the counters sb and agent field ab once the actual
-- usage x replaces the estimate e (x zero for a release).
local function settled(sb, ab, e, x)
  local si, so, sc, ss, ri, ro, rc, rs = struct.unpack(P8, sb)
  local ad, asi, aso, asc, ass, ari, aro, arc, ars = struct.unpack(P9, ab)
  local ei, eo, ec, es = struct.unpack(P4, e)
  local xi, xo, xc, xs = struct.unpack(P4, x)
  return struct.pack(P8, si + xi, so + xo, sc + xc, ss + xs, ri - ei, ro - eo, rc - ec, rs - es),
    struct.pack(P9, ad, asi + xi, aso + xo, asc + xc, ass + xs, ari - ei, aro - eo, arc - ec, ars - es)
end

-- replay answers a reservation again from its record.
local function replay(rec)
  return 'G' .. string.sub(rec, 1, 1) .. '1' .. string.sub(rec, 34, 273)
end

-- missing tells a lost tree from a missing reservation.
local function missing(t)
  if redis.call('EXISTS', t) == 0 then return 'T' end
  return 'K'
end
`

// reserveScript: KEYS tree, reservation; ARGV agent, estimate (4 ints),
// caps (5 ints), key TTL ms, tree TTL ms (0: none).
var reserveScript = redis.NewScript(prelude + drawFuncs + `
local t, k, agent, e = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local rec = redis.call('GET', k)
if rec then return replay(rec) end
local af = 'a:' .. agent
local v = redis.call('HMGET', t, 'c', 's', af)
if not v[1] then return 'T' end
if not v[3] then return 'A' end
local r, ns, na, ans, touch = granted(v[1], v[2], v[3], e, ARGV[3])
if r then return r end
redis.call('HSET', t, 's', ns, af, na)
redis.call('SET', k, 'r' .. e .. ans .. agent, 'PX', ARGV[4])
if touch and ARGV[5] ~= '0' then redis.call('PEXPIRE', t, ARGV[5]) end
return 'Gr0' .. ans
`)

// settleScript: KEYS tree, reservation; ARGV actual (4 ints).
var settleScript = redis.NewScript(prelude + drawFuncs + `
local t, k, x = KEYS[1], KEYS[2], ARGV[1]
local rec = redis.call('GET', k)
if not rec then return missing(t) end
local st = string.sub(rec, 1, 1)
if st == 's' then return 'S1' .. string.sub(rec, -240) end
if st == 'x' then return 'X' end
local af = 'a:' .. string.sub(rec, 274)
local v = redis.call('HMGET', t, 'c', 's', af)
if not v[1] then return 'T' end
if not v[3] then return 'K' end
local ns, na = settled(v[2], v[3], string.sub(rec, 2, 33), x)
redis.call('HSET', t, 's', ns, af, na)
local ans = x .. ns .. na .. v[1]
redis.call('SET', k, 's' .. string.sub(rec, 2) .. ans, 'KEEPTTL')
return 'S0' .. ans
`)

// settleReserveScript: KEYS tree, settled reservation, next reservation;
// ARGV actual (4 ints), agent, estimate, caps, key TTL ms, tree TTL ms.
// It reads and writes the tree once for both draws.
var settleReserveScript = redis.NewScript(prelude + drawFuncs + `
local t, k1, k2 = KEYS[1], KEYS[2], KEYS[3]
local x, agent, e = ARGV[1], ARGV[2], ARGV[3]
local rec = redis.call('GET', k1)
if not rec then return missing(t) end
local st = string.sub(rec, 1, 1)
if st == 'x' then return 'X' end
local af = 'a:' .. agent
local srep, cb, sb, ab, other, otherField
if st == 's' then
  srep = 'S1' .. string.sub(rec, -240)
else
  local af1 = 'a:' .. string.sub(rec, 274)
  local v = redis.call('HMGET', t, 'c', 's', af1, af)
  if not v[1] then return 'T' end
  if not v[3] then return 'K' end
  local ns, na = settled(v[2], v[3], string.sub(rec, 2, 33), x)
  local ans = x .. ns .. na .. v[1]
  redis.call('SET', k1, 's' .. string.sub(rec, 2) .. ans, 'KEEPTTL')
  srep = 'S0' .. ans
  cb, sb = v[1], ns
  if af1 == af then ab = na else ab, other, otherField = v[4], af1, na end
end
local grep, changed = nil, st ~= 's'
local old = redis.call('GET', k2)
if old then
  grep = replay(old)
else
  if not cb then
    local v = redis.call('HMGET', t, 'c', 's', af)
    if not v[1] then return srep .. 'T' end
    cb, sb, ab = v[1], v[2], v[3]
  end
  if not ab then
    grep = 'A'
  else
    local r, ns, na, ans, touch = granted(cb, sb, ab, e, ARGV[4])
    if r then
      grep = r
    else
      sb, ab, changed = ns, na, true
      redis.call('SET', k2, 'r' .. e .. ans .. agent, 'PX', ARGV[5])
      if touch and ARGV[6] ~= '0' then redis.call('PEXPIRE', t, ARGV[6]) end
      grep = 'Gr0' .. ans
    end
  end
end
if changed then
  if other and ab then
    redis.call('HSET', t, 's', sb, af, ab, other, otherField)
  elseif other then
    redis.call('HSET', t, 's', sb, other, otherField)
  else
    redis.call('HSET', t, 's', sb, af, ab)
  end
end
return srep .. grep
`)

// releaseScript: KEYS tree, reservation.
var releaseScript = redis.NewScript(prelude + drawFuncs + `
local t, k = KEYS[1], KEYS[2]
local rec = redis.call('GET', k)
if not rec then return missing(t) end
if string.sub(rec, 1, 1) ~= 'r' then return 'OK' end
local af = 'a:' .. string.sub(rec, 274)
local v = redis.call('HMGET', t, 's', af)
if not v[1] then return 'T' end
if not v[2] then return 'K' end
local ns, na = settled(v[1], v[2], string.sub(rec, 2, 33), string.rep('\0', 32))
redis.call('HSET', t, 's', ns, af, na)
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

// openScript: KEYS tree; ARGV limits, start, wall (see ceilingFunc), tree
// TTL ms.
var openScript = redis.NewScript(ceilingFunc + `
local t, A = KEYS[1], ARGV
if redis.call('EXISTS', t) == 1 then return 0 end
redis.call('HSET', t, 'c', ceiling(A[1], A[2], A[3]), 's', string.rep('\0', 64), 'n', '0')
if A[4] ~= '0' then redis.call('PEXPIRE', t, A[4]) end
return 1
`)

// registerScript: KEYS tree; ARGV agent, depth (decimal), tree TTL ms.
var registerScript = redis.NewScript(prelude + `
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

// restoreScript: KEYS tree; ARGV limits, start, wall (see ceilingFunc),
// tree TTL ms, counters (8 ints), count, then count pairs of agent and
// agent field (9 ints).
var restoreScript = redis.NewScript(ceilingFunc + `
local t, A = KEYS[1], ARGV
if redis.call('EXISTS', t) == 1 then return 0 end
local count = tonumber(A[6])
for i = 0, count - 1 do
  redis.call('HSET', t, 'a:' .. A[7 + 2 * i], A[8 + 2 * i])
end
redis.call('HSET', t, 'c', ceiling(A[1], A[2], A[3]), 's', A[5], 'n', A[6])
if A[4] ~= '0' then redis.call('PEXPIRE', t, A[4]) end
return 1
`)
