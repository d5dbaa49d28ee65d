"""Cancel a scheduled Celery task in the cluster, even while no worker runs."""

from __future__ import annotations

import itertools

from horologe.client import AlreadyDeliveredError, NotFoundError
from horologe.client.task_keys import task_key, topic_name

from .transport import client_for


def revoke_scheduled(app, task_id: str, *, queue: str | None = None, retries: int | None = None) -> bool:
    """Cancel task ``task_id`` of ``queue`` (the app's default queue) before it falls due:
    True once it is cancelled (now or before), False if the cluster knows no such task
    there. Each retry is a message of its own (``celery:{task id}:{retries}``): without
    ``retries``, the attempt that waits is cancelled, a retry waiting out its countdown
    too. ``AlreadyDeliveredError`` once the task (that attempt, with ``retries``) was
    handed to the workers and no later attempt waits."""
    conf = app.conf
    options = conf.broker_transport_options or {}
    topic = topic_name(queue or conf.task_default_queue, options.get("topic_prefix", ""))
    delivered: AlreadyDeliveredError | None = None
    with client_for(conf.broker_url, options) as client:
        for attempt in itertools.count() if retries is None else (retries,):
            try:
                client.cancel_key(topic, task_key("celery", task_id, attempt))
                return True
            except NotFoundError:
                if delivered is not None:
                    raise delivered from None  # ran, and no retry of it waits
                return False
            except AlreadyDeliveredError as e:
                if retries is not None:
                    raise
                delivered = e  # this attempt ran: a retry of it may wait
