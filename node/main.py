"""Run one node process: ``horologe node --config node.toml``."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from .app import SERVICE, create_app
from .config import NodeConfig
from .tls import server_context

log = logging.getLogger(__name__)


async def _release_if_master(app: web.Application) -> None:
    """Graceful SIGTERM: a master hands over before it stops (DESIGN §5)."""
    svc = app.get(SERVICE)
    if svc is None or svc.raft is None or not svc.raft.is_master():
        return
    if not svc.linked_peer_ids():
        return  # nobody to hand over to
    try:
        res = await asyncio.wait_for(svc.release_master(None), 4.0)
        log.info("released mastership on shutdown: %s", res)
    except Exception as e:  # noqa: BLE001 - shutting down regardless
        log.warning("could not release mastership on shutdown: %s", e)


def run_node(config: NodeConfig) -> None:
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {config.node_id} %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(config)
    app.on_shutdown.append(_release_if_master)
    host, _, port = config.http.rpartition(":")
    ssl_context = server_context(config.tls_cert, config.tls_key) if config.tls_cert else None
    log.info("serving the HTTP API on %s://%s", config.scheme, config.http)
    web.run_app(
        app,
        host=host,
        port=int(port),
        ssl_context=ssl_context,
        print=None,
        shutdown_timeout=5.0,
        access_log=None,
    )
