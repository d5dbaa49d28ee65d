"""Per-scenario JSON and PNG timeline, and the Markdown table over all scenarios."""

from __future__ import annotations

import json
import os

COLUMNS = (
    ("lost", "lost"),
    ("duplicates", "duplicates"),
    ("redeliveries", "redeliveries (unexplained)"),
    ("inside_lease", "inside a live lease"),
    ("early", "early"),
    ("lateness_p99", "lateness p99 ms"),
    ("time_to_recover_ms", "time to recover ms"),
)


def write_scenario(out_dir: str, name: str, result: dict) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot_timeline(os.path.join(out_dir, f"{name}.png"), name, result)


def plot_timeline(path: str, name: str, result: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = result["start_ms"]
    fig, ax = plt.subplots(figsize=(9, 3.5))
    shade_faults(ax, result["faults"], start, 1000)
    if result["timeline"]:
        xs = [(due - start) / 1000 for due, _ in result["timeline"]]
        ys = [max(late, 0.5) for _, late in result["timeline"]]
        ax.scatter(xs, ys, s=3, color="tab:blue", label="lateness (master's clock)")
    ax.set_yscale("log")
    ax.set_xlabel("deliver time, s since the run began")
    ax.set_ylabel("lateness, ms")
    ax.set_title(f"{name}: seed {result['seed']}")
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def shade_faults(ax, faults: list[dict], start_ms: int, unit_ms: int) -> None:
    """Shade each fault's window on a time axis in units of ``unit_ms`` since ``start_ms``."""
    for k, f in enumerate(faults):
        ax.axvspan(
            (f["start_ms"] - start_ms) / unit_ms,
            (f["end_ms"] - start_ms) / unit_ms,
            color="tab:red",
            alpha=0.15,
            label="fault" if k == 0 else None,
        )


def _cell(result: dict, key: str) -> str:
    if key == "redeliveries":
        return f"{result['redeliveries']} ({result['redeliveries_unexplained']})"
    if key == "lateness_p99":
        p99 = result["lateness_ms"]["p99"]
        return "-" if p99 is None else f"{p99:.0f}"
    value = result[key]
    return "-" if value is None else str(value)


def spread(p: dict) -> str:
    if not p["n"]:
        return "none delivered"
    return f"p50 {p['p50']:.0f} ms, p99 {p['p99']:.0f} ms, max {p['max']:.0f} ms over {p['n']}"


def write_summary(out_dir: str, results: dict[str, dict]) -> str:
    """REPORT.md: one row per scenario, then each scenario's details and timeline."""
    lines = [
        "# Horologe chaos report",
        "",
        "| scenario | verdict | acked | " + " | ".join(title for _, title in COLUMNS) + " |",
        "|---|---|---|" + "---|" * len(COLUMNS),
    ]
    for name, r in results.items():
        verdict = "pass" if not r["violations"] else "FAIL"
        cells = [_cell(r, key) for key, _ in COLUMNS]
        lines.append(f"| {name} | {verdict} | {r['acknowledged']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "*lateness* runs from `max(deliver_at, sent)` to the firing master's clock; *time to",
        "recover* is the longest stretch without an acknowledged produce from the first",
        "fault on; a *redelivery* is unexplained only if an earlier hand-out of that message",
        "had been acked before the pull that got it again was sent.",
        "",
    ]
    for name, r in results.items():
        lines += [
            f"## {name}",
            "",
            f"Seed {r['seed']}; {r['duration_s']:.0f} s; toxiproxy: {r['toxiproxy']}.",
            "",
            *[f"- {f['name']}: {(f['end_ms'] - f['start_ms']) / 1000:.1f} s" for f in r["faults"]],
            *[f"- {note}" for note in r["notes"]],
            f"- cancels: {r['cancels']}; produce failures (unacknowledged): {r['produce_failures']}",
            *(
                [
                    f"- reschedules: {r['reschedules']} over {r['rescheduled']} messages; handed out or "
                    f"fired at a time they were moved from: {r['rescheduled_at_old_time']}"
                ]
                if r.get("reschedules")
                else []
            ),
            *(
                [
                    f"- schedules: {r['schedules']}, {r['schedule_fires_expected']} fire times in their "
                    f"windows, {r['schedule_fires_received']} received; skipped "
                    f"{r['schedule_skipped']}, fired twice {r['schedule_fired_twice']}, early "
                    f"{r['schedule_early']}, keys naming no fire time {r['schedule_unexpected']}; "
                    f"redelivered {r['schedule_redeliveries']}"
                ]
                if r.get("schedules")
                else []
            ),
            f"- lateness by the master's clock: {spread(r['lateness_ms'])}; as consumers saw it (true "
            f"clock): {spread(r['consumer_lateness_ms'])}",
            f"- early by the true clock: {r['early_true_max_ms']} ms "
            f"(allowance {r['early_true_allowance_ms']} ms)",
            *[f"- **violation**: {v}" for v in r["violations"]],
            "",
            f"![{name}]({name}.png)",
            "",
        ]
    path = os.path.join(out_dir, "REPORT.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path
