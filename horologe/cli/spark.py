"""``horologe spark ...``: batch jobs on Spark (the [spark] extra)."""

from __future__ import annotations

import sys

import click

from horologe.cli._common import ca_option, token_option, url_option
from horologe.client import CertificateError, RawClient, UnavailableError
from horologe.client.calls import node_urls
from horologe.pipeline.column_mapping import ColumnMapping
from horologe.pipeline.errors import PipelineError
from horologe.pipeline.schedule import LOCAL_MASTER, run_schedule, schedule_session
from horologe.pipeline.spark_session import spark_session
from horologe.storage import StorageError


@click.group()
def spark() -> None:
    """Batch jobs on Spark: bulk scheduling from files, audits of a node's store.

    Local mode by default (--master local[*]); any Spark master URL works. Needs the
    [spark] extra (pip install -e '.[spark]') and Java 17.
    """


def _check_certificates(urls: list[str], ca: str | None) -> None:
    """Say here that a node's certificate does not verify, not from inside a Spark task."""
    try:
        raw = RawClient(timeout=5.0, ca=ca)
    except ValueError as e:
        raise click.UsageError(str(e)) from e
    with raw:
        for u in urls:
            if u.startswith("https://"):
                try:
                    raw.get(f"{u.rstrip('/')}/healthz")
                except UnavailableError:
                    pass  # a node down now may be up by then: the posting retries
                except CertificateError as e:
                    raise click.ClickException(str(e)) from e


@spark.command("schedule")
@click.argument("input_path", type=click.Path(exists=True))
@url_option
@token_option
@ca_option
@click.option(
    "--format", "fmt", type=click.Choice(["parquet", "csv", "json"]), help="Default: from the file name."
)
@click.option("--topic", help="One topic for every row ...")
@click.option("--topic-col", help="... or the column that names it.")
@click.option("--body-col", required=True, help="Column holding the body (text).")
@click.option("--tags-col", help="Column of tags: a list, or a comma-separated string.")
@click.option("--deliver-at-col", help="Column of deliver times: epoch ms or ISO-8601 with a zone.")
@click.option("--deliver-after-col", help="Column of delays: ms or 500ms / 90s / 5m / 2h / 3d.")
@click.option("--delay-level-col", help="Column of RocketMQ delay levels 1..18.")
@click.option("--key-col", help="Column of producer keys (default: a hash of the row's content).")
@click.option(
    "--rejects", default="rejects", show_default=True, help="Folder for rejected rows (JSON lines)."
)
@click.option(
    "--batch-size",
    default=1000,
    show_default=True,
    type=click.IntRange(1),
    help="Messages per request (fewer if they pass 3 MiB; halved while a node answers 413).",
)
@click.option(
    "--master",
    default=LOCAL_MASTER,
    show_default=True,
    help="Spark master URL (local[N,F]: N cores, a failed task tried F times in all).",
)
def spark_schedule(
    input_path,
    url,
    token,
    ca,
    fmt,
    topic,
    topic_col,
    body_col,
    tags_col,
    deliver_at_col,
    deliver_after_col,
    delay_level_col,
    key_col,
    rejects,
    batch_size,
    master,
) -> None:
    """Schedule every valid row of INPUT_PATH (a file or a folder of them) as a message.

    Rows are validated first; bad ones are written to --rejects with the reason and never
    sent. Valid rows are posted from the executors with retries and per-row keys, so a
    rerun or a retried task never schedules a row twice (a key lives until 24 h after its
    message's delivery hour).
    """
    urls = node_urls(url)
    _check_certificates(urls, ca)
    try:
        mapping = ColumnMapping(
            body_col=body_col,
            topic=topic,
            topic_col=topic_col,
            tags_col=tags_col,
            deliver_at_col=deliver_at_col,
            deliver_after_col=deliver_after_col,
            delay_level_col=delay_level_col,
            key_col=key_col,
        )
        session = schedule_session(master)
        with click.progressbar(length=1, label="Spark tasks", file=sys.stderr) as bar:

            def progress(done: int, total: int) -> None:
                bar.length = total
                bar.update(done - bar.pos)

            s = run_schedule(
                session,
                input_path,
                mapping,
                urls,
                token or "",
                rejects,
                fmt=fmt,
                batch_size=batch_size,
                ca=ca,
                on_progress=progress,
            )
    except PipelineError as e:
        raise click.ClickException(str(e)) from e
    click.echo(
        f"rows {s.rows:,}: accepted {s.accepted:,}, rejected {s.rejected:,} (see {s.rejects_path}), "
        f"refused by the server {s.refused:,}; batches retried {s.retried:,}"
    )
    if s.refused:
        raise SystemExit(1)


@spark.command("audit")
@click.argument("data_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--out", default="audit", show_default=True, help="Folder for Parquet tables, report.md, PNGs.")
@click.option(
    "--grace-ms",
    default=60_000,
    show_default=True,
    help="How late a delivery may be before it counts as missing.",
)
@click.option("--days", default=7, show_default=True, help="Backlog forecast horizon.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
def spark_audit(data_dir, out, grace_ms, days, master) -> None:
    """Audit one node's DATA_DIR (safe while it runs): lateness per minute, duplicates,
    missing deliveries, cancels, backlog per hour ahead, tags."""
    # Deferred: the audit imports pandas and pyspark (the [spark] extra) when it loads,
    # and `horologe spark --help` or `spark schedule --help` must work without them.
    from horologe.pipeline.audit import run_audit

    try:
        r = run_audit(spark_session(master, "horologe-audit"), data_dir, out, grace_ms=grace_ms, days=days)
    except StorageError as e:
        raise click.ClickException(str(e)) from e
    click.echo(
        f"{r.messages:,} messages, {r.deliveries:,} deliveries; duplicates {r.duplicated_messages:,}, "
        f"missing {r.missing_count:,}, cancelled {r.cancelled:,}; report: {out}/report.md"
    )
