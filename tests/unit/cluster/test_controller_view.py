"""The group view the controller reads from etcd's keys (no etcd)."""

from __future__ import annotations

from pocketmq.cluster.controller import group_view
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
