"""Names and keys the task-queue integrations give what they publish."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from horologe.client.task_keys import eta_ms, task_key, topic_name
from horologe.kombu.transport import node_urls, url_token

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def test_queue_names_become_topic_names_and_never_collide():
    assert topic_name("celery") == "celery"
    assert topic_name("acc", "app.") == "app.acc"
    odd = ["w1@host.celery.pidbox", "w1#host.celery.pidbox", "_private", "x" * 200, "x" * 201, ""]
    names = [topic_name(q) for q in odd]
    assert all(NAME.fullmatch(n) for n in names), names
    assert len(set(names)) == len(odd)


def test_an_eta_rounds_up_to_the_ms_and_a_naive_one_is_utc():
    assert eta_ms(None) is None and eta_ms("") is None
    assert eta_ms("2026-11-28T10:00:00.000001+00:00") == 1_795_860_000_001
    assert eta_ms("2026-11-28T10:00:00") == 1_795_860_000_000
    plus_one = datetime(2026, 11, 28, 11, tzinfo=timezone(timedelta(hours=1)))
    assert eta_ms(plus_one) == eta_ms(datetime(2026, 11, 28, 10, tzinfo=UTC))


def test_a_retry_is_a_key_of_its_own_and_a_republish_is_not():
    assert task_key("celery", "abc", 0) == task_key("celery", "abc", None) == "celery:abc:0"
    assert task_key("celery", "abc", 1) == "celery:abc:1"
    assert task_key("celery", None, 0) is None


def test_a_replacement_is_a_key_of_its_own_and_a_task_never_replaced_keeps_its_key():
    assert task_key("celery", "abc", 0, 0) == task_key("celery", "abc", 0, None) == "celery:abc:0"
    assert task_key("celery", "abc", 0, 1) == "celery:abc:0:r1"
    assert task_key("celery", "abc", 2, 3) == "celery:abc:2:r3"


def test_broker_urls_name_every_node_and_the_token():
    assert node_urls("horologe://n1:8081,n2:9000,n3") == [
        "http://n1:8081",
        "http://n2:9000",
        "http://n3:8081",
    ]
    assert node_urls("https://:tok@n1:8081,n2:8081/") == ["https://n1:8081", "https://n2:8081"]
    assert url_token("horologe://:s%40cret@n1:8081") == "s@cret"
    assert url_token("horologe://n1:8081") is None
