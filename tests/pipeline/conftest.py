"""One Spark session for the whole pipeline suite (starting one takes ~10 s)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from horologe.pipeline.spark_session import spark_session

    session = spark_session("local[2]", "horologe-tests")
    yield session
    session.stop()
