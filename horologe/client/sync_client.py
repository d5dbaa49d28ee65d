"""The blocking client: ``Client(["http://127.0.0.1:8081", ...], token=...)``."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

from . import core
from .errors import HorologeError, UnavailableError
from .models import MessageStatus, ReceivedMessage, Scheduled


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # 307s are followed by Client itself, keeping method and body


class Client(core.ClientSettings):
    """Talks to any node; follows the master, and retries across failover for ``retry_s``."""

    def __init__(self, urls, token: str, **settings) -> None:
        """``settings``: admin_token, timeout (s, per request), retry_s (s, across failover)."""
        super().__init__(urls, token, **settings)
        self._opener = urllib.request.build_opener(_NoRedirect)

    def _send(self, method: str, url: str, token: str | None, body):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with self._opener.open(req, timeout=self.timeout) as r:
                return r.status, core.parse_body(r.read()), None
        except urllib.error.HTTPError as e:
            return e.code, core.parse_body(e.read()), e.headers.get("Location")

    def _call(self, method: str, path: str, body=None, *, admin: bool = False, resend: bool = True):
        """One API call; ``resend=False`` for calls that must not be repeated after a timeout."""
        token = self.admin_token if admin else self.token
        deadline = time.monotonic() + self.retry_s
        last: HorologeError = UnavailableError("no node answered")
        while True:
            for base in self.endpoints.order():
                try:
                    status, payload, location = self._send(method, base + path, token, body)
                except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                    timed_out = isinstance(e, socket.timeout | TimeoutError) or "timed out" in str(e)
                    last = self.endpoints.unreachable(base, e, timed_out=timed_out, resend=resend)
                    continue
                outcome = self.endpoints.answered(base, status, payload, location)
                if outcome is core.REDIRECTED:
                    break  # go again, master first
                if not isinstance(outcome, HorologeError):
                    return outcome
                last = outcome
            else:
                if time.monotonic() > deadline:
                    raise last
                time.sleep(0.2)

    # -- producing ----------------------------------------------------------------

    def produce(self, topic: str, body: bytes | str, **options) -> Scheduled:
        """Schedule one message. Options: tags, deliver_at, deliver_after, delay_level, key, headers."""
        msg = core.message_body(topic, body, **options)
        return core.to_scheduled(self._call("POST", "/v1/messages", msg), topic)

    def produce_batch(self, messages: list[dict]) -> list[Scheduled | HorologeError]:
        """Schedule many; each item is the keyword arguments of :meth:`produce`."""
        bodies = [core.message_body(**m) for m in messages]
        res = self._call("POST", "/v1/messages/batch", {"messages": bodies})["results"]
        return core.batch_results(res, bodies)

    def status(self, message_id: str) -> MessageStatus:
        return core.to_status(self._call("GET", f"/v1/messages/{message_id}"))

    def cancel(self, message_id: str) -> None:
        """Cancel; raises AlreadyDeliveredError (409) or NotFoundError (404)."""
        self._call("DELETE", f"/v1/messages/{message_id}")

    def cancel_key(self, topic: str, key: str) -> None:
        from urllib.parse import urlencode

        self._call("DELETE", f"/v1/messages?{urlencode({'topic': topic, 'key': key})}")

    # -- consuming ----------------------------------------------------------------

    def pull(
        self,
        topic: str,
        group: str,
        *,
        tags: str | None = None,
        max: int = 32,
        wait_ms: int = 0,
        visibility_ms: int = 30_000,
    ) -> list[ReceivedMessage]:
        body = core.pull_body(group, tags, max, wait_ms, visibility_ms)
        res = self._call("POST", f"/v1/topics/{_quote(topic)}/pull", body)
        kept, stray = core.split_by_tags(res["messages"], tags)
        if stray:
            self.ack(topic, group, stray)
        return kept

    def ack(self, topic: str, group: str, receipts: list[str]) -> None:
        self._call("POST", f"/v1/topics/{_quote(topic)}/ack", {"group": group, "receipts": receipts})

    def nack(self, topic: str, group: str, receipts: list[str]) -> dict:
        return self._call(
            "POST", f"/v1/topics/{_quote(topic)}/nack", {"group": group, "receipts": receipts}, resend=False
        )

    # -- admin --------------------------------------------------------------------

    def node_status(self) -> dict:
        return self._call("GET", "/admin/status", admin=True)

    def release_master(self, to: str | None = None) -> dict:
        return self._call("POST", "/admin/release-master", {"to": to} if to else {}, admin=True, resend=False)


def _quote(topic: str) -> str:
    from urllib.parse import quote

    return quote(topic, safe="")
