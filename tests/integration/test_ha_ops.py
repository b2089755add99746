"""Operating an HA cluster with real processes: ``pocketmq config set|get`` (applied at once on every broker,
kept over a restart, a refused value changing nothing), ``pocketmq cluster`` with a slave's replication lag,
and ``/metrics`` showing counters that moved."""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest

from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process, namesrv_process, run_cli

pytestmark = pytest.mark.timeout(120)


def pocketmq(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def scrape(addr: str) -> str:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def sample(text: str, line_start: str) -> float | None:
    """The value of the first sample line starting with ``line_start`` (name and labels), else None."""
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A name server, group-a (SYNC master + slave) and group-b (master), each serving /metrics."""
    tmp_path = tmp_path_factory.mktemp("ops")
    namesrv = namesrv_process(tmp_path / "ns").start()
    procs = {}

    def start(name: str, group: str, broker_id: int, role: str) -> None:
        procs[name] = broker_process(
            tmp_path / name,
            group,
            namesrv=namesrv.namesrv,
            extra_args=[
                "--cluster",
                "ops",
                "--broker-id",
                str(broker_id),
                "--role",
                role,
                "--metrics-port",
                "0",
                "--register-interval-ms",
                "500",
                "--set",
                "ha_master_lookup_interval_ms=200",
                "--set",
                "pop_ck_rewrite_backoff_ms=1000",
                "--set",
                "pop_revive_interval_ms=100",
            ],
        ).start()

    start("a0", "group-a", 0, "sync_master")
    start("a1", "group-a", 1, "slave")
    start("b0", "group-b", 0, "async_master")
    wait_until(
        lambda: len(json_lines(pocketmq("cluster", "--json", "-n", namesrv.namesrv).stdout)) == 3,
        15,
        message="three brokers registered",
    )
    yield namesrv.namesrv, procs
    for proc in (*procs.values(), namesrv):
        proc.kill()


def test_config_set_get_persist_and_refuse(cluster):
    namesrv, procs = cluster
    set_all = pocketmq("config", "set", "pop_ck_rewrite_backoff_ms", "2000,4000", "--json", "-n", namesrv)
    assert set_all.returncode == 0, set_all.stderr
    assert sorted((r["broker"], r["broker_id"]) for r in json_lines(set_all.stdout)) == [
        ("group-a", 0),
        ("group-a", 1),
        ("group-b", 0),
    ]

    one_group = pocketmq("config", "set", "breaker_failure_threshold", "2", "--broker", "group-b", "-n", namesrv)
    assert one_group.returncode == 0, one_group.stderr

    def values(key: str) -> dict:
        got = pocketmq("config", "get", key, "--json", "-n", namesrv)
        assert got.returncode == 0, got.stderr
        return {(r["broker"], r["broker_id"]): r["value"] for r in json_lines(got.stdout)}

    assert set(values("pop_ck_rewrite_backoff_ms").values()) == {"2000,4000"}
    assert values("breaker_failure_threshold") == {("group-a", 0): "5", ("group-a", 1): "5", ("group-b", 0): "2"}

    # Refused before anything is sent: one error line, exit 1, nothing changed.
    for bad in (
        ["pop_ck_rewrite_ending", "forever"],
        ["no_such_setting", "1"],
        ["remoting_port", "1"],
        ["breaker_failure_threshold", "0"],
    ):
        refused = pocketmq("config", "set", *bad, "-n", namesrv)
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert refused.stderr.startswith("pocketmq config: error:")
    assert set(values("pop_ck_rewrite_ending").values()) == {"dlq"}
    assert values("breaker_failure_threshold")[("group-b", 0)] == "2"
    unknown_get = pocketmq("config", "get", "no_such_setting", "-n", namesrv)
    assert unknown_get.returncode == 1 and "unknown setting" in unknown_get.stderr
    unknown_broker = pocketmq("config", "get", "--broker", "group-z", "-n", namesrv)
    assert unknown_broker.returncode == 1 and "group-z" in unknown_broker.stderr

    # The brokers were started with --set pop_ck_rewrite_backoff_ms=1000: the run-time change survives that.
    procs["b0"].stop()
    procs["b0"].restart()
    wait_until(
        lambda: values("pop_ck_rewrite_backoff_ms").get(("group-b", 0)) == "2000,4000",
        15,
        message="group-b back with its changed settings",
    )
    assert values("breaker_failure_threshold")[("group-b", 0)] == "2"
    assert sample(scrape(procs["a1"].metrics), "pocketmq_config_updates_total") == 1  # the slave got it too


def test_cluster_shows_slave_lag_and_metrics_show_it(cluster):
    namesrv, procs = cluster
    sent = pocketmq("send", "ops_topic", "--count", "5", "-n", namesrv)
    assert sent.returncode == 0, sent.stderr

    def slave_row() -> dict | None:
        rows = json_lines(pocketmq("cluster", "--json", "-n", namesrv).stdout)
        row = next(r for r in rows if (r["broker"], r["broker_id"]) == ("group-a", 1))
        return row if row["lag_bytes"] == 0 else None

    row = wait_until(slave_row, 15, message="the slave caught up, as its master reports")
    assert row["lag_s"] == 0 and row["breakers"] == {}
    table = pocketmq("cluster", "-n", namesrv).stdout.splitlines()
    assert table[0].split()[-3:] == ["LAG_BYTES", "LAG_S", "BREAKERS"]

    text = scrape(procs["a0"].metrics)
    slave_addr = row["address"]
    assert sample(text, f'pocketmq_ha_slave_lag_bytes{{slave="{slave_addr}"}}') == 0
    assert sample(text, f'pocketmq_ha_slave_lag_seconds{{slave="{slave_addr}"}}') == 0
    assert "# TYPE pocketmq_ha_slave_lag_bytes gauge" in text


def test_revive_counter_moves_in_metrics_and_group_describe(cluster):
    from pocketmq.client import Admin, ClientConfig, Producer, SimpleConsumer
    from pocketmq.common.message import Message

    namesrv, procs = cluster
    config = ClientConfig(namesrv_addr=namesrv)
    with Admin(config) as admin:
        admin.create_topic("ops_pop", queues=1)
    with Producer(config) as producer:
        for i in range(4):  # round robin over both masters' queue
            producer.send(Message.create("ops_pop", f"m{i}"))

    def retried_total() -> float:
        return sum(
            sample(
                scrape(procs[name].metrics),
                'pocketmq_pop_revive_messages_total{group="ops_group",outcome="retried",queue_id="0",topic="ops_pop"}',
            )
            or 0
            for name in ("a0", "b0")
        )

    assert retried_total() == 0
    with SimpleConsumer("ops_group", {"ops_pop": "*"}, config) as consumer:
        got = []
        wait_until(
            lambda: got.extend(consumer.receive(32, 1000, await_duration_ms=500)) or len(got) >= 4,
            20,
            message="all four popped",
        )  # none acked
        wait_until(lambda: retried_total() == 4, 20, message="revive retried the un-acked messages")
    described = json_lines(
        pocketmq("group", "describe", "ops_group", "--topic", "ops_pop", "--json", "-n", namesrv).stdout
    )
    assert sum(r["retried"] for r in described) == 4
    assert {r["ck_rewrites"] for r in described} == {0} and {r["ck_endings"] for r in described} == {0}
