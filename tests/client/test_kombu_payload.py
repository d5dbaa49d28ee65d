"""What the kombu transport hands kombu of a pulled message (horologe/kombu/transport.py)."""

from __future__ import annotations

import json

from horologe.client.models import ReceivedMessage
from horologe.kombu.transport import Channel


class _Codec:
    def decode_body(self, body, encoding):
        return body


def _pulled(delivery_info: dict) -> ReceivedMessage:
    body = {"body": "", "headers": {}, "properties": {"delivery_info": delivery_info}}
    return ReceivedMessage("m1", "r1", "hz.video", json.dumps(body).encode(), (), 5, 6, 0)


def test_the_routing_key_a_task_was_published_with_is_kept():
    """kombu stores the exchange and routing key a message was published with, and Celery's
    ``self.retry()`` publishes the retry with them: the transport put the queue's name in
    the routing key's place, so a task of a queue bound to a topic exchange ("media.#")
    retried to ("media", "video"), which no binding routes, and the retry was refused."""
    published = {"exchange": "media", "routing_key": "media.video"}
    info = Channel._payload(_Codec(), _pulled(published), "video", "hz.video")["properties"]["delivery_info"]
    assert (info["exchange"], info["routing_key"]) == ("media", "media.video")
    info = Channel._payload(_Codec(), _pulled({}), "video", "hz.video")["properties"]["delivery_info"]
    assert info["routing_key"] == "video"  # a body that names none: the queue's, as published to it
