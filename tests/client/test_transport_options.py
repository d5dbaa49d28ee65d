"""The task queues' settings checked where they are given: Celery's
``broker_transport_options`` (horologe/kombu/options.py) and ``HorologeBroker``'s
``visibility_ms``. A wrong value failed later, in the worker, naming no option (``'>='
not supported between 'str' and 'int'``); a misspelt option was left unread."""

from __future__ import annotations

import logging

import pytest

from horologe.dramatiq import HorologeBroker
from horologe.kombu.options import read_options


def test_the_options_are_read_with_their_defaults():
    options = read_options({"visibility_timeout": 5, "wait_ms": "200", "polling_interval": 1})
    assert (options.visibility_ms, options.wait_ms, options.retry_s, options.topic_prefix) == (
        5000,
        200,
        15.0,
        "",
    )


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"retry_s": "x"}, "broker transport option retry_s: Expected `float`, got `str`"),
        ({"visibility_timeout": "abc"}, "broker transport option visibility_timeout: Expected `float`"),
        ({"wait_ms": "abc"}, "broker transport option wait_ms: Expected `int`, got `str`"),
        ({"wait_ms": 40_000}, "broker transport option wait_ms: Expected `int` <= 30000"),
        ({"visibility_timeout": 0}, "broker transport option visibility_timeout: Expected `float` >= 1.0"),
        # renewed every third of it, at most every 0.2 s: a shorter lease ends before it is renewed
        ({"visibility_timeout": 0.5}, "broker transport option visibility_timeout: Expected `float` >= 1.0"),
    ],
)
def test_a_wrong_value_is_refused_naming_its_option(given, said):
    with pytest.raises(ValueError) as e:
        read_options(given)
    assert str(e.value).startswith(said), e.value


def test_a_misspelt_option_is_warned_of(caplog):
    with caplog.at_level(logging.WARNING, logger="horologe.kombu.options"):
        assert read_options({"visiblity_timeout": 5, "polling_interval": 1}).visibility_ms == 1_800_000
    said = [r.getMessage() for r in caplog.records]
    meant = "'visibility_timeout' was meant?"
    assert said == [f"broker transport option 'visiblity_timeout' is unknown (left unread): {meant}"]


@pytest.mark.parametrize("visibility_ms", ["abc", 50, 500, True, 1.5, 12 * 3_600_000 + 1])
def test_the_dramatiq_broker_refuses_a_wrong_visibility(visibility_ms):
    with pytest.raises(ValueError, match="visibility_ms must be an integer from 1000 to 43,200,000"):
        HorologeBroker(["http://127.0.0.1:1"], "token", visibility_ms=visibility_ms)
