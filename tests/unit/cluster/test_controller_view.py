"""The group view the controller reads from etcd's keys (no etcd)."""

from __future__ import annotations

import types

import pytest

from pocketmq.cluster.controller import ControllerError, EtcdController, group_view
from pocketmq.cluster.election import Candidate


def test_a_group_with_a_master_candidates_and_an_in_sync_set():
    view = group_view(
        {
            "epoch": b"3",
            "master": b'{"brokerId": 1, "epoch": 3, "address": "10.0.0.2:10911"}',
            "in_sync": b'{"epoch": 3, "brokerIds": [1, 2]}',
            "candidates/2": b'{"logEnd": 500, "address": "10.0.0.3:10911"}',
            "candidates/1": b'{"logEnd": 700, "address": "10.0.0.2:10911"}',
        },
        holder_lease_id=77,
    )
    assert view.state.epoch == 3 and view.state.holder_id == 1
    assert view.state.in_sync_ids == frozenset({1, 2}) and view.in_sync_epoch == 3
    assert view.candidates == (Candidate(1, 700), Candidate(2, 500))
    assert view.addresses == {1: "10.0.0.2:10911", 2: "10.0.0.3:10911"}
    assert view.holder_lease_id == 77


def test_a_new_group_has_epoch_0_and_no_holder():
    view = group_view({})
    assert (view.state.epoch, view.state.holder_id, view.state.in_sync_ids) == (0, None, frozenset())


class _FlakyEtcd:
    """An etcd client whose puts fail while ``down`` (no etcd runs here)."""

    def __init__(self):
        self.down = True
        self.puts: list[tuple[bytes, bytes]] = []
        self.put_leases: list[tuple[int | None, bytes]] = []
        self._leases = 0

    async def put(self, key: bytes, value: bytes, lease=None):
        if self.down:
            raise ConnectionError("etcd unreachable")
        self.puts.append((key, value))
        self.put_leases.append((lease, key))

    async def lease(self, ttl_s: int):
        self._leases += 1
        return types.SimpleNamespace(id=self._leases, ttl=ttl_s)


async def test_a_log_end_whose_put_failed_is_published_at_the_next_call():
    """A failed put of the candidacy is not taken for a published one: the next call with the same log end
    writes it (else the broker's candidacy, or its newer log end, would never reach etcd)."""
    controller = EtcdController(
        "etcd://127.0.0.1:2379", cluster_name="C", broker_name="b", broker_id=1, address="10.0.0.2:10911"
    )
    etcd = _FlakyEtcd()
    controller._client = etcd
    with pytest.raises(ControllerError):
        await controller.publish_log_end(500)
    etcd.down = False
    await controller.publish_log_end(500)
    assert etcd.puts == [(b"/pocketmq/C/b/candidates/1", b'{"logEnd": 500, "address": "10.0.0.2:10911"}')]
    await controller.publish_log_end(500)  # unchanged and published: not written again
    assert len(etcd.puts) == 1


async def test_a_new_lease_publishes_the_candidacy_again_even_when_its_first_put_failed():
    """The candidacy key lives on the lease: a new lease (the old one lapsed) needs it written again, and a
    failed write of it is not taken for a written one."""
    controller = EtcdController(
        "etcd://127.0.0.1:2379", cluster_name="C", broker_name="b", broker_id=1, address="10.0.0.2:10911"
    )
    etcd = _FlakyEtcd()
    etcd.down = False
    controller._client = etcd
    await controller._new_lease()
    etcd.down = True
    with pytest.raises(ControllerError):
        await controller._new_lease()  # granted, but the candidacy's put failed
    etcd.down = False
    await controller.publish_log_end(0)
    assert [lease for lease, _ in etcd.put_leases] == [1, 2]  # the failed one, written at the next call
