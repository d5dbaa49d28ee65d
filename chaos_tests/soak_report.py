"""The soak's report: RSS growth per node, SOAK.md, soak.json and soak.png."""

from __future__ import annotations

import json
import os

import numpy as np

from .report import shade_faults, spread

MB = 1 << 20
WARM_MS = 30_000  # a process's first half-minute (start, catch-up) is not its baseline
WINDOW_MS = 60_000  # baseline: the minute after that; end: the last minute it was sampled
MIN_LIFE_MS = 180_000  # processes that ran less (restarted by a fault) are not judged


def rss_growth(samples: list[tuple[int, int, int, int]]) -> list[dict]:
    """Per node process that ran at least 3 minutes, MB: the median RSS in the minute after
    its first half-minute, in its last minute, the maximum, and the growth (end minus
    baseline). Faults restart processes, so each is judged over its own life."""
    out = []
    for i, pid in sorted({(s[1], s[2]) for s in samples}):
        t = np.array([s[0] for s in samples if s[2] == pid])
        rss = np.array([s[3] for s in samples if s[2] == pid]) / MB
        if t.max() - t.min() < MIN_LIFE_MS:
            continue
        start = t.min() + WARM_MS
        baseline = float(np.median(rss[(t >= start) & (t < start + WINDOW_MS)]))
        end = float(np.median(rss[t >= t.max() - WINDOW_MS]))
        out.append(
            {
                "node": f"n{i + 1}",
                "pid": pid,
                "lived_min": (t.max() - t.min()) / 60_000,
                "baseline_mb": baseline,
                "end_mb": end,
                "max_mb": float(rss.max()),
                "growth_mb": end - baseline,
            }
        )
    return out


def write_report(out_dir: str, result: dict, samples: list) -> str:
    """soak.json and SOAK.md first, the plot last: a run of many minutes keeps its verdict
    and figures whatever happens to the plot (matplotlib is in the spark and bench extras,
    not the test one)."""
    os.makedirs(out_dir, exist_ok=True)
    timeline, history = result.pop("timeline"), result.pop("history")
    with open(os.path.join(out_dir, "soak.json"), "w") as f:
        json.dump({**result, "rss_samples": samples}, f, indent=1)
    path = os.path.join(out_dir, "SOAK.md")
    try:
        _plot(os.path.join(out_dir, "soak.png"), result, timeline, samples)
        plot = ["![soak](soak.png)", ""]
    except ImportError as e:
        plot = [f"No plot: {e} (`pip install matplotlib`).", ""]
    with open(path, "w") as f:
        f.write("\n".join(_markdown(result) + plot))
    history.save(os.path.join(out_dir, "soak.history.json"))
    return path


def _markdown(r: dict) -> list[str]:
    verdict = "pass" if not r["violations"] else "FAIL"
    lines = [
        "# Horologe soak",
        "",
        f"Seed {r['seed']}; {r['duration_s'] / 60:.1f} min; {len(r['faults'])} fault windows, one every "
        f"{r['fault_every_s']:g} s; toxiproxy: {r['toxiproxy']}. Verdict: **{verdict}**.",
        "",
        "| acknowledged | consumed | lost | nacked (not retried) | ready-log duplicates | "
        "unexplained redeliveries | inside a live lease | early | cancelled but delivered |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {r['acknowledged']} | {r['consumed']} | {r['lost']} | "
        f"{r['nacked']} ({r['nacked_not_retried']}) | "
        f"{r['duplicates']} | {r['redeliveries_unexplained']} of {r['redeliveries']} | "
        f"{r['inside_lease']} | {r['early']} | "
        f"{r['cancelled_but_delivered']} |",
        "",
        f"- ready logs identical on every node: {r['ready_logs_identical']}",
        f"- lateness by the master's clock: {spread(r['lateness_ms'])}",
        f"- lateness as consumers saw it (true clock): {spread(r['consumer_lateness_ms'])}",
        f"- early by the true clock: {r['early_true_max_ms']} ms at most (allowance "
        f"{r['early_true_allowance_ms']} ms within clock faults, none elsewhere); beyond it: "
        f"{r['early_true_beyond_allowance']}",
        f"- longest stretch without an acknowledged produce: {r['time_to_recover_ms']} ms, from "
        f"{_since_start(r, r['time_to_recover_from_ms'])}",
        f"- the harness's own pauses over {r['harness_pauses']['over_ms']:g} ms (its load and consumers "
        f"wait with it): {_pauses(r)}",
        f"- cancels: {r['cancels']}; produce failures (unacknowledged): {r['produce_failures']}",
        "",
        "RSS of each node process that ran 3 minutes or more (faults restart some), MB:",
        "",
        "| node | pid | ran, min | baseline (its 2nd half-minute to 1.5 min) | last minute | max | growth |",
        "|---|---|---|---|---|---|---|",
        *[
            f"| {g['node']} | {g['pid']} | {g['lived_min']:.1f} | {g['baseline_mb']:.0f} | "
            f"{g['end_mb']:.0f} | {g['max_mb']:.0f} | {g['growth_mb']:+.0f} |"
            for g in r["rss"]
        ],
        "",
        "Faults, from the run's start:",
        "",
        *[
            f"- {(f['start_ms'] - r['start_ms']) / 1000:.0f} s: {f['name']} "
            f"({(f['end_ms'] - f['start_ms']) / 1000:.1f} s)"
            for f in r["faults"]
        ],
        *[f"- {note}" for note in r["notes"]],
        *[f"- **violation**: {v}" for v in r["violations"]],
        "",
    ]
    return lines


def _since_start(r: dict, t_ms: int | None) -> str:
    return "-" if t_ms is None else f"{(t_ms - r['start_ms']) / 1000:.1f} s"


def _pauses(r: dict) -> str:
    pauses = r["harness_pauses"]["pauses"]
    if not pauses:
        return "none"
    t_ms, ms = max(pauses, key=lambda p: p[1])
    return f"{len(pauses)}; the longest {ms} ms, ending at {_since_start(r, t_ms)}"


def _plot(path: str, r: dict, timeline: list, samples: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = r["start_ms"]
    fig, (late_ax, rss_ax) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    for ax in (late_ax, rss_ax):
        shade_faults(ax, r["faults"], start, 60_000)
    if timeline:
        due = np.array([d for d, _ in timeline], dtype=float)
        late = np.array([max(x, 0.5) for _, x in timeline], dtype=float)
        late_ax.scatter(
            (due - start) / 60_000, late, s=1, color="tab:blue", label="lateness (master's clock)"
        )
    late_ax.set_yscale("log")
    late_ax.set_ylabel("lateness, ms")
    late_ax.set_title(f"soak: seed {r['seed']}, {len(r['faults'])} faults")
    late_ax.legend(loc="upper left", fontsize="small")
    for i in sorted({s[1] for s in samples}):
        mine = [s for s in samples if s[1] == i]
        rss_ax.plot(
            [(s[0] - start) / 60_000 for s in mine], [s[3] / MB for s in mine], lw=1, label=f"n{i + 1}"
        )
    rss_ax.set_ylabel("node RSS, MB")
    rss_ax.set_xlabel("minutes since the run began")
    rss_ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
