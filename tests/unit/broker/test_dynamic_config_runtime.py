"""Run-time config changes that apply without a restart (CK rewrite backoff and endings, remote read timeout and
retry delays, breaker settings, escape switches), their persistence in the data directory, and revive's metrics
on the interface."""

from __future__ import annotations

import dataclasses
import json

import pytest
from tests.unit.pop.pop_support import pop, running_broker, send
from tests.unit.pop.test_typed_reads import FailingReader

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.dynamic_config import dynamic_config_path, with_persisted_changes
from pocketmq.cluster.breaker import BreakerState
from pocketmq.common.config import load_config
from pocketmq.common.errors import BadRequestError, ConfigError
from pocketmq.runtime.clock import ManualClock


async def test_a_new_backoff_table_is_used_by_the_next_rewrite(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, pop_ck_rewrite_backoff_ms=(1_000, 1_000, 1_000)) as broker:
        reader = broker.pop.revive.readers.local = FailingReader(clock)
        await send(broker, "T", 1)
        await pop(broker, "G", "T", invisible_ms=10_000)
        popped_at = clock.now_ms()

        async def run_for(ms: int) -> None:
            for _ in range(ms // 100):
                clock.advance(100)
                await broker.pop.revive.run_once(clock.now_ms())

        await run_for(10_000)  # first read at 10 s: rewritten with the old table (1 s)
        broker.update_config({"pop_ck_rewrite_backoff_ms": "3000,3000", "pop_ck_rewrite_ending": "drop"})
        await run_for(20_000)
        assert [t - popped_at for t in reader.read_times_ms] == [10_000, 11_000, 14_000]  # then 3 s steps
        metrics = broker.metrics
        assert [
            metrics.value("pocketmq_pop_ck_rewrites_total", group="G", topic="T", queue_id=0, attempt=n)
            for n in (1, 2, 3)
        ] == [1, 1, 0]  # the new table has 2 steps: the third read ends the CK
        assert metrics.value("pocketmq_pop_ck_endings_total", group="G", topic="T", queue_id=0, ending="drop") == 1
        assert metrics.get("pocketmq_pop_ck_rewrite_wait_seconds").sum(group="G") == 4.0
        stats = broker.pop.group_stats("G")[("T", 0)]
        assert (stats.rewrites, stats.endings, stats.dead_lettered) == (2, 1, 0)
        assert broker.pop.revive.metrics["drops"] == 1


async def test_breaker_settings_change_on_a_running_broker(tmp_path):
    async with running_broker(tmp_path) as broker:
        existing = broker.breakers.get("broker-b")
        broker.update_config({"breaker_failure_threshold": "2", "breaker_cool_down_ms": "500"})
        existing.record_failure(0)
        existing.record_failure(1)
        assert existing.state is BreakerState.OPEN and existing.retry_delay_ms(101) == 400
        assert broker.breakers.get("broker-c").settings.failure_threshold == 2  # boards' later breakers too
        assert json.loads(broker.runtime_info()["breakerStates"]) == {"broker-b": "OPEN", "broker-c": "CLOSED"}


async def test_escape_switches_are_dynamic(tmp_path):
    async with running_broker(tmp_path) as broker:
        broker.update_config({"enableSlaveActingMaster": "true", "enable_remote_escape": "true"})
        assert broker.config.enable_slave_acting_master and broker.config.enable_remote_escape


async def test_changes_persist_over_a_restart_and_win_over_the_start_config(tmp_path):
    config = BrokerConfig(data_dir=tmp_path / "data", remoting_port=0, breaker_failure_threshold=7)
    broker = Broker(config)
    await broker.start(remoting_port=10911)
    broker.update_config({"breaker_failure_threshold": "3", "pop_ck_rewrite_backoff_ms": "100 200"})
    await broker.shutdown()
    assert json.loads(dynamic_config_path(config).read_text()) == {
        "breaker_failure_threshold": "3",
        "pop_ck_rewrite_backoff_ms": "100,200",
    }
    again = Broker(config)  # started with threshold 7 again: the run-time change wins
    assert again.config.breaker_failure_threshold == 3 and again.config.pop_ck_rewrite_backoff_ms == (100, 200)
    assert again.breakers.settings.failure_threshold == 3


async def test_a_refused_change_changes_and_persists_nothing(tmp_path):
    async with running_broker(tmp_path) as broker:
        before = broker.config
        with pytest.raises(BadRequestError, match="pop_ck_rewrite_ending"):
            broker.update_config({"breaker_failure_threshold": "2", "pop_ck_rewrite_ending": "forever"})
        with pytest.raises(BadRequestError, match="breaker_failure_threshold"):
            broker.update_config({"breaker_failure_threshold": "0"})
        assert broker.config == before and broker.breakers.settings.failure_threshold == 5
        assert not dynamic_config_path(before).exists()
        assert broker.metrics.value("pocketmq_config_updates_total") == 0


def test_a_persisted_file_this_version_refuses_stops_the_start(tmp_path):
    config = BrokerConfig(data_dir=tmp_path)
    path = dynamic_config_path(config)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"remoting_port": "1"}))
    with pytest.raises(ConfigError, match="dynamic_config.json.*restart"):
        with_persisted_changes(config)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        with_persisted_changes(config)
    path.unlink()
    assert with_persisted_changes(config) == config


def test_config_get_form_of_a_tuple_can_be_set_back():
    from pocketmq.broker.dynamic_config import changed_config, config_properties

    config = dataclasses.replace(BrokerConfig(), pop_ck_rewrite_backoff_ms=(5, 6))
    text = config_properties(config)["pop_ck_rewrite_backoff_ms"]
    assert text == "5,6"
    assert changed_config(BrokerConfig(), {"pop_ck_rewrite_backoff_ms": text}) == config


async def test_remote_read_retry_delays_come_from_the_config(tmp_path):
    async with running_broker(tmp_path, remote_read_retry_unreachable_ms=700) as broker:
        # no name server knows broker-b: the read fails as unreachable and suggests the configured wait
        reader = broker.pop.revive.readers.for_broker("broker-b")
        result = await reader.read("T", 0, 0)
        assert result.need_retry and result.retry_delay_ms == 700
        # a change applies to the reader built already, and to the PULL's timeout
        broker.update_config({"remote_read_retry_unreachable_ms": "1300", "remote_read_timeout_ms": "250"})
        broker.breakers.get("broker-b").record_success(0)  # the failure above must not keep the breaker in the way
        assert (await reader.read("T", 0, 1)).retry_delay_ms == 1300
        assert reader._timeout_s == 0.25
    with pytest.raises(ConfigError, match="remote_read_retry_busy_ms"):
        load_config(BrokerConfig, env={}, overrides={"remote_read_retry_busy_ms": "0"})


async def test_a_maximum_total_time_set_at_run_time_ends_a_ck(tmp_path):
    clock = ManualClock()
    async with running_broker(tmp_path, clock, pop_ck_rewrite_backoff_ms=(1_000,) * 100) as broker:
        reader = broker.pop.revive.readers.local = FailingReader(clock)
        await send(broker, "T", 1)
        await pop(broker, "G", "T", invisible_ms=2_000)
        popped_at = clock.now_ms()
        for _ in range(30):  # reads at 2, 3, 4 s ...: 1 s steps out of 100
            clock.advance(100)
            await broker.pop.revive.run_once(clock.now_ms())
        broker.update_config({"pop_ck_rewrite_max_total_ms": "5500", "pop_ck_rewrite_ending": "drop"})
        for _ in range(50):
            clock.advance(100)
            await broker.pop.revive.run_once(clock.now_ms())
        assert [t - popped_at for t in reader.read_times_ms] == [2_000, 3_000, 4_000, 5_000, 5_500]
        assert (
            broker.metrics.value("pocketmq_pop_ck_endings_total", group="G", topic="T", queue_id=0, ending="drop") == 1
        )
        assert broker.config.pop_ck_rewrite_max_total_ms == 5_500
