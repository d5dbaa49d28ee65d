"""The asyncio client: ``async with AsyncClient([...], token=...) as c: await c.produce(...)``."""

from __future__ import annotations

import asyncio
from urllib.parse import quote, urlencode

import aiohttp

from . import core
from .errors import HorologeError, UnavailableError
from .models import MessageStatus, ReceivedMessage, Scheduled


class AsyncClient(core.ClientSettings):
    """Same calls as :class:`horologe.client.Client`, awaitable, over one aiohttp session."""

    def __init__(self, urls, token: str, **settings) -> None:
        """``settings``: admin_token, timeout (s, per request), retry_s (s, across failover)."""
        super().__init__(urls, token, **settings)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AsyncClient:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, method: str, path: str, body=None, *, admin: bool = False, resend: bool = True):
        if self._session is None:
            raise RuntimeError("use 'async with AsyncClient(...)'")
        token = self.admin_token if admin else self.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_s
        last: HorologeError = UnavailableError("no node answered")
        while True:
            for base in self.endpoints.order():
                try:
                    async with self._session.request(
                        method, base + path, json=body, headers=headers, allow_redirects=False
                    ) as r:
                        status, location = r.status, r.headers.get("Location")
                        text = await r.text()
                    payload = core.parse_body(text)
                except TimeoutError:
                    last = self.endpoints.unreachable(base, "timed out", timed_out=True, resend=resend)
                    continue
                except aiohttp.ClientError as e:
                    last = self.endpoints.unreachable(base, e, timed_out=False, resend=resend)
                    continue
                outcome = self.endpoints.answered(base, status, payload, location)
                if outcome is core.REDIRECTED:
                    break  # go again, master first
                if not isinstance(outcome, HorologeError):
                    return outcome
                last = outcome
            else:
                if loop.time() > deadline:
                    raise last
                await asyncio.sleep(0.2)

    async def produce(self, topic: str, body: bytes | str, **options) -> Scheduled:
        msg = core.message_body(topic, body, **options)
        return core.to_scheduled(await self._call("POST", "/v1/messages", msg), topic)

    async def produce_batch(self, messages: list[dict]) -> list[Scheduled | HorologeError]:
        bodies = [core.message_body(**m) for m in messages]
        res = (await self._call("POST", "/v1/messages/batch", {"messages": bodies}))["results"]
        return core.batch_results(res, bodies)

    async def status(self, message_id: str) -> MessageStatus:
        return core.to_status(await self._call("GET", f"/v1/messages/{message_id}"))

    async def cancel(self, message_id: str) -> None:
        await self._call("DELETE", f"/v1/messages/{message_id}")

    async def cancel_key(self, topic: str, key: str) -> None:
        await self._call("DELETE", f"/v1/messages?{urlencode({'topic': topic, 'key': key})}")

    async def pull(
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
        res = await self._call("POST", f"/v1/topics/{quote(topic, safe='')}/pull", body)
        kept, stray = core.split_by_tags(res["messages"], tags)
        if stray:
            await self.ack(topic, group, stray)
        return kept

    async def ack(self, topic: str, group: str, receipts: list[str]) -> None:
        await self._call(
            "POST", f"/v1/topics/{quote(topic, safe='')}/ack", {"group": group, "receipts": receipts}
        )

    async def nack(self, topic: str, group: str, receipts: list[str]) -> dict:
        return await self._call(
            "POST",
            f"/v1/topics/{quote(topic, safe='')}/nack",
            {"group": group, "receipts": receipts},
            resend=False,
        )
