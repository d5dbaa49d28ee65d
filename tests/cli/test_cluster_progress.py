"""`cluster add`'s progress lines: when the catch-up moves, and while it does not."""

from __future__ import annotations

from horologe.cli import cluster


class _Master:
    def __init__(self) -> None:
        self.held = 0

    def members(self) -> list[dict]:
        return [{"node_id": "n4", "catch_up": {"held": self.held, "target": 5000}}]


def test_a_catch_up_that_does_not_move_is_said_every_ten_seconds(capsys, monkeypatch):
    """It was said once, then nothing until the add gave up (600 s by default)."""
    now = [0.0]
    master = _Master()
    progress = cluster._Progress("http://127.0.0.1:9", None, None, "n4", clock=lambda: now[0])
    monkeypatch.setattr(progress, "_on_master", lambda: master)
    for t in range(0, 31, 2):  # a look every 2 s, stuck at 0 for 30 s
        now[0] = float(t)
        progress.show()
    master.held = 1200
    now[0] = 32.0
    progress.show()
    now[0] = 34.0
    progress.show()
    assert capsys.readouterr().err.splitlines() == [
        "n4 holds the log up to 0 of 5,000",
        "n4 holds the log up to 0 of 5,000, no further for 10 s",
        "n4 holds the log up to 0 of 5,000, no further for 20 s",
        "n4 holds the log up to 0 of 5,000, no further for 30 s",
        "n4 holds the log up to 1,200 of 5,000",
    ]
