"""The report: one JSON line per figure, a table with Horologe ÷ peer, and a plot."""

from __future__ import annotations

import json
import math

HIGHER_IS_BETTER = ("msg/s",)
DURABLE = "redis (appendfsync always)"  # the durable peer's system name
DURABLE_PEER_WORKLOADS = ("single", "ingest", "sustained")  # also run on the durable peer


def _row(workload: str, label: str, name: str, h: float, r: float | None) -> dict:
    counted = "(count)" in name  # a check's tally, not a speed: no ratio
    ratio = h / r if not counted and r not in (None, 0) and not math.isnan(r) else None
    better = "higher" if any(k in name for k in HIGHER_IS_BETTER) else "lower"
    return {
        "workload": workload,
        "figure": label,
        "horologe": h,
        "redis": r,
        "ratio": ratio,
        "better": better,
    }


def rows(results: dict[str, dict[str, dict]]) -> list[dict]:
    """``results[workload][system]`` -> one row per figure, with the ratio; Horologe run
    with other node settings (``horologe [fsync = true]``) gets rows labelled with them."""
    out = []
    for workload, by_system in results.items():
        for system, figures in by_system.items():
            if "_error" in figures:
                out.append({"workload": workload, "figure": f"FAILED on {system}: {figures['_error']}"})
        peer = by_system.get("redis", {})
        ours = [(s, f) for s, f in by_system.items() if s == "horologe" or s.startswith("horologe [")]
        for system, figures in ours:
            settings = system[len("horologe") :]
            for name, h in figures.items():
                if not name.startswith("_"):
                    out.append(_row(workload, f"{name}{settings}", name, h, peer.get(name)))
        durable = by_system.get(DURABLE, {})
        for name, h in by_system.get("horologe", {}).items():
            if name in durable:
                out.append(_row(workload, f"{name} [vs durable peer]", name, h, durable[name]))
        for name, value in by_system.get("redis (10 ms poll)", {}).items():
            if not name.startswith("_"):
                out.append({"workload": workload, "figure": f"{name} [redis 10 ms poll]", "redis": value})
    return out


def write_json_lines(path: str, table: list[dict], meta: dict) -> None:
    with open(path, "w") as f:
        for row in table:
            f.write(json.dumps({**meta, **row}) + "\n")


def _fmt(v) -> str:
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def markdown(table: list[dict]) -> str:
    lines = ["| workload | figure | Horologe | Redis peer | Horologe ÷ peer |", "|---|---|---|---|---|"]
    for r in table:
        ratio = "–" if r.get("ratio") is None else f"{r['ratio']:.2f} ({r['better']} is better)"
        values = f"{_fmt(r.get('horologe'))} | {_fmt(r.get('redis'))}"
        lines.append(f"| {r['workload']} | {r['figure']} | {values} | {ratio} |")
    return "\n".join(lines)


def plot(path: str, results: dict[str, dict[str, dict]]) -> bool:
    """Lateness distributions and RSS against pending, both systems; False if no data."""
    late = results.get("lateness", {})
    mem = results.get("memory", {})
    if not late and not mem:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = [(draw, data) for draw, data in ((_lateness_panel, late), (_memory_panel, mem)) if data]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (draw, data) in zip(axes[0], panels, strict=True):
        draw(ax, data, np)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def _lateness_panel(a, late: dict, np) -> None:
    for system, figures in late.items():
        samples = np.sort(np.asarray(figures.get("_samples", []), dtype=float))
        if len(samples):
            a.plot(samples, np.linspace(0, 1, len(samples)), label=system)
    if a.lines:
        a.legend()
    a.set_xscale("symlog", linthresh=1)
    a.set_xlabel("received lateness (ms)")
    a.set_ylabel("fraction of messages")
    a.set_title("lateness, 2,000 msg/s falling due")


def _memory_panel(b, mem: dict, _np) -> None:
    for system, figures in mem.items():
        pts = figures.get("_samples", [])
        if pts:
            b.plot([n for n, _ in pts], [kb / 1024 for _, kb in pts], marker="o", label=system)
    b.set_xlabel("pending messages")
    b.set_ylabel("largest process RSS (MB)")
    b.set_title("memory as pending grows")
    if b.lines:
        b.legend()
