"""Run one node process: ``horologe node --config node.toml``."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys

from .config import NodeConfig
from .data_lock import lock_data_dir
from .http.app import create_app
from .http.common import METRICS, SERVICE, Application
from .http.server import connection_bound, serve, stop_serving
from .ops.log_setup import configure_logging
from .tls import server_context

log = logging.getLogger(__name__)

# How long a thread holding the GIL runs before another that waits for it gets a turn
# (Python's default: 5 ms). The Raft tick thread waits for it at each step of a commit
# while the event loop is busy, as it is when the master pushes; at 1 ms the receiver's
# lateness at 2,000 pushes/s fell in each of four paired runs (docs/benchmarks.md).
SWITCH_INTERVAL_S = 0.001


async def _stop_on_signals(app: Application) -> None:
    """SIGTERM or SIGINT starts a graceful stop; one that follows (a supervisor that repeats
    itself, a second Ctrl-C) is ignored, until the process ends. aiohttp's own handler
    would raise again in the middle of the clean-up, and the loop's handlers go when the
    loop closes; either way a second signal could end the node before its store closed."""
    loop = asyncio.get_running_loop()
    stopping = False

    def on_signal(signum: int, _frame) -> None:  # main thread, between bytecodes: no locks here
        nonlocal stopping
        with contextlib.suppress(RuntimeError):  # the loop has closed: the process is ending
            if stopping:
                loop.call_soon_threadsafe(
                    log.warning, "already stopping (%s ignored)", signal.Signals(signum).name
                )
            else:
                stopping = True
                loop.call_soon_threadsafe(log.info, "%s: stopping", signal.Signals(signum).name)
                loop.call_soon_threadsafe(stop_serving)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)


# Young, middle and old generation thresholds (gc.set_threshold); Python's are 700, 10, 10.
GC_THRESHOLDS = (10_000, 20, 100)


async def _freeze_what_startup_made(app: Application) -> None:
    """Move what exists once the node has started (modules, classes, the app, the service)
    to the permanent generation, out of every later collection, and collect the young
    generation after 10,000 new container objects rather than 700.

    A full collection over what startup made took 30-90 ms here, with the GIL held: the
    event loop and the Raft tick thread both stood still, 6-27 times a minute under
    ingest, on every node. After the freeze, a produce batch of 1,000 messages still set
    off several young collections while its objects were alive, each moving them a
    generation up to be scanned again: loading 200,000 messages cost the three nodes
    1.5-1.9 s of collections, 16-32 of them over 10 ms. With 10,000, most of those objects
    are freed by their reference counts before a collection comes, and the same load
    cost 5-6 ms of collections, none over 10 ms (``horologe_gc_pause_seconds``). What
    requests make is still collected; cyclic garbage waits for at most 10,000 more
    objects."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


RELEASE_ON_SHUTDOWN_S = 4.0  # the most a graceful stop spends handing over


async def _release_if_master(app: Application) -> None:
    """Graceful SIGTERM: a master hands over before it stops (DESIGN §5)."""
    svc = app.get(SERVICE)
    if svc is None or not svc.is_master():
        return
    if not svc.linked_peer_ids():
        return  # nobody to hand over to
    try:
        res = await asyncio.wait_for(release_once_serving(svc), RELEASE_ON_SHUTDOWN_S)
        log.info("released mastership on shutdown: %s", res)
    except TimeoutError:
        log.warning("could not release mastership on shutdown within %g s", RELEASE_ON_SHUTDOWN_S)
    except Exception as e:  # noqa: BLE001 - shutting down regardless
        log.warning("could not release mastership on shutdown: %s", e)


async def release_once_serving(svc) -> dict:
    """``svc.handover.release(None)``, held and asked again while this node still leads but
    may not serve for a moment (503 no_master: its read lease lapsed, as after a slow fsync
    on a loaded disk; node/master_hold.py). Without it, a stop at such a moment handed
    nothing over, and the cluster waited out an election."""
    return await svc.hold.through(lambda: svc.handover.release(None))


def run_node(config: NodeConfig) -> None:
    lock_data_dir(config.data_dir)  # held until the process ends (node/data_lock.py)
    configure_logging(config.node_id, config.log_format)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    app = create_app(config)
    app[METRICS].gc_pauses.install()
    app.on_startup.append(_stop_on_signals)
    app.on_startup.append(_freeze_what_startup_made)  # after the service started (cleanup_ctx)
    app.on_shutdown.append(_release_if_master)
    host, _, port = config.http.rpartition(":")
    ssl_context = server_context(config.tls_cert, config.tls_key) if config.tls_cert else None
    serve(
        app,
        host=host,
        port=int(port),
        ssl_context=ssl_context,
        max_connections=connection_bound(config.http_max_connections),
        shutdown_timeout=5.0,
        access_log=None,
        # aiohttp closes a connection that is idle this long, counting from when it opens
        # too, and a request only counts once its headers are whole (dripped header lines
        # do not reset it). Request lines, header fields and their count are bounded by
        # aiohttp's parser (8190 bytes, 8190 bytes, 128): beyond, 400 and the connection
        # closes.
        keepalive_timeout=config.http_idle_timeout_ms / 1000,
    )
    log.info("stopped")
