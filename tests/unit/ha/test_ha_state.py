"""The master's pure view of its slaves: acks, in-sync slaves, SYNC verdicts, where a slave continues."""

from __future__ import annotations

import pytest

from pocketmq.cluster.ha_state import ReplicaAcks, SyncVerdict, replication_start


def acks() -> ReplicaAcks:
    return ReplicaAcks(max_gap_bytes=1000, expire_ms=5000)


def test_no_slave_means_a_sync_send_cannot_be_replicated():
    assert acks().verdict(0, 100, now_ms=0) is SyncVerdict.NO_SLAVE


def test_a_record_is_replicated_once_a_slave_acked_past_its_start():
    table = acks()
    assert table.heard("link", "10.0.0.2:10911", 100, now_ms=0)
    assert table.verdict(100, 200, now_ms=10) is SyncVerdict.WAIT  # the slave has up to 100, not the record at 100
    assert not table.heard("link", "10.0.0.2:10911", 200, now_ms=20)
    assert table.verdict(100, 200, now_ms=30) is SyncVerdict.REPLICATED
    assert not table.heard("link", "10.0.0.2:10911", 150, now_ms=40)  # a late, older pull never lowers the ack
    assert table.best_acked_phys_offset == 200


def test_a_slave_too_far_behind_or_silent_is_not_in_sync():
    table = acks()
    table.heard("link", "s", 0, now_ms=0)
    assert table.verdict(5000, 5001, now_ms=0) is SyncVerdict.NO_SLAVE  # gap 5001 > 1000
    assert table.verdict(500, 600, now_ms=5001) is SyncVerdict.NO_SLAVE  # silent for longer than expire_ms
    assert [p.slave_addr for p in table.expire(now_ms=5001)] == ["s"] and table.slaves() == []


def test_a_closed_link_is_forgotten():
    table = acks()
    table.heard("link", "s", 10, now_ms=0)
    assert table.gone("link").acked_phys_offset == 10
    assert table.gone("link") is None and table.verdict(0, 10, now_ms=0) is SyncVerdict.NO_SLAVE


def test_replication_start():
    assert replication_start(300, 0, 500) == 300
    assert replication_start(0, 4096, 9000) == 4096  # an empty slave copies what the master still has
    with pytest.raises(ValueError, match="beyond"):
        replication_start(600, 0, 500)
    with pytest.raises(ValueError, match="retention"):
        replication_start(100, 4096, 9000)
