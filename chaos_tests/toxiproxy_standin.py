"""A small stand-in for toxiproxy's server, for machines where its binary cannot be had.

It speaks the part of toxiproxy's HTTP API that the chaos suite and the real
``toxiproxy-python`` client use, with the same JSON shapes and status codes:

    GET  /version                        GET  /proxies          POST /proxies (201; 409 if it exists)
    GET  /proxies/{name}                 POST /proxies/{name}   {"enabled": bool}
    DELETE /proxies/{name} (204)         POST /reset (204): every proxy enabled, every toxic removed
    GET  /proxies/{name}/toxics          POST /proxies/{name}/toxics   DELETE /proxies/{name}/toxics/{toxic}

Toxics, on the ``upstream`` (client to server) or ``downstream`` stream, each applied to a
connection with probability ``toxicity``, and to live connections as soon as added:

    latency     {latency, jitter} ms added to every chunk, counted from its arrival
    timeout     data is dropped; the connection closes after {timeout} ms without data
                (0: never), and when the toxic is removed
    reset_peer  {timeout} ms, then the connection is reset (RST)
    bandwidth   {rate} KB/s
    limit_data  {bytes}: the connection closes once that many bytes have passed

Run it with ``python chaos_tests/toxiproxy_standin.py --port 8474 [--config proxies.json]``
(the proxies to create at start, in the format of toxiproxy's ``-config``; the image
``deploy/toxiproxy-standin.Dockerfile`` runs it so for docker-compose). A real toxiproxy
server (``TOXIPROXY_URL``, or ``toxiproxy-server`` on PATH) is preferred when present.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import struct
import time
from dataclasses import dataclass, field

from aiohttp import web

VERSION = "2.9.0-horologe-standin"
TOXIC_TYPES = {"latency", "timeout", "reset_peer", "bandwidth", "limit_data"}
CHUNK = 32 * 1024
POLL_S = 0.02  # how often a link looks again at its toxics while idle


@dataclass
class Toxic:
    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict

    def json(self) -> dict:
        return {
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
            "attributes": self.attributes,
        }


@dataclass
class Proxy:
    name: str
    listen: str
    upstream: str
    enabled: bool = True
    toxics: dict[str, Toxic] = field(default_factory=dict)
    server: asyncio.AbstractServer | None = None
    links: dict = field(default_factory=dict)  # (client, upstream) writers -> per-toxic rolls

    def json(self) -> dict:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [t.json() for t in self.toxics.values()],
        }

    async def start(self) -> None:
        host, _, port = self.listen.rpartition(":")
        self.server = await asyncio.start_server(self._accept, host, int(port), reuse_address=True)
        self.listen = f"{host}:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        for pair in list(self.links):
            _close(pair)
        self.links.clear()

    def remove_toxic(self, name: str) -> Toxic | None:
        """Remove a toxic; like toxiproxy, removing a ``timeout`` closes the links it held."""
        t = self.toxics.pop(name, None)
        if t is not None and t.type == "timeout":
            for pair, rolls in list(self.links.items()):
                if rolls.get(name):
                    _close(pair)
        return t

    async def _accept(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        host, _, port = self.upstream.rpartition(":")
        try:
            ur, uw = await asyncio.open_connection(host, int(port))
        except OSError:
            cw.close()
            return
        rolls: dict[str, bool] = {}  # per connection and toxic: does it apply (toxicity)?
        self.links[(cw, uw)] = rolls
        pumps = [
            asyncio.ensure_future(self._pump(cr, uw, "upstream", cw, rolls)),
            asyncio.ensure_future(self._pump(ur, cw, "downstream", cw, rolls)),
        ]
        # Whichever direction ends first (EOF, or a toxic closing it) ends the connection.
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        self.links.pop((cw, uw), None)
        _close((cw, uw))

    def _active(self, stream: str, rolls: dict) -> list[Toxic]:
        out = []
        for t in list(self.toxics.values()):
            if t.stream == stream:
                if t.name not in rolls:
                    rolls[t.name] = random.random() < t.toxicity
                if rolls[t.name]:
                    out.append(t)
        return out

    async def _pump(self, reader, writer, stream: str, client_writer, rolls: dict) -> None:
        """Chunks are stamped as they arrive and pass the toxics in order, as in toxiproxy."""
        chunks: asyncio.Queue = asyncio.Queue()
        reading = asyncio.ensure_future(_read_into(reader, chunks))
        try:
            await self._deliver(chunks, writer, stream, client_writer, rolls)
        finally:
            reading.cancel()

    async def _deliver(self, chunks: asyncio.Queue, writer, stream: str, client_writer, rolls: dict) -> None:
        passed = 0
        cut_since = None
        while True:
            cuts = [t for t in self._active(stream, rolls) if t.type == "timeout"]
            if cuts:  # toxiproxy drops the data; a limit closes the link once it runs out
                cut_since = cut_since or time.monotonic()  # an idle limit: each chunk restarts it
                limit = cuts[0].attributes.get("timeout", 0)
                if limit and (time.monotonic() - cut_since) * 1000 >= limit:
                    raise ConnectionError("timeout toxic")
            else:
                cut_since = None
            try:
                arrived, data = await asyncio.wait_for(chunks.get(), POLL_S)
            except TimeoutError:
                continue
            if not data:
                writer.close()
                return
            if cuts:
                cut_since = time.monotonic()
                continue
            for t in self._active(stream, rolls):
                a = t.attributes
                if t.type == "latency":
                    jitter = a.get("jitter", 0)
                    delay = max(0, a.get("latency", 0) + random.uniform(-jitter, jitter)) / 1000
                    await asyncio.sleep(max(0.0, arrived + delay - time.monotonic()))
                elif t.type == "bandwidth" and a.get("rate", 0) > 0:
                    await asyncio.sleep(len(data) / (a["rate"] * 1024))
                elif t.type == "reset_peer":
                    await asyncio.sleep(a.get("timeout", 0) / 1000)
                    _reset(client_writer)
                    raise ConnectionResetError("reset_peer toxic")
                elif t.type == "limit_data":
                    room = a.get("bytes", 0) - passed
                    if room <= len(data):
                        writer.write(data[: max(0, room)])
                        await writer.drain()
                        raise ConnectionError("limit_data toxic")
            writer.write(data)
            await writer.drain()
            passed += len(data)


async def _read_into(reader: asyncio.StreamReader, chunks: asyncio.Queue) -> None:
    """Read until EOF (queued as b""), stamping each chunk with its arrival time."""
    while True:
        try:
            data = await reader.read(CHUNK)
        except ConnectionError:
            data = b""
        await chunks.put((time.monotonic(), data))
        if not data:
            return


def _close(pair: tuple) -> None:
    for w in pair:
        w.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


PROXIES = web.AppKey("proxies", dict)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message, "status": status}, status=status)


def _proxy(request: web.Request) -> Proxy | None:
    return request.app[PROXIES].get(request.match_info["name"])


async def version(request: web.Request) -> web.Response:
    return web.Response(text=VERSION)


async def list_proxies(request: web.Request) -> web.Response:
    return web.json_response({n: p.json() for n, p in request.app[PROXIES].items()})


async def add_proxy(proxies: dict[str, Proxy], body: dict) -> web.Response:
    """Create the proxy ``body`` describes and start it when enabled; the answer of POST /proxies."""
    name, upstream = body.get("name"), body.get("upstream")
    if not name or not upstream:
        return _error(400, "name and upstream are required")
    if name in proxies:
        return _error(409, "proxy already exists")
    p = Proxy(name, body.get("listen") or "127.0.0.1:0", upstream, body.get("enabled", True))
    if p.enabled:
        try:
            await p.start()
        except OSError as e:
            return _error(500, f"listen {p.listen}: {e}")
    proxies[name] = p
    return web.json_response(p.json(), status=201)


async def create_proxy(request: web.Request) -> web.Response:
    return await add_proxy(request.app[PROXIES], await request.json())


async def get_proxy(request: web.Request) -> web.Response:
    p = _proxy(request)
    return web.json_response(p.json()) if p else _error(404, "proxy not found")


async def update_proxy(request: web.Request) -> web.Response:
    p = _proxy(request)
    if p is None:
        return _error(404, "proxy not found")
    body = await request.json()
    if "enabled" in body and bool(body["enabled"]) != p.enabled:
        p.enabled = bool(body["enabled"])
        await (p.start() if p.enabled else p.stop())
    return web.json_response(p.json())


async def delete_proxy(request: web.Request) -> web.Response:
    p = request.app[PROXIES].pop(request.match_info["name"], None)
    if p is None:
        return _error(404, "proxy not found")
    await p.stop()
    return web.Response(status=204)


async def list_toxics(request: web.Request) -> web.Response:
    p = _proxy(request)
    return web.json_response([t.json() for t in p.toxics.values()]) if p else _error(404, "proxy not found")


async def add_toxic(request: web.Request) -> web.Response:
    p = _proxy(request)
    if p is None:
        return _error(404, "proxy not found")
    body = await request.json()
    kind, stream = body.get("type"), body.get("stream", "downstream")
    if kind not in TOXIC_TYPES or stream not in ("upstream", "downstream"):
        return _error(400, f"unsupported toxic {kind!r} on stream {stream!r}")
    name = body.get("name") or f"{kind}_{stream}"
    if name in p.toxics:
        return _error(409, "toxic already exists")
    t = Toxic(name, kind, stream, float(body.get("toxicity", 1.0)), dict(body.get("attributes") or {}))
    p.toxics[name] = t
    return web.json_response(t.json())


async def delete_toxic(request: web.Request) -> web.Response:
    p = _proxy(request)
    if p is None or p.remove_toxic(request.match_info["toxic"]) is None:
        return _error(404, "toxic not found")
    return web.Response(status=204)


async def reset(request: web.Request) -> web.Response:
    for p in request.app[PROXIES].values():
        for name in list(p.toxics):
            p.remove_toxic(name)
        if not p.enabled:
            p.enabled = True
            await p.start()
    return web.Response(status=204)


def create_app(config: list[dict] | None = None) -> web.Application:
    """The API server; ``config`` lists proxies to create at start, as toxiproxy's ``-config`` file does."""
    app = web.Application()
    app[PROXIES] = {}

    async def proxies_ctx(app: web.Application):
        for spec in config or []:
            answer = await add_proxy(app[PROXIES], spec)
            if answer.status != 201:
                raise RuntimeError(f"config proxy {spec.get('name')!r}: {answer.text}")
        yield
        for p in app[PROXIES].values():
            await p.stop()

    app.cleanup_ctx.append(proxies_ctx)
    app.router.add_get("/version", version)
    app.router.add_get("/proxies", list_proxies)
    app.router.add_post("/proxies", create_proxy)
    app.router.add_get("/proxies/{name}", get_proxy)
    app.router.add_post("/proxies/{name}", update_proxy)
    app.router.add_delete("/proxies/{name}", delete_proxy)
    app.router.add_get("/proxies/{name}/toxics", list_toxics)
    app.router.add_post("/proxies/{name}/toxics", add_toxic)
    app.router.add_delete("/proxies/{name}/toxics/{toxic}", delete_toxic)
    app.router.add_post("/reset", reset)
    return app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8474)
    ap.add_argument("--config", help="JSON list of proxies to create at start, as toxiproxy's -config")
    args = ap.parse_args()
    config = None
    if args.config:
        with open(args.config) as f:
            config = json.load(f)
    web.run_app(create_app(config), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
