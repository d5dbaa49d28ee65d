"""The commands of ``python -m sim``: run many seeds, or replay one.

    python -m sim run [--seeds N] [--start S] [--minutes M | --seconds T] [--nodes 3|5] [--jobs J]
    python -m sim replay SEED [--nodes 3|5] [--tail N] [--json] [--keep I,J]
    python -m sim shrink SEED [--nodes 3|5]

Either takes ``--canary NAME`` (a fix taken away, sim/canaries.py), ``--scenario NAME``
(a scripted scenario's steps instead of the seed's drawn faults, sim/scenarios/) and
``--power-loss`` (seeds draw power losses of one node or all, and failed fsyncs, too,
sim/disk.py: the same seed then draws other faults than without), ``--service`` (every
node a NodeService, with producers and consumers) and ``--membership`` (changes of the
membership too, sim/membership.py).

``run`` prints a line per failing seed (with everything needed to replay it) and a
summary; it exits 1 if any seed failed. Each seed runs in a child forked from a process
started under that seed's ``PYTHONHASHSEED`` (one such process per hash seed, imports done
once), so seeds share nothing. ``replay`` runs one seed in a fresh process under its hash
seed, prints the last ``--tail`` steps of its trace and writes the whole trace to
``sim-report/<seed>.trace``; ``--keep`` makes only those of the seed's drawn faults (by
their number, ``#i`` in its list). ``shrink`` takes a failing seed's faults away one at a
time, each candidate replayed in a fresh process, keeping a removal while the seed still
fails on the same invariant, until no single fault can go: it prints the short plan left
and the ``make sim`` line that replays it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter

from .canaries import CANARIES
from .hash_seeds import HASHSEEDS, env_under, hashseed_for, run_under
from .known import KNOWN
from .run import PLAIN, Mode, replay_key
from .scenarios import SCENARIOS

SEED_LIMIT_S = 120  # a seed running longer than this is reported as a failure (a hang)
# A seed's process may map this much at most (a seed of 5 nodes with every option peaks
# near 110 MB resident); past it, it fails with a MemoryError. A runaway seed once took
# 24 GB and stalled every other process on the machine until the kernel killed it.
SEED_MEMORY_BYTES = 4 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SEED_MEMORY_BYTES, SEED_MEMORY_BYTES))


# -- the zygote: one per hash seed, forks a child per seed ----------------------------------


def zygote(nodes: int, canary: str | None, scenario: str | None, mode: Mode) -> None:
    from .run import run_seed  # the imports every child shares

    for line in sys.stdin:
        seed_s, out = line.split()
        seed = int(seed_s)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.alarm(SEED_LIMIT_S)
                _limit_memory()
                result = run_seed(seed, nodes=nodes, tail=40, canary=canary, scenario=scenario, mode=mode)
                if result.ok:
                    result.trace_tail = []
                with open(out, "w") as f:
                    json.dump(result.to_dict(), f)
            except BaseException:  # noqa: BLE001 - reported by the parent from the exit status
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(f"done {seed} {status}", flush=True)


class _Zygote:
    def __init__(
        self, hashseed: int, nodes: int, canary: str | None, scenario: str | None, mode: Mode
    ) -> None:
        self.hashseed = hashseed
        extra = (["--canary", canary] if canary else []) + mode.options()
        # A scenario runs on its own number of nodes (run_seed), which --nodes may not offer.
        extra += ["--scenario", scenario] if scenario else ["--nodes", str(nodes)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sim", "zygote", *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env_under(hashseed),
        )
        self.busy: int | None = None

    def send(self, seed: int, out: str) -> None:
        self.busy = seed
        self.proc.stdin.write(f"{seed} {out}\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def run_many(
    seeds: int | None,
    start: int,
    budget_s: float | None,
    nodes: int,
    jobs: int,
    canary: str | None = None,
    scenario: str | None = None,
    mode: Mode = PLAIN,
) -> int:
    began = time.monotonic()
    if scenario:
        nodes = SCENARIOS[scenario].nodes
    zygotes = {h: _Zygote(h, nodes, canary, scenario, mode) for h in range(HASHSEEDS)}
    outdir = tempfile.mkdtemp(prefix="horologe-sim-results-")
    next_seed, results, failures, known_seen = start, [], [], []
    end_seed = None if seeds is None else start + seeds
    waiting: list[int] = []  # seeds drawn whose zygote was busy

    def more() -> bool:
        if budget_s is not None and time.monotonic() - began >= budget_s:
            return False
        return end_seed is None or next_seed < end_seed or bool(waiting)

    try:
        while True:
            busy = [z for z in zygotes.values() if z.busy is not None]
            while len(busy) < jobs and more():
                candidates = waiting + ([next_seed] if end_seed is None or next_seed < end_seed else [])
                pick = next((s for s in candidates if zygotes[hashseed_for(s)].busy is None), None)
                if pick is None:
                    if end_seed is None or next_seed < end_seed:
                        waiting.append(next_seed)
                        next_seed += 1
                        continue
                    break
                if pick == next_seed:
                    next_seed += 1
                else:
                    waiting.remove(pick)
                z = zygotes[hashseed_for(pick)]
                z.send(pick, os.path.join(outdir, f"{pick}.json"))
                busy.append(z)
            if not busy:
                break
            ready, _, _ = select.select([z.proc.stdout for z in busy], [], [])
            for z in busy:
                if z.proc.stdout not in ready:
                    continue
                line = z.proc.stdout.readline()
                _, seed_s, status = line.split()
                seed = int(seed_s)
                z.busy = None
                path = os.path.join(outdir, f"{seed}.json")
                if int(status) == 0 and os.path.exists(path):
                    with open(path) as f:
                        r = json.load(f)
                    os.unlink(path)
                else:
                    r = {
                        "seed": seed,
                        "ok": False,
                        "invariant": "crashed",
                        "wall_s": 0.0,
                        "virtual_s": 0.0,
                        "detail": f"the seed's process ended with status {status} (a hang past "
                        f"{SEED_LIMIT_S} s is killed; one past {SEED_MEMORY_BYTES >> 30} GiB fails)",
                        "hashseed": hashseed_for(seed),
                        "steps": 0,
                    }
                results.append(r)
                plain = nodes == 3 and canary is None and scenario is None and mode == PLAIN
                known = KNOWN.get(seed) if plain else None
                if not r["ok"] and known is not None and known[0] == r["invariant"]:
                    known_seen.append(seed)
                    print(f"SIM KNOWN seed={seed} {r['invariant']}: {known[1]}", flush=True)
                elif not r["ok"]:
                    failures.append(r)
                    print(
                        f"SIM FAIL seed={seed} hashseed={r['hashseed']} nodes={nodes} {replay_key()} "
                        f"{r['invariant']}: {r['detail']}",
                        flush=True,
                    )
                    print(f"  replay: {make_line(seed, nodes, canary, scenario, mode)}")
    finally:
        for z in zygotes.values():
            z.close()
        os.rmdir(outdir)
    took = time.monotonic() - began
    virtual = sum(r["virtual_s"] for r in results)
    cpu = sum(r["wall_s"] for r in results)
    print(
        f"sim: {len(results)} seeds ({start}..{next_seed - 1}, {nodes} nodes) in {took:.1f} s, {jobs} jobs: "
        f"{len(results) / took:.2f} seeds/s, {virtual / max(cpu, 1e-9):.1f} virtual s per CPU s; "
        f"{len(failures)} failed" + (f", {len(known_seen)} known (sim/known.py)" if known_seen else "")
    )
    counts = Counter()
    for r in results:
        counts.update(r.get("counts", {}))
    if counts:
        print("what the seeds did: " + ", ".join(f"{what} {n}" for what, n in sorted(counts.items())))
    return 1 if failures else 0


def replay(
    seed: int,
    nodes: int,
    tail: int,
    as_json: bool,
    canary: str | None = None,
    scenario: str | None = None,
    mode: Mode = PLAIN,
    keep: frozenset[int] | None = None,
) -> int:
    run_under(hashseed_for(seed))
    _limit_memory()
    from .run import run_seed

    result = run_seed(
        seed, nodes=nodes, tail=1_000_000, canary=canary, scenario=scenario, mode=mode, keep=keep
    )
    os.makedirs("sim-report", exist_ok=True)
    path = os.path.join("sim-report", f"{seed}.trace")
    with open(path, "w") as f:
        f.write("\n".join(result.trace_tail) + "\n")
    if as_json:
        result.trace_tail = result.trace_tail[-tail:]
        print(json.dumps(result.to_dict()))
        return 0 if result.ok else 1
    print("\n".join(result.trace_tail[-tail:]))
    print(f"faults: {result.faults}")
    print(f"knobs: {result.knobs}; answers: {result.answers}; delivered {result.delivered}")
    print(f"{result.line()} ({replay_key()})")
    print(f"whole trace: {path}")
    return 0 if result.ok else 1


def shrink(seed: int, nodes: int, canary: str | None, mode: Mode) -> int:
    """The fewest of ``seed``'s drawn faults with which it still fails on the same invariant."""
    options = ["--nodes", str(nodes)] + (["--canary", canary] if canary else [])
    options += mode.options()

    def run(keep: list[int] | None) -> dict:
        extra = [] if keep is None else ["--keep", ",".join(map(str, keep)) or "none"]
        done = subprocess.run(
            [sys.executable, "-m", "sim", "replay", str(seed), "--json", "--tail", "0", *options, *extra],
            capture_output=True,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"},
        )
        if not done.stdout:
            raise RuntimeError(f"the replay of seed {seed} printed nothing: {done.stderr[-2000:]}")
        return json.loads(done.stdout.splitlines()[-1])

    first = run(None)
    if first["ok"]:
        print(f"seed {seed} passes: nothing to shrink")
        return 1
    invariant, kept = first["invariant"], list(range(len(first["faults"])))
    print(f"seed {seed} fails on {invariant} with {len(kept)} faults", flush=True)
    result, shrunk = first, True
    while shrunk:
        shrunk = False
        for fault in list(kept):
            trial = [k for k in kept if k != fault]
            r = run(trial)
            verdict = "passes" if r["ok"] else f"fails on {r['invariant']}"
            print(f"  without #{fault}: {verdict}", flush=True)
            if not r["ok"] and r["invariant"] == invariant:
                kept, result, shrunk = trial, r, True
    print(f"seed {seed}: {len(kept)} of {len(first['faults'])} faults still fail on {invariant}:")
    for line in result["faults"]:
        print(f"  {line}")
    print(f"  replay: {make_line(seed, nodes, canary, None, mode, kept)}")
    return 0


def make_line(
    seed: int,
    nodes: int,
    canary: str | None,
    scenario: str | None,
    mode: Mode,
    keep: list[int] | None = None,
) -> str:
    """The ``make sim`` line that replays a seed as it ran."""
    line = f"make sim SEED={seed}"
    line += f" KEEP={','.join(map(str, keep)) or 'none'}" if keep is not None else ""
    line += f" NODES={nodes}" if nodes != 3 and not scenario else ""
    line += f" CANARY={canary}" if canary else ""
    line += f" SCENARIO={scenario}" if scenario else ""
    return line + mode.make_vars()


def canary_names(text: str) -> str:
    """``--canary``: one name of sim/canaries.py, or several joined by commas (fixes taken
    away together: one that guards a path another fix closed)."""
    unknown = [name for name in text.split(",") if name not in CANARIES]
    if unknown:
        raise argparse.ArgumentTypeError(f"no canary {unknown[0]!r} (one of {', '.join(sorted(CANARIES))})")
    return text


def _keep(text: str) -> frozenset[int]:
    """``--keep``: fault numbers, comma-separated; ``none`` for no fault at all."""
    return frozenset() if text == "none" else frozenset(int(k) for k in text.split(","))


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sim",
        description=__doc__.split("\n\n")[0],
        epilog="make sim wraps these: make sim SEEDS=200, make sim SEED=67 (docs/simulator.md).",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    world = argparse.ArgumentParser(add_help=False)  # what every command builds its world from
    world.add_argument("--nodes", type=int, choices=(3, 5), default=3, help="cluster size (default 3)")
    world.add_argument("--canary", type=canary_names, help="take a fix away (sim/canaries.py); A,B: both")
    world.add_argument(
        "--power-loss",
        action="store_true",
        help="draw power losses, failed fsyncs and failed writes too (sim/disk.py); other draws than without",
    )
    world.add_argument(
        "--service",
        action="store_true",
        help="every node a NodeService, with producers and consumers; other draws than without",
    )
    world.add_argument(
        "--membership",
        action="store_true",
        help="draw changes of the membership too: add a spare, replace a member (sim/membership.py)",
    )
    world.add_argument(
        "--spares-first",
        action="store_true",
        help="with --membership: the spares' addresses sort before the members' (the larger address "
        "dials, so the added nodes are called rather than calling)",
    )
    world.add_argument(
        "--commit-at-once",
        action="store_true",
        help="a leader sends its new commit index at once after each apply, as pysyncobj does, "
        "rather than with its next append (ClusterSettings.commit_told_within_s = 0)",
    )
    world.add_argument(
        "--out-of-order",
        action="store_true",
        help="with --power-loss: what was not synced may be kept sector by sector, in no order "
        "(a later sector on disk, an earlier one zeros), as a disk's cache and write-back leave it",
    )
    world.add_argument(
        "--timed-waits",
        action="store_true",
        help="each node ticks when its tick thread's wait would end (its next heartbeat or election "
        "deadline, tick_s while work goes on, at most idle_tick_s) or when a message arrives, as the "
        "product does, rather than every tick_s; other timings than without",
    )
    world.add_argument(
        "--hold",
        action="store_true",
        help="with --service: the workload's calls take the HTTP routes' master check, which holds a "
        "request while the master may not serve for a moment (node/master_hold.py), not a refusal at once",
    )
    world.add_argument(
        "--sync-interval-ms",
        type=int,
        default=None,
        metavar="MS",
        help="with --service: the nodes' sync_interval_ms, the longest gap between the master's S "
        "entries when nothing falls due (default: the node's, 250); other timings than without",
    )
    world.add_argument(
        "--schedules",
        action="store_true",
        help="with --service: the workload creates a recurring schedule that fires every second, then "
        "pauses and resumes it; the nodes plan it 1 s ahead, and the consumers pull its firings, "
        "checked as the others and at the end: each fire time planned and not paused is in every "
        "ready log once; other draws than without",
    )
    world.add_argument(
        "--lateness",
        action="store_true",
        help="with --service: a third of the producer's messages carry a lateness policy "
        "(max_lateness 0, 30, 300 or 1500 ms, then drop or dlq); at the end each owed one is in "
        "every ready log within its allowance, or dropped or dead-lettered past it, alike on "
        "every node; other draws than without",
    )
    world.add_argument(
        "--retention",
        action="store_true",
        help="with --service: retention cuts within a run (retention_ms 300, looked at every 100 ms; "
        "a ready segment closes every 500 ms of deliveries): ready logs trimmed once the group passed "
        "them, the first hour removed; a message owed that is no longer in a ready log must have been "
        "handed out, or due before its group had progress on the topic; other timings than without",
    )
    world.add_argument(
        "--push",
        action="store_true",
        help="with --service: a push subscription on a topic of its own, pushed by the master to a "
        "simulated receiver that answers 200, 503, 500, nothing or too late; its leases are checked "
        "as pulls are, each push taken before its time fails, and once the run recovered every owed "
        "message must be taken or dead-lettered; other draws than without",
    )
    scripted = argparse.ArgumentParser(add_help=False)
    scripted.add_argument(
        "--scenario", choices=sorted(SCENARIOS), help="scripted faults instead of drawn ones (sim/scenarios/)"
    )
    p_run = sub.add_parser("run", parents=[world, scripted], help="run many seeds")
    p_run.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="how many seeds (default 100; with --seconds or --minutes, as many as fit)",
    )
    p_run.add_argument("--start", type=int, default=1, help="the first seed (default 1)")
    p_run.add_argument("--seconds", type=float, default=None, help="run seeds for this long, then stop")
    p_run.add_argument("--minutes", type=float, default=None, help="the same, in minutes")
    p_run.add_argument("--jobs", type=int, default=2, help="seeds run at once (default 2)")
    p_replay = sub.add_parser("replay", parents=[world, scripted], help="replay one seed, print its trace")
    p_replay.add_argument("seed", type=int)
    p_replay.add_argument("--tail", type=int, default=80, help="trace steps printed (default 80)")
    p_replay.add_argument(
        "--json",
        action="store_true",
        help="the result as one JSON line (faults, counts, answers, the last --tail steps)",
    )
    p_replay.add_argument("--keep", type=_keep, help="only these drawn faults, e.g. 0,2 (none: no fault)")
    p_shrink = sub.add_parser(
        "shrink", parents=[world], help="the fewest of a failing seed's faults that still fail"
    )
    p_shrink.add_argument("seed", type=int)
    sub.add_parser("zygote", parents=[world, scripted], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.membership and getattr(args, "scenario", None):
        parser.error("--membership draws changes of the membership; a --scenario scripts its own")
    scenario = getattr(args, "scenario", None)
    if args.service and scenario and SCENARIOS[scenario].client_alone:
        parser.error(
            f"--service: the steps of {scenario} wait for the scripted client's entries alone "
            "(under the workload's they may never come: script-stuck); it runs without node services"
        )
    if args.spares_first and not args.membership:
        parser.error("--spares-first orders the spares' addresses: it needs --membership")
    serving = args.service or (scenario and SCENARIOS[scenario].service)
    if args.hold and not serving:
        parser.error("--hold says how the workload's calls are checked: it needs --service")
    if args.sync_interval_ms is not None and not serving:
        parser.error("--sync-interval-ms sets the node services' config: it needs --service")
    if args.schedules and not serving:
        parser.error("--schedules adds to the workload's calls: it needs --service")
    if args.lateness and not serving:
        parser.error("--lateness adds to the workload's messages: it needs --service")
    if args.retention and not serving:
        parser.error("--retention sets the node services' config: it needs --service")
    if args.push and not serving:
        parser.error("--push adds to the workload's calls: it needs --service")
    if args.sync_interval_ms is not None and not 1 <= args.sync_interval_ms <= 500:
        parser.error("--sync-interval-ms: 1..500, as the node's config allows (node/config.py)")
    if args.out_of_order and not args.power_loss:
        parser.error("--out-of-order says what a power loss keeps: it needs --power-loss")
    mode = Mode(
        args.power_loss,
        args.service,
        args.membership,
        args.spares_first,
        args.commit_at_once,
        args.out_of_order,
        args.timed_waits,
        args.hold,
        args.sync_interval_ms,
        args.schedules,
        args.lateness,
        args.retention,
        args.push,
    )
    if args.cmd == "zygote":
        zygote(args.nodes, args.canary, args.scenario, mode)
        return 0
    if args.cmd == "replay":
        a = args
        return replay(a.seed, a.nodes, a.tail, a.json, a.canary, a.scenario, mode, a.keep)
    if args.cmd == "shrink":
        return shrink(args.seed, args.nodes, args.canary, mode)
    budget = args.seconds if args.seconds is not None else (args.minutes * 60 if args.minutes else None)
    seeds = args.seeds if args.seeds is not None or budget is not None else 100
    return run_many(seeds, args.start, budget, args.nodes, args.jobs, args.canary, args.scenario, mode)
