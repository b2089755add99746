"""The master's pure view of its slaves: acks, in-sync slaves, SYNC verdicts, where a slave continues."""

from __future__ import annotations

import pytest

from pocketmq.cluster.ha_state import PullStep, ReplicaAcks, SyncVerdict, pull_step, replication_start
from pocketmq.store.commit_log import RecordMark


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


def test_replication_start_checks_the_slave_s_last_record():
    mark = RecordMark(200, 0xCAFE)
    assert replication_start(300, 0, 500, mark, 0xCAFE) == 300  # the master's last record before 300 is it
    with pytest.raises(ValueError, match="crc32c 0000cafe.*crc32c 0000beef.*diverged"):
        replication_start(300, 0, 500, mark, 0xBEEF)  # another record at the same place: the master lost its own
    with pytest.raises(ValueError, match="no record of the master ends there"):
        replication_start(300, 0, 500, mark, None)
    assert replication_start(300, 0, 500) == 300  # an older slave names no record: lengths only, as before
    assert replication_start(4096, 4096, 9000, RecordMark(3000, 1), None) == 4096  # below retention: unchecked
    with pytest.raises(ValueError, match="beyond"):
        replication_start(600, 0, 500, mark, 0xCAFE)


def test_pull_step_serves_only_durable_records_and_asks_for_a_flush():
    assert pull_step(100, durable_phys_offset=300, max_phys_offset=300) is PullStep.SERVE
    assert pull_step(100, durable_phys_offset=200, max_phys_offset=300) is PullStep.SERVE  # up to 200
    assert pull_step(100, durable_phys_offset=100, max_phys_offset=300) is PullStep.AWAIT_FLUSH
    assert pull_step(300, durable_phys_offset=300, max_phys_offset=300) is PullStep.AWAIT_ARRIVAL
