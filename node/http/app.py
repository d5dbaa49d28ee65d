"""The aiohttp app factory: the middleware, the service's life in the app, and the routes
of DESIGN §6, each module's table in turn (messages, pending, consumers, admin, health,
schedules, subscriptions; the dashboard's files)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from ..clock import Clock, system_clock
from ..config import NodeConfig
from ..ops.loop_lag import LoopLag
from ..ops.metrics import DUE_WITHIN_MS, NodeMetrics, Sources
from ..service import NodeService
from . import admin, consumers, dashboard, health, messages, pending, schedules, subscriptions
from .access_log import request_ids
from .common import CONFIG, DAMAGE, FORWARDER, LOOP_LAG, METRICS, OPENAPI_JSON, SCOPES, SERVICE
from .forwarding import Forwarder, cluster_target, forward_middleware
from .middleware import errors_and_auth
from .openapi.spec import document_json
from .route_table import scopes


def create_app(config: NodeConfig, *, clock: Clock | None = None) -> web.Application:
    app = web.Application(
        middlewares=[
            request_ids(config.access_log),
            errors_and_auth,
            forward_middleware(lambda: app.get(FORWARDER)),
        ],
        client_max_size=config.max_request_bytes,
    )
    app[CONFIG] = config
    m = app[METRICS] = NodeMetrics(config.metrics_topic_cap)

    async def service_ctx(app: web.Application) -> AsyncIterator[None]:
        svc = NodeService(
            config,
            clock or system_clock(config.clock_offset_ms),
            m.observers(),
        )
        await svc.start()
        app[SERVICE] = svc
        app[DAMAGE] = svc.damage
        m.read_from(
            Sources(
                svc.admin_status,
                svc.leader_changes,
                svc.stale_answers,
                svc.view.pending_by_topic,
                svc.view.unacked_by_group,
                svc.view.dlq_by_group,
                lambda: svc.view.pending_due(svc.clock(), tuple(DUE_WITHIN_MS.values())),
                lambda: svc.hold.counts,
                (lambda: app[LOOP_LAG].figures()) if config.loop_lag_probe_ms else None,
            )
        )
        yield
        m.read_from(None)
        await svc.stop()

    async def loop_lag_ctx(app: web.Application) -> AsyncIterator[None]:
        probe = app[LOOP_LAG] = LoopLag(config.loop_lag_probe_ms)
        task = asyncio.create_task(probe.run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def forwarder_ctx(app: web.Application) -> AsyncIterator[None]:
        svc = app[SERVICE]
        connector = aiohttp.TCPConnector(ssl=svc.peer_ssl)
        async with aiohttp.ClientSession(connector=connector) as session:

            def peers() -> dict[str, str]:
                return {m.node_id: config.http_url(m.http) for m in svc.members() if m.raft != config.raft}

            target = cluster_target(config.node_id, peers, svc.is_master, svc.leader_http)
            app[FORWARDER] = Forwarder(target, session)
            yield

    app.cleanup_ctx.append(service_ctx)
    app.cleanup_ctx.append(forwarder_ctx)
    if config.loop_lag_probe_ms:
        app.cleanup_ctx.append(loop_lag_ctx)
    operations: dict[tuple[str, str], dict] = {}
    for module in (messages, pending, consumers, admin, health, schedules, subscriptions):
        app.add_routes(module.routes)
        operations.update(module.routes.operations)
    dashboard.add_routes(app)
    operations.update(dashboard.routes.operations)
    app[OPENAPI_JSON] = document_json(operations)
    app[SCOPES] = scopes(app, operations)
    return app
