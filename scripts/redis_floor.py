#!/usr/bin/env python3
"""Sluice on Redis against the floor: what Redis does per decision for Sluice, beside the least a
Redis script can do for the same algorithm (scripts/floor/*.lua), on one private redis-server, in
one run.

For each algorithm:
  - the minimal script under redis-benchmark (one EVALSHA, 50 clients, 100k keys), -P 1 and -P 16:
    decisions/s and Redis' own µs per call (INFO commandstats); MEMORY USAGE of its keys;
  - `sluice bench` through the library (50 tasks, 100k keys): decisions/s, µs per decision (a call
    may hold several: concurrent decisions of one limit share one), memory;
  - shapes (with --shapes): a limit with block and penalty while nobody is blocked, every identity
    blocked (a block, then a block and a penalty; each without and with the denial cache), and a
    rule with two limits.
The minimal -P 16 run, Sluice and its shapes are measured in --rounds rounds (5), each ratio taken
within its round; the figures reported are the medians of the rounds (the machine is shared, and
its speed drifts from one minute to the next). The minimal -P 16 run makes 400k calls, and so do
Sluice's runs of one limit, of block + penalty and of two limits (`sluice bench --decisions`): at
the same calls per key, as many of them start a window (a window's first call costs more than the
next), whatever each run's rate. The blocked shapes run --seconds (4).
Prints one JSON object per line (consumed by scripts/bench) and a table on stderr.

usage: redis_floor.py SLUICE_BINARY [--seconds N] [--rounds N] [--shapes] [algorithm ...] > run.jsonl
       redis_floor.py --render run.jsonl      (the Markdown section of BENCHMARKS.md)
"""
import argparse, csv, io, json, os, re, shutil, socket, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
LUA = os.path.join(HERE, "floor")
# Minimal script and its ARGV: 1000 per 60 s, as Sluice's limits below.
MIN = {
    "gcra": ("gcra.lua", ["1000", "60000", "1"]),
    "fixed_window": ("fixed_window.lua", ["1000", "60000"]),
    "token_bucket": ("token_bucket.lua", ["16.667", "1000", "1"]),
    "sliding_log": ("sliding_log.lua", ["1000", "60000"]),
    "sliding_window": ("sliding_counter.lua", ["1000", "60000", "6000"]),
}
CLIENTS, KEYS = 50, 100000
# Calls of the minimal script's -P 16 run, and decisions of Sluice's runs beside it.
CALLS = 400000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self):
        self.dir = tempfile.mkdtemp()
        self.port = free_port()
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", self.dir],
                                     stdout=subprocess.DEVNULL)
        for _ in range(100):
            if self.cli("PING").strip() == "PONG":
                return
            time.sleep(0.05)
        raise SystemExit("redis-server did not start")

    def cli(self, *a):
        return subprocess.run(["redis-cli", "-p", str(self.port), *a], capture_output=True, text=True).stdout

    def reset(self):
        self.cli("FLUSHALL")
        self.cli("CONFIG", "RESETSTAT")

    def usec_per_call(self):
        return self.evalsha()[1]

    def evalsha(self):
        """Redis' total µs in decision calls (EVALSHA and FCALL) since the last reset, and µs per
        call."""
        out = self.cli("INFO", "commandstats")
        calls = usec = 0
        for m in re.finditer(r"cmdstat_(?:evalsha|fcall):calls=(\d+),usec=(\d+),", out):
            calls += int(m.group(1))
            usec += int(m.group(2))
        return (float(usec), usec / calls) if calls else (0.0, float("nan"))

    def memory_per_key(self, samples=200):
        """Median MEMORY USAGE (key name included) of random state keys."""
        script = """
local sizes = {}
for _ = 1, tonumber(ARGV[1]) do
  local key = redis.call('RANDOMKEY')
  if key and not string.match(key, ':[bvh]$') then
    sizes[#sizes + 1] = redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')
  end
end
return sizes"""
        out = self.cli("EVAL", script, "0", str(samples))
        sizes = [int(x) for x in out.split() if x.isdigit()]
        return statistics.median(sizes) if sizes else float("nan")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def minimal(redis, alg, pipeline, calls=None, spread=0.0):
    """The minimal script under redis-benchmark: 200k calls (-P 1) or 400k (-P 16), or `calls`,
    spread over `spread` seconds in one batch a second (a sliding window's keys hold a bucket for
    each stretch of the window they were hit in, so their memory depends on the time a run spans)."""
    f, args = MIN[alg]
    sha = redis.cli("SCRIPT", "LOAD", open(os.path.join(LUA, f)).read()).strip()
    redis.reset()
    calls = calls or (CALLS if pipeline > 1 else 200000)
    batches = max(1, round(spread))
    start = time.monotonic()
    for i in range(batches):
        time.sleep(max(0.0, start + i * spread / batches - time.monotonic()))
        out = subprocess.run(["redis-benchmark", "-p", str(redis.port), "-c", str(CLIENTS),
                              "-n", str(calls // batches), "-r", str(KEYS),
                              "-P", str(pipeline), "--csv", "EVALSHA", sha, "1", "k:__rand_int__", *args],
                             capture_output=True, text=True).stdout
    rows = [r for r in csv.reader(io.StringIO(out)) if r and r[0] != "test"]
    return {"per_sec": float(rows[-1][1]), "us_per_call": redis.usec_per_call(),
            "bytes_per_key": redis.memory_per_key()}


def sluice(redis, binary, alg, seconds, *extra, keys=KEYS, decisions=None):
    """`sluice bench` for `seconds`, or for `decisions` (then `seconds` is only a bound)."""
    redis.reset()
    if decisions:
        extra = ("--decisions", str(decisions), *extra)
    if "--limit" not in extra:
        extra = ("--limit", "1000/1m", *extra)
    # One runtime thread, as redis-benchmark is one event loop: the other core stays Redis'.
    start = time.monotonic()
    proc = subprocess.Popen([binary, "bench", "--store", f"redis://127.0.0.1:{redis.port}", "--algorithm", alg,
                             "--threads", "1", "--concurrency", str(CLIENTS), "--keys", str(keys),
                             "--duration", f"{seconds}s", "--json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Keys are sampled once a second while the run lasts, and once after it, which counts unless
    # no key is left: a GCRA key expires when its limit has forgotten it, a fraction of a second
    # after its last call here. (The sample is an EVAL, which the µs per call leave out.)
    bytes_per_key = float("nan")
    while True:
        try:
            stdout, stderr = proc.communicate(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            bytes_per_key = redis.memory_per_key()
    elapsed = time.monotonic() - start
    line = [l for l in stdout.splitlines() if l.strip().startswith("{")]
    if not line:
        raise SystemExit(f"sluice bench failed: {stderr}")
    report = json.loads(line[-1])
    after = redis.memory_per_key()
    if after == after:
        bytes_per_key = after
    usec, per_call = redis.evalsha()
    decisions = report["allowed"] + report["denied"]
    return {"per_sec": report["decisions_per_sec"], "us_per_call": per_call,
            "calls": round(usec / per_call) if usec else 0,
            "us_per_decision": usec / decisions if decisions else float("nan"),
            "bytes_per_key": bytes_per_key, "errors": report["errors"],
            "denied": report["denied"], "seconds": elapsed}


LEFT = """
Bytes per key after the runs move by a size class (16 bytes) with what the timed runs leave in a
key and do not control: how many 6 s buckets a sliding window's calls fell in, how many entries a
sliding log holds. At equal content Sluice's keys are the minimal script's + 16 bytes at most, the
length of their names (`sluice:<8-character hash>{key=…}` against `k:<12 digits>`): keys written by
hand with `redis-cli` (`HSET` of the same bucket fields, `ZADD` of as many members in either
script's form) measured, with `MEMORY USAGE`, 88 / 104 / 168 bytes for Sluice's sliding window with
1, 2 and 10 buckets against 72 / 88 / 152 for the minimal one, and 120 / 184 / 392 bytes for
Sluice's sliding log with 1, 3 and 10 entries against 104 / 168 / 376 (2026-11-26).

A one-limit script is made for its limit, the limit's numbers and options written into its text, so
that a call carries only the time and the cost: each argument costs Redis about 1,000 instructions
(parsed, made a string object, then a Lua string, then converted to a number), and as arguments the
eight constants would cost a fixed-window call about 8,000 instructions, more than a quarter of its
cost (callgrind, below). For the same reason the scripts hand Redis commands numbers as text
(`'0'`, the cost as it arrived): Lua converts a number to a string with `sprintf`, about 2,000
instructions.

What is left above the floor: the fixed window's minimal script starts its window at the first hit
(an `INCR`, and a `PEXPIRE` when it starts) and answers two values; Sluice's windows are aligned to
the clock and its answer says when the window ends, which takes Redis' time. Priced with
`scripts/redis-instructions --lua` (2026-11-26): a script that does nothing costs Redis 10,200
instructions a call, each argument about 1,000, a `DECRBY` 3,700, a `PTTL` 3,200, reading `TIME`
and turning it into µs 8,100, reading a string as a number 1,200 (so the usual cost of 1 is read by
comparing strings). So a fixed window's key expires at its window's end, and while the window lasts
its `PTTL` tells the script that the window is the key's and tells the store Redis' time, to the
millisecond: an admission is one `DECRBY` and one `PTTL`, answered with one number that packs the
count, the window's slot and the `PTTL` (a reply of two values costs about 4,200 instructions more
than one number: Redis looks for `err`, `ok` and the other typed fields in every table it converts);
`TIME` is read when a window starts (the key the `DECRBY` made then gets its window's slot with a
second `DECRBY` and its end with `PEXPIREAT`, together cheaper than rewriting it with `SET ... PXAT`)
and on a denial. The `PTTL` is what is left above
the minimal script. A one-limit rule with a block
or penalty runs its algorithm's one-limit script too, which reads the violations key of a penalty;
the block marker sits in the state key, so the algorithm's own read finds it. The fixed window
with a block or a penalty reads its key with `GET` first (a refused `DECRBY` on a marker costs
about 9,400 instructions, a `GET` about 3,000), and a marker that expires with its block (written
`B0` on Redis `TIME` when the parked state ends first) tells Redis' time by its `PTTL` as a
window's key does: a blocked identity costs a `GET` and a `PTTL`, no `TIME`, answered with one
text. With a penalty the key also says whether the violations key need be read: a penalty's marker
carries a copy of the violations (nothing counts one while the identity is blocked, so the copy
stays true), and a window's count is flagged (held as `slot × 2^25 + (2^25 − 1 − count)`, which
`DECRBY` counts up as well) while the identity has violations; an unflagged count has none. So an
admission is a `GET`, a `DECRBY` and a `PTTL`, and a blocked identity a `GET` and a `PTTL`, as
without a penalty (reading the violations first cost the blocked identity a third read). A GCRA
limit with a block or a penalty reads its key before `TIME` and answers such a marker the same
way, with the violations' count and end beside it when there are some. Denials are two calls: the one-limit script leaves them, having written
nothing, to the general decision, which blocks and counts the violation. A rule of several limits
without `count_denied` runs a script made for the rule: each limit's one-limit script split into its
read and its write, the writes made once every limit passes, so two limits cost two reads and two
writes under one `TIME` (about 1.6× one limit in instructions, where the general decision cost
3.4×); a limit with a block or penalty adds the read of its violations, and its denials and blocks
go to the general decision, as for one limit. A rule of fixed windows without block or penalty
counts first, as one limit does: a `DECRBY` and a `PTTL` per limit, answered with each key's value
and `PTTL`; a key that its `DECRBY` made starts a window, completed once `TIME` is read with its
slot and expiry, as the one-limit script completes a window's first admission; every count is undone and
`TIME` read when one does not admit.
Other rules take the general decision. It is a Redis function, so its helpers and algorithms are
defined once when the library loads rather than on every call as a script would (defining them
costs Redis about 4.7 µs a call: a script that defines them and returns at once takes 5.8 µs under
`redis-benchmark -P 16`, a function of the same library that returns at once 1.0 µs). What remains
is the driver's own work: reading each limit's arguments into tables, `TIME`, one read and one
write per limit, the violations key of a penalty. With the denial cache on, as by default, Redis
sees a blocked identity only when its cached denial runs out, penalty limits included: a block or
ban in force counts nothing, so it is cached until it ends."""


def render(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    f = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"
    print("## Redis at the floor (`scripts/redis_floor.py`)\n")
    print("One private `redis-server`, one run: the minimal script of each algorithm (`scripts/floor/`,")
    print(f"1000 per minute) under `redis-benchmark -c {CLIENTS} -r {KEYS}`, then `sluice bench` through the")
    print(f"library on the same Redis ({CLIENTS} tasks, {KEYS} keys, limit 1000/1m). µs is Redis' own time")
    print("(`INFO commandstats`): per `EVALSHA` for the minimal script, which decides once per call; per")
    print("decision for Sluice, its `EVALSHA` and `FCALL` time over the decisions made (concurrent decisions")
    print("of one limit share a call, so a call may hold several; calls per key counts calls). Bytes per key is the median `MEMORY USAGE`")
    print("(key name included) of 200 random state keys. *At equal content* (the goal's figure), each")
    print("script decides 200 fresh keys in turn, the same number of times (once for a sliding log or")
    print("window, whose keys grow with what they record: one entry, one bucket; 20 times for the others,")
    print("whose state has one size), and the keys are sampled at once. *After the runs* (for reference),")
    print("the minimal script's keys are taken after a run of it with as many calls as Sluice made, a")
    print("sliding window's spread over as many seconds, and Sluice's each second of its run and once after")
    print("it, the last sample counting unless no key was left (a GCRA key expires once its limit has")
    print("forgotten it): what a key holds then depends on how each run happened to spread its calls. The")
    print("minimal script at -P 16, Sluice and its shapes")
    print("run in five rounds, one after the other; each ratio is taken within its round, beside the minimal")
    print(f"script's run of that round, and every figure is the median of the five. The minimal -P 16 run makes")
    print(f"{CALLS} calls, and Sluice's runs of one limit, of block + penalty and of two limits as many")
    print("decisions (`sluice bench --decisions`), so that as many calls start a window in each (a window's")
    print("first call costs more than the next ones), whatever each run's rate. Goals: Sluice's µs ≤ 1.25×")
    print("the minimal script's, rate ≥ 0.8× the minimal -P 16 rate, memory ≤ minimal + 16 bytes.")
    print("`sluice bench` runs with `--threads 1`: one runtime thread, as `redis-benchmark` is one event")
    print("loop, so the other core is Redis'.\n")
    print("| algorithm | minimal µs (P16) | Sluice µs per decision | µs ratio | minimal -P 16 /s | Sluice /s | rate ratio | calls per key "
          "| B/key at equal content: minimal / Sluice | B/key after the runs: minimal / Sluice |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        p16, s, eq = r["p16"], r["sluice"], r.get("equal_content", {})
        print(f"| {r['algorithm']} | {f(p16['us_per_call'])} | {f(s['us_per_decision'])} | {f(r['us_ratio'])}× | "
              f"{p16['per_sec']:.0f} | {s['per_sec']:.0f} | {f(r['rate_ratio'])}× | {f(s['calls'] / KEYS, 1)} | "
              f"{bytes_pair(eq.get('minimal'), eq.get('sluice'))} | "
              f"{bytes_pair(r['memory_peer']['bytes_per_key'], s['bytes_per_key'])} |")
    if any("guarded" in r for r in rows):
        print("\nShapes, same run. *block + penalty*: the limit also has `block: 1h` and a penalty, nobody")
        print("denied (goal ≤ 1.6× the minimal µs); *blocked*: `1/1h` with `block: 1h` on 1,000 keys, so")
        print("nearly every decision answers from a block (goal ≤ 1× the minimal µs), measured with")
        print("`--no-denial-cache` so that Redis answers each one; *blocked, cached*: the same with the denial")
        print("cache on (the default), Redis µs per *decision*; *blocked, block + penalty*: the same two")
        print("with a penalty as well; *two limits*: a rule with two such limits on the same key (goal ≤")
        print("2.2× Sluice's one-limit µs).\n")
        print("| algorithm | block + penalty µs | ÷ minimal | blocked µs | ÷ minimal | blocked, cached µs/decision "
              "| blocked, block + penalty µs | ÷ minimal | the same, cached µs/decision | two limits µs | ÷ one limit |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            cached = r.get("blocked_cached", {}).get("us_per_decision")
            penalty = r.get("blocked_penalty", {}).get("us_per_decision")
            penalty_cached = r.get("blocked_penalty_cached", {}).get("us_per_decision")
            print(f"| {r['algorithm']} | {f(r['guarded']['us_per_decision'])} | {f(r['guarded_us_ratio'])}× | "
                  f"{f(r['blocked']['us_per_decision'])} | {f(r['blocked_us_ratio'])}× | {f(cached, 3)} | "
                  f"{f(penalty)} | {f(r.get('blocked_penalty_us_ratio'))}× | {f(penalty_cached, 3)} | "
                  f"{f(r['two_limits']['us_per_decision'])} | {f(r['two_limits_ratio'])}× |")
    print(LEFT)
    print()


def bytes_pair(minimal, sluice):
    """`minimal / Sluice (+difference)` bytes per key, or `-` where a figure is missing."""
    if minimal is None or sluice is None or minimal != minimal or sluice != sluice:
        return "-"
    return f"{minimal:.0f} / {sluice:.0f} (+{sluice - minimal:.0f})"


def median(values):
    """The median of the values measured (neither None nor NaN: no key was left to sample)."""
    values = [v for v in values if v is not None and v == v]
    return statistics.median(values) if values else None


def equal_content(redis, binary, alg, keys=200):
    """Bytes per key at equal content: the minimal script and Sluice each decide `keys` fresh keys
    the same number of times in a row (one task: every key in turn), and the keys are sampled at
    once. A sliding log or window key is decided once (one entry, one bucket: their size grows with
    what they record); the others, whose state has one size, 20 times, so that a GCRA key (which
    expires once its limit has forgotten it, 60 ms after one call here) is still there to sample."""
    per_key = 1 if alg in ("sliding_log", "sliding_window") else 20
    f, args = MIN[alg]
    redis.reset()
    sha = redis.cli("SCRIPT", "LOAD", open(os.path.join(LUA, f)).read()).strip()
    calls = "".join(f"EVALSHA {sha} 1 k:{i:012d} {' '.join(args)}\n"
                    for _ in range(per_key) for i in range(keys))
    subprocess.run(["redis-cli", "-p", str(redis.port)], input=calls, capture_output=True, text=True)
    minimal_bytes = redis.memory_per_key()
    redis.reset()
    subprocess.run([binary, "bench", "--store", f"redis://127.0.0.1:{redis.port}", "--algorithm", alg,
                    "--limit", "1000/1m", "--concurrency", "1", "--keys", str(keys),
                    "--decisions", str(keys * per_key), "--duration", "60s", "--json"],
                   capture_output=True, text=True, check=True)
    return {"calls_per_key": per_key, "minimal": minimal_bytes, "sluice": redis.memory_per_key()}


def measure_round(redis, a, alg):
    """One round: the minimal script at -P 16, then Sluice and its shapes right after it, and each
    ratio to that minimal run (the machine's speed drifts between rounds, not within one)."""
    # Runs of CALLS decisions, as many as the minimal script's: bounded, not timed.
    counted = dict(decisions=CALLS)
    bound = 300
    rd = {"p16": minimal(redis, alg, 16), "sluice": sluice(redis, a.binary, alg, bound, **counted)}
    if a.shapes:
        # Beside the one-limit run, which it is compared with.
        rd["two_limits"] = sluice(redis, a.binary, alg, bound, "--limits", "2", **counted)
        rd["guarded"] = sluice(redis, a.binary, alg, bound, "--block", "1h", "--penalty", **counted)
        # 1 per hour with a block: each key is admitted once, denied and blocked, then every
        # further decision answers from the block. Without the denial cache, so that Redis answers
        # every blocked decision; with it (the default), Redis sees only each key's admission and
        # the denial that blocks it.
        rd["blocked"] = sluice(redis, a.binary, alg, a.seconds, "--limit", "1/1h", "--block", "1h",
                               "--no-denial-cache", keys=1000)
        rd["blocked_cached"] = sluice(redis, a.binary, alg, a.seconds, "--limit", "1/1h", "--block",
                                      "1h", keys=1000)
        # The same with a penalty too: each key's denial also counts a violation.
        rd["blocked_penalty"] = sluice(redis, a.binary, alg, a.seconds, "--limit", "1/1h", "--block",
                                       "1h", "--penalty", "--no-denial-cache", keys=1000)
        rd["blocked_penalty_cached"] = sluice(redis, a.binary, alg, a.seconds, "--limit", "1/1h",
                                              "--block", "1h", "--penalty", keys=1000)
    p16, s = rd["p16"], rd["sluice"]
    rd["us_ratio"] = s["us_per_decision"] / p16["us_per_call"]
    rd["rate_ratio"] = s["per_sec"] / p16["per_sec"]
    if a.shapes:
        rd["guarded_us_ratio"] = rd["guarded"]["us_per_decision"] / p16["us_per_call"]
        rd["blocked_us_ratio"] = rd["blocked"]["us_per_decision"] / p16["us_per_call"]
        rd["blocked_penalty_us_ratio"] = rd["blocked_penalty"]["us_per_decision"] / p16["us_per_call"]
        rd["two_limits_ratio"] = rd["two_limits"]["us_per_decision"] / s["us_per_decision"]
    return rd


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        return render(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("algorithms", nargs="*", default=list(MIN))
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--shapes", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_intermixed_args()
    redis = Redis()
    try:
        for alg in a.algorithms:
            rounds = [measure_round(redis, a, alg) for _ in range(a.rounds)]
            row = {"algorithm": alg, "p1": minimal(redis, alg, 1), "rounds": rounds}
            # Each figure is the median of its rounds; each ratio, the median of the ratios taken
            # within a round, beside the minimal script measured in that round.
            for key in rounds[0]:
                values = [r[key] for r in rounds]
                row[key] = ({k: median([v[k] for v in values]) for k in values[0]}
                            if isinstance(values[0], dict) else median(values))
            p16, s = row["p16"], row["sluice"]
            # Memory is compared at the same number of calls per key, made over the same time: a
            # key's state grows with what was recorded in it (a sliding log's entries) and with
            # the time that spans (a sliding window's buckets), and the timed runs make different
            # numbers of calls at different rates.
            # Only a sliding window's keys depend on the time spanned: spreading the calls over
            # separate redis-benchmark runs repeats keys more than one run's random draws do.
            spread = s["seconds"] if alg == "sliding_window" else 0.0
            row["memory_peer"] = minimal(redis, alg, 16, calls=int(s["calls"]), spread=spread)
            row["equal_content"] = equal_content(redis, a.binary, alg)
            eq = row["equal_content"]
            row["bytes_over_minimal"] = eq["sluice"] - eq["minimal"]
            print(json.dumps(row), flush=True)
            shapes = ""
            if a.shapes:
                shapes = (f"  block+penalty {row['guarded_us_ratio']:.2f}x  blocked {row['blocked_us_ratio']:.2f}x"
                          f"  blocked+penalty {row['blocked_penalty_us_ratio']:.2f}x"
                          f"  two limits {row['two_limits_ratio']:.2f}x one")
            print(f"{alg:15s} minimal P16 {p16['us_per_call']:.2f} us, {p16['per_sec']:.0f}/s, {p16['bytes_per_key']:.0f} B"
                  f" ({row['memory_peer']['bytes_per_key']:.0f} B at Sluice's calls; equal content"
                  f" {eq['minimal']:.0f} B)"
                  f" | sluice {s['us_per_decision']:.2f} us ({row['us_ratio']:.2f}x), {s['per_sec']:.0f}/s"
                  f" ({row['rate_ratio']:.2f}x P16), {s['bytes_per_key']:.0f} B (equal content {eq['sluice']:.0f} B,"
                  f" +{row['bytes_over_minimal']:.0f}){shapes}",
                  file=sys.stderr, flush=True)
    finally:
        redis.stop()


if __name__ == "__main__":
    main()
