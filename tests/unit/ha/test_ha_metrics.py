"""Metrics of the HA parts: breaker state and transitions, typed remote reads and their latency, replication
lag in bytes and seconds; breaker settings changed on a live board."""

from __future__ import annotations

from tests.unit.ha.test_remote_reader import reader, reply
from tests.unit.pop.pop_support import running_broker, send

from pocketmq.cluster.breaker import BreakerBoard, BreakerSettings, BreakerState
from pocketmq.cluster.ha_master import replication_lag
from pocketmq.metrics import MetricsRegistry
from pocketmq.protocol.codes import RequestCode
from pocketmq.runtime.clock import ManualClock
from pocketmq.testing.fakes import canned, hang_up


def test_breaker_state_gauge_and_transitions():
    metrics = MetricsRegistry()
    board = BreakerBoard(BreakerSettings(failure_threshold=2, cool_down_ms=100), metrics=metrics)
    breaker = board.get("broker-b")
    assert metrics.value("pocketmq_breaker_state", broker="broker-b") == 0  # shown before any change
    breaker.record_failure(0)
    breaker.record_failure(1)
    assert metrics.value("pocketmq_breaker_state", broker="broker-b") == 2
    assert breaker.admit(200)  # the probe: HALF_OPEN
    assert metrics.value("pocketmq_breaker_state", broker="broker-b") == 1
    breaker.record_success(201)
    assert metrics.value("pocketmq_breaker_state", broker="broker-b") == 0
    assert [
        metrics.value("pocketmq_breaker_transitions_total", broker="broker-b", to=s)
        for s in ("OPEN", "HALF_OPEN", "CLOSED")
    ] == [1, 1, 1]


def test_configure_applies_to_existing_and_later_breakers():
    board = BreakerBoard(BreakerSettings(failure_threshold=5, cool_down_ms=100))
    existing = board.get("a")
    existing.record_failure(0)
    board.configure(BreakerSettings(failure_threshold=2, cool_down_ms=50))
    existing.record_failure(1)
    assert existing.state is BreakerState.OPEN  # the new threshold, without a restart
    assert not existing.admit(40) and existing.admit(51)  # the new cool-down
    later = board.get("b")
    later.record_failure(0)
    later.record_failure(1)
    assert later.state is BreakerState.OPEN


async def test_remote_reads_counted_by_result_and_reason_with_latency(remoting, peers):
    clock = ManualClock()
    master = await peers(canned(reply(0, 1, 2)))
    r, board = reader(remoting, {0: master}, clock, threshold=1)
    await r.read_many("t", 0, [1, 2])
    master.on(RequestCode.PULL_MESSAGE, hang_up)
    await r.read("t", 0, 3)  # opens the breaker (threshold 1)
    await r.read("t", 0, 3)  # fails fast
    metrics = board.metrics

    def reads(result, reason):
        return metrics.value("pocketmq_remote_reads_total", broker="b", result=result, reason=reason)

    assert reads("FOUND", "FOUND") == 2
    assert reads("FAILED", "CONNECTION_REFUSED") == 1
    assert reads("FAILED", "BREAKER_OPEN") == 1
    assert metrics.get("pocketmq_remote_read_latency_seconds").count(broker="b") == 2  # RPCs, not fast fails


def test_replication_lag_of_a_slave():
    assert replication_lag("s", 100, 100, -1, 5_000) == replication_lag("s", 100, 100, 1_000, 5_000)
    caught_up = replication_lag("s", 100, 100, -1, 5_000)
    assert (caught_up.lag_bytes, caught_up.lag_ms) == (0, 0)
    behind = replication_lag("s", 40, 100, 3_500, 5_000)
    assert (behind.lag_bytes, behind.lag_ms) == (60, 1_500)


async def test_master_reports_lag_in_bytes_and_seconds_per_slave(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock) as broker:
        master = broker.ha_master
        await send(broker, "T", 1)
        first_end = broker.store.max_phys_offset
        clock.advance(2_000)
        await send(broker, "T", 1)
        master.acks.heard("link-1", "10.0.0.2:10911", first_end, clock.now_ms())  # has the first record only
        clock.advance(500)
        [lag] = master.slave_lags()
        assert lag.lag_bytes == broker.store.max_phys_offset - first_end
        assert lag.lag_ms == 500  # the second record was stored 500 ms ago
        broker.metrics.collect()
        assert broker.metrics.value("pocketmq_ha_slave_lag_bytes", slave="10.0.0.2:10911") == lag.lag_bytes
        assert broker.metrics.value("pocketmq_ha_slave_lag_seconds", slave="10.0.0.2:10911") == 0.5
        assert '"lagMs": 500' in broker.runtime_info()["haSlaveLag"]
        master.acks.heard("link-1", "10.0.0.2:10911", broker.store.max_phys_offset, clock.now_ms())
        assert [(x.lag_bytes, x.lag_ms) for x in master.slave_lags()] == [(0, 0)]
        master.link_closed("link-1")
        broker.metrics.collect()
        assert broker.metrics.get("pocketmq_ha_slave_lag_bytes").values() == {}  # a slave that left
