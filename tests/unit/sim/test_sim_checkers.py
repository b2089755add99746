"""The simulation's checkers on small hand-written traces: each property holds or is reported."""

from __future__ import annotations

from types import SimpleNamespace

from pocketmq.testing.sim import SimConfig
from pocketmq.testing.sim.checkers import (
    check_breaker_bound,
    check_pop_outcomes,
    check_rewrite_bound,
    check_sync_sends,
)
from pocketmq.testing.sim.config import RETRY_TOPIC, TOPIC

CONFIG = SimConfig()
A = "broker-a"
AT = (A, TOPIC, 0, 5)  # (group, topic, queue, offset)


def trace(*events):
    return SimpleNamespace(events=[(t, kind, fields) for t, kind, fields in events])


def durable(t, broker, origin="m1"):
    return (t, "durable", {"broker": broker, "group": A, "origin": origin, "queue_id": 0, "queue_offset": 5})


SEND_OK = (20, "send_ok", {"origin": "m1", "group": A, "queue_id": 0, "queue_offset": 5})
FINAL = {"broker-a-0": {(TOPIC, 0, 5): "m1"}, "broker-a-1": {(TOPIC, 0, 5): "m1"}}


def test_a_sync_send_must_be_on_two_disks_when_acknowledged_and_readable_at_the_end():
    readers = {A: "broker-a-0"}
    assert (
        check_sync_sends(trace(durable(10, "broker-a-0"), durable(15, "broker-a-1"), SEND_OK), FINAL, readers, CONFIG)
        == []
    )
    late_slave = check_sync_sends(
        trace(durable(10, "broker-a-0"), SEND_OK, durable(30, "broker-a-1")), FINAL, readers, CONFIG
    )
    assert [v.checker for v in late_slave] == ["sync_sends"] and "durable only on ['broker-a-0']" in late_slave[
        0
    ].detail
    overwritten = {**FINAL, "broker-a-0": {(TOPIC, 0, 5): "m9"}}
    lost = check_sync_sends(
        trace(durable(10, "broker-a-0"), durable(15, "broker-a-1"), SEND_OK), overwritten, readers, CONFIG
    )
    assert len(lost) == 1 and "m9" in lost[0].detail


def test_every_pop_message_ends_acked_or_dead_lettered_with_a_reason():
    delivered = (30, "delivered", {"origin": "m1", "location": AT, "reconsume_times": 0})
    assert [v.detail for v in check_pop_outcomes(trace(SEND_OK, delivered), CONFIG)] == [
        "m1 was delivered but never acked nor dead-lettered"
    ]
    acked = (40, "ack_stored", {"broker": "broker-a-0", "location": AT})
    assert check_pop_outcomes(trace(SEND_OK, delivered, acked), CONFIG) == []
    # Never delivered (the pop's answer was lost), its retry copy unreadable: a reference names the location only.
    copy_at = (A, RETRY_TOPIC, 0, 2)
    stored = (50, "copy_stored", {"broker": "broker-a-0", "origin": "m1", "location": copy_at})
    reference = (60, "dead_letter", {"location": copy_at, "origin": None, "reason": "TIMEOUT", "reconsume_times": 0})
    assert check_pop_outcomes(trace(SEND_OK, stored, reference), CONFIG) == []
    no_reason = (60, "dead_letter", {"location": copy_at, "origin": None, "reason": "", "reconsume_times": 0})
    assert "has no reason" in check_pop_outcomes(trace(SEND_OK, stored, no_reason), CONFIG)[0].detail
    early = (60, "dead_letter", {"location": AT, "origin": "m1", "reason": "MAX_ATTEMPTS", "reconsume_times": 1})
    assert "after 1 reconsumes" in check_pop_outcomes(trace(SEND_OK, delivered, early), CONFIG)[0].detail
    dropped = (60, "dropped", {"location": AT, "reason": "TIMEOUT"})
    assert any("dropped" in v.detail for v in check_pop_outcomes(trace(SEND_OK, delivered, dropped), CONFIG))


def test_rewrites_beyond_the_table_are_reported():
    limit = len(CONFIG.ck_rewrite_backoff_ms)
    ok = (10, "ck_rewritten", {"location": AT, "rewrite_count": limit, "reason": "TIMEOUT"})
    over = (20, "ck_rewritten", {"location": AT, "rewrite_count": limit + 1, "reason": "TIMEOUT"})
    assert check_rewrite_bound(trace(ok), CONFIG) == []
    assert [v.checker for v in check_rewrite_bound(trace(ok, over), CONFIG)] == ["rewrite_bound"]


def test_reads_while_a_breaker_is_open_are_reported_until_the_reader_restarts():
    def state(t, value):
        return (t, "breaker", {"reader": "broker-b-0", "target": A, "state": value})

    def read(t):
        return (t, "remote_read", {"reader": "broker-b-0", "target": A, "addr": "broker-a-0", "breaker": "?"})

    restarted = (1_500, "broker_started", {"broker": "broker-b-0", "records": 3})
    assert len(check_breaker_bound(trace(state(1_000, "OPEN"), read(1_200)), CONFIG)) == 1
    assert check_breaker_bound(trace(state(1_000, "OPEN"), restarted, read(1_600)), CONFIG) == []
    probes = [read(2_100), read(2_200)]
    assert check_breaker_bound(trace(state(2_000, "HALF_OPEN"), *probes), CONFIG) == []
    assert "half-open" in check_breaker_bound(trace(state(2_000, "HALF_OPEN"), *probes, read(2_300)), CONFIG)[0].detail
