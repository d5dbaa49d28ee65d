"""Cancel a scheduled Celery task in the cluster, even while no worker runs."""

from __future__ import annotations

import itertools

from horologe.client import AlreadyDeliveredError, NotFoundError
from horologe.client.task_keys import task_key, topic_name

from .options import read_options
from .transport import client_for


def revoke_scheduled(app, task_id: str, *, queue: str | None = None, retries: int | None = None) -> bool:
    """Cancel task ``task_id`` of ``queue`` (the app's default queue) before it falls due:
    True once it is cancelled (now or before), False if the cluster knows no such task
    there. Each retry is a message of its own (``celery:{task id}:{retries}``), and so is
    each replacement (``Task.replace`` keeps the id: ``...:r{n}``). Without ``retries``, the
    message that waits is cancelled, found by trying attempts 0, 1, 2, ... of the task as
    sent, then of its replacement, of that one's replacement, and so on: a retry waiting
    out its countdown, or a replacement sent with one, is cancelled too.
    ``AlreadyDeliveredError`` once the task (that attempt of the task as sent, with
    ``retries``) was handed to the workers and nothing of it waits. The tasks of a chain
    that follow a replaced task carry its replacement count (Celery sets it on them):
    they are not found here (False)."""
    conf = app.conf
    options = read_options(conf.broker_transport_options or {})
    topic = topic_name(queue or conf.task_default_queue, options.topic_prefix)
    with client_for(conf.broker_url, options) as client:
        if retries is not None:
            try:
                client.cancel_key(topic, task_key("celery", task_id, retries))
            except NotFoundError:
                return False
            return True
        delivered: AlreadyDeliveredError | None = None
        for replaced in itertools.count():
            for attempt in itertools.count():
                try:
                    client.cancel_key(topic, task_key("celery", task_id, attempt, replaced))
                    return True
                except NotFoundError:
                    if attempt > 0:
                        break  # no later retry: a replacement may wait
                    if delivered is not None:
                        raise delivered from None  # ran, and nothing of it waits
                    return False
                except AlreadyDeliveredError as e:
                    delivered = e  # this one ran: a retry or a replacement of it may wait
