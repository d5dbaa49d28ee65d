"""Node stand-ins for client tests: an ``http.server`` handler's JSON answer, and its
request's JSON or msgpack body."""

from __future__ import annotations

import http.server
import json

import msgpack


def read_body(handler: http.server.BaseHTTPRequestHandler):
    """The request's body, decoded as its ``Content-Type`` says (the SDK sends a produce
    in msgpack, RawClient its JSON)."""
    raw = handler.rfile.read(int(handler.headers["Content-Length"]))
    return (
        msgpack.unpackb(raw) if handler.headers["Content-Type"] == "application/msgpack" else json.loads(raw)
    )


def answer_json(handler: http.server.BaseHTTPRequestHandler, status: int, body) -> None:
    out = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(out)))
    handler.end_headers()
    handler.wfile.write(out)
