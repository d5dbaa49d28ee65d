"""The audit's Markdown report and PNG plots (matplotlib, no display needed)."""

from __future__ import annotations

import datetime as dt
import os


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")


def write_report(r, out_dir: str, *, grace_ms: int, days: int) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [
        "# Horologe delivery audit",
        "",
        f"As of the delivery watermark {_utc(r.watermark_ms)} UTC ({r.watermark_ms} ms).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| messages stored | {r.messages:,} |",
        f"| deliveries (ready-log entries, DLQ excluded) | {r.deliveries:,} |",
        f"| messages delivered more than once | {r.duplicated_messages:,} ({r.extra_deliveries:,} extra) |",
        f"| missing (due {grace_ms / 1000:g} s before the watermark, undelivered) | {r.missing_count:,} |",
        f"| cancelled | {r.cancelled:,} |",
        f"| pending in the next {days} days | {int(r.backlog['pending'].sum()) if len(r.backlog) else 0:,} |",
        "",
    ]
    if len(r.lateness):
        lines += [
            "## Lateness by minute of deliver time",
            "",
            "![lateness](lateness.png)",
            "",
            "| minute (UTC) | delivered | p50 ms | p99 ms | max ms |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {_utc(int(x.minute_ms))} | {int(x.delivered):,} | {int(x.p50_ms)} | {int(x.p99_ms)} | "
            f"{int(x.max_ms)} |"
            for x in r.lateness.head(60).itertuples()
        ]
        fig, ax = plt.subplots(figsize=(9, 3.5))
        minutes = [dt.datetime.fromtimestamp(m / 1000, dt.UTC) for m in r.lateness["minute_ms"]]
        ax.plot(minutes, r.lateness["p50_ms"], label="p50")
        ax.plot(minutes, r.lateness["p99_ms"], label="p99")
        ax.plot(minutes, r.lateness["max_ms"], label="max", alpha=0.5)
        ax.set_ylabel("lateness (ms)")
        ax.legend()
        fig.autofmt_xdate()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "lateness.png"), dpi=100)
        plt.close(fig)
    if len(r.backlog):
        lines += ["", f"## Backlog forecast, next {days} days", "", "![backlog](backlog.png)", ""]
        fig, ax = plt.subplots(figsize=(9, 3.5))
        ax.bar(
            [dt.datetime.fromtimestamp(h / 1000, dt.UTC) for h in r.backlog["hour_ms"]],
            r.backlog["pending"],
            width=1 / 24,
        )
        ax.set_ylabel("messages due per hour")
        fig.autofmt_xdate()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "backlog.png"), dpi=100)
        plt.close(fig)
    if len(r.tags):
        lines += ["", f"## Tags (the {len(r.tags)} most used; tags.parquet: all)", "", "| tag | messages |"]
        lines += ["|---|---|", *(f"| {x.tag} | {int(x.messages):,} |" for x in r.tags.itertuples())]
    if len(r.missing):
        lines += ["", f"## Missing deliveries (the first {len(r.missing)} of {r.missing_count:,})", ""]
        lines += ["| topic | id | due (UTC) |", "|---|---|---|"]
        lines += [f"| {x.topic} | {x.id} | {_utc(int(x.slot_ms))} |" for x in r.missing.itertuples()]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
