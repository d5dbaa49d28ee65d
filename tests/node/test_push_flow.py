"""Flow control of a push subscription on a fake clock (node/push/flow.py): requests open
at once stay within max_in_flight; starts stay within the rate, a tenth of a second's
worth at most at once."""

from __future__ import annotations

from horologe.node.push.flow import Flow


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_max_in_flight_alone():
    flow = Flow(3, 0, FakeClock())
    assert flow.room() == 3 and flow.token_wait_s() == 0
    flow.take(2)
    assert flow.room() == 1 and not flow.full()
    flow.take(1)
    assert flow.room() == 0 and flow.full()
    flow.done()
    assert flow.room() == 1


def test_the_rate_spreads_a_burst_over_the_second():
    clock = FakeClock()
    flow = Flow(1000, 50, clock)  # a bucket of 5
    started = 0
    for _ in range(100):  # 1 s in 10 ms steps, each request ending at once
        n = flow.room()
        flow.take(n)
        for _ in range(n):
            flow.done()
        started += n
        clock.t += 0.01
    assert 50 <= started <= 55  # the rate, plus at most the first bucket
    assert flow.room() <= 5


def test_waiting_for_a_token():
    clock = FakeClock()
    flow = Flow(10, 4, clock)  # a bucket of one (a tenth of 4, at least one)
    assert flow.room() == 1
    flow.take(1)
    assert flow.room() == 0 and not flow.full()
    assert abs(flow.token_wait_s() - 0.25) < 1e-9
    clock.t += 0.25
    assert flow.room() == 1 and flow.token_wait_s() == 0
