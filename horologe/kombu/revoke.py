"""Cancel a scheduled Celery task in the cluster, even while no worker runs."""

from __future__ import annotations

from horologe.client import NotFoundError
from horologe.client.task_keys import task_key, topic_name

from .transport import client_for


def revoke_scheduled(app, task_id: str, *, queue: str | None = None, retries: int = 0) -> bool:
    """Cancel task ``task_id`` (attempt ``retries``) of ``queue`` (the app's default queue)
    before it falls due: True once it is cancelled (now or before), False if the cluster
    knows no such task. ``AlreadyDeliveredError`` once it was handed to the workers."""
    conf = app.conf
    options = conf.broker_transport_options or {}
    topic = topic_name(queue or conf.task_default_queue, options.get("topic_prefix", ""))
    with client_for(conf.broker_url, options) as client:
        try:
            client.cancel_key(topic, task_key("celery", task_id, retries))
        except NotFoundError:
            return False
    return True
