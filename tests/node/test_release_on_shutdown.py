"""A graceful stop hands the master's place over even if its read lease lapsed a moment
before (node/main.py): the release is held and asked again once the lease is back
(node/master_hold.py)."""

from __future__ import annotations

import asyncio

import pytest

from horologe.cluster import NotMasterError
from horologe.node.main import release_once_serving
from horologe.node.master_hold import MasterHold


class Leading:
    """A master whose release is refused ``refusals`` times with ``error`` first."""

    def __init__(self, refusals: int, error: NotMasterError, leads: bool = True) -> None:
        self.refusals, self.error, self.leads, self.asked = refusals, error, leads, 0
        self.handover = self
        self.hold = MasterHold(lambda: None, self.is_master, 0.3)  # the lease is back at once

    def is_master(self) -> bool:
        return self.leads

    async def release(self, to):
        self.asked += 1
        if self.asked <= self.refusals:
            raise self.error
        return {"new_master": "n2"}


def test_a_release_refused_while_the_lease_lapsed_is_asked_again():
    svc = Leading(2, NotMasterError(None))
    assert asyncio.run(release_once_serving(svc)) == {"new_master": "n2"}
    assert svc.asked == 3
    assert svc.hold.counts == {"served": 2, "redirected": 0, "refused": 0}


@pytest.mark.parametrize(
    "svc",
    [Leading(1, NotMasterError("http://127.0.0.1:8002")), Leading(1, NotMasterError(None), leads=False)],
    ids=["another node leads", "no longer leads"],
)
def test_a_release_refused_because_another_node_leads_is_not_asked_again(svc):
    with pytest.raises(NotMasterError):
        asyncio.run(release_once_serving(svc))
    assert svc.asked == 1
