"""The ratio table of `make bench-peers`: result lines in, PocketMQ's ratio to each peer's best out."""

import json

import pytest

from pocketmq.testing import peer_ratios
from pocketmq.testing.peer_ratios import format_table, measures, ratio_rows, read_lines, redelivery_lateness_ms


def line(peer, test, settings, result):
    return json.dumps(
        {"peer": peer, "test": test, "date": "2026-11-27T15:00:00+0000", "settings": settings, "result": result}
    )


def rate(peer, test, msgs_per_s, **settings):
    return line(peer, test, settings, {"msgs": 1000, "seconds": 1.0, "msgs_per_s": msgs_per_s})


RUN = [
    '{"peer": "nats", "test": "loadavg", "date": "2026-11-27T15:00:00+0000", "result": {"load1": 2.5, "load5": 3.0, "load15": 4.0}}',
    "+ bench_nats.py --test produce_sync",  # chatter on the same stream is skipped
    rate("nats-jetstream", "produce_sync", 6000, batch=100),
    rate("nats-jetstream", "produce_batch", 50000, batch=100),
    rate("nats-jetstream", "consume", 30000, batch=100, ack_mode="each"),
    rate("nats-jetstream", "consume", 6000, batch=100, ack_mode="sync"),
    rate("redis-streams", "produce_sync", 10000, batch=100, appendfsync="everysec"),
    rate("redis-streams", "produce_sync", 2000, batch=100, appendfsync="always"),
    rate("redis-streams", "consume", 10000, batch=100, ack_mode="each"),
    rate("redis-streams", "consume", 100000, batch=100, ack_mode="pipeline"),
    line("nats-jetstream", "latency", {"rate": 1000, "lat_mode": "pull"}, {"e2e_us": {"p50": 300.0, "p99": 600.0}}),
    line("nats-jetstream", "latency", {"rate": 1000, "lat_mode": "push"}, {"e2e_us": {"p50": 200.0, "p99": 500.0}}),
    rate("pocketmq", "produce_sync", 7500, batch=100, client_kind="Producer.send"),
    rate("pocketmq", "produce_batch", 25000, batch=100, client_kind="AsyncProducer.send_async"),
    rate("pocketmq", "produce_sync", 1500, batch=100, client_kind="Producer.send", flush="SYNC_FLUSH"),
    rate("pocketmq", "consume", 4000, batch=100, ack_mode="sync", consumer="pop"),
    rate("pocketmq", "consume", 15000, batch=100, ack_mode="each", consumer="push"),
    line("pocketmq", "latency", {"rate": 1000, "consumer": "pop"}, {"e2e_us": {"p50": 400.0, "p99": 1000.0}}),
]


def rows_by_workload():
    rows, peers = ratio_rows(read_lines(RUN))
    return {(r.pocketmq.workload, r.pocketmq.variant): r for r in rows}, peers


def test_only_result_objects_are_read():
    records = read_lines([*RUN, "{not json", "[1, 2]", '{"no": "peer"}', ""])
    assert len(records) == len(RUN) - 1
    assert records[0]["test"] == "loadavg"


def test_throughput_ratio_is_pocketmq_over_the_peer():
    rows, peers = rows_by_workload()
    assert peers == ["nats-jetstream", "redis-streams"]
    row = rows[("produce, one in flight", "Producer.send")]
    assert row.peers["nats-jetstream"] == (6000, 1.25)
    # Redis's appendfsync always line is a workload of its own: not the one PocketMQ's ASYNC produce is set against
    assert row.peers["redis-streams"] == (10000, 0.75)


def test_a_sync_flush_produce_is_set_against_redis_appendfsync_always_only():
    rows, _ = rows_by_workload()
    durable = [row for (workload, _), row in rows.items() if "fsync" in workload]
    assert len(durable) == 1 and durable[0].pocketmq.value == 1500
    assert durable[0].peers["redis-streams"] == (2000, 0.75)
    assert durable[0].peers["nats-jetstream"] is None


def test_a_workload_a_peer_did_not_run_has_no_ratio():
    rows, _ = rows_by_workload()
    row = rows[("produce, 100 in flight", "AsyncProducer.send_async")]
    assert row.peers["nats-jetstream"] == (50000, 0.5)
    assert row.peers["redis-streams"] is None


def test_ack_modes_are_matched_by_meaning_not_by_name():
    rows, _ = rows_by_workload()
    waited = rows[("consume + ack, each ack waited", "pop")]
    assert waited.peers["nats-jetstream"] == (6000, pytest.approx(4000 / 6000))  # NATS `sync`
    assert waited.peers["redis-streams"] == (10000, 0.4)  # Redis `each`
    not_waited = rows[("consume + ack, acks not waited", "push")]
    assert not_waited.peers["nats-jetstream"] == (30000, 0.5)  # NATS `each`
    assert not_waited.peers["redis-streams"] == (100000, 0.15)  # Redis `pipeline`


def test_latency_is_set_against_the_peers_best_variant_and_inverted():
    rows, _ = rows_by_workload()
    p50 = rows[("e2e latency at 1000 msg/s, p50", "pop")]
    assert p50.peers["nats-jetstream"] == (200.0, 0.5)  # NATS push, the better of pull and push
    p99 = rows[("e2e latency at 1000 msg/s, p99", "pop")]
    assert p99.peers["nats-jetstream"] == (500.0, 0.5)


def test_redelivery_lateness_is_the_worst_p99_beyond_the_backoff():
    result = {
        "backoff_s": [1.0, 2.0],
        "gap_ms_by_delivery": {
            "delivery2": {"p99": 1030.0},
            "delivery3": {"p99": 2010.0},
            "delivery4": {"p99": 2500.0},
        },
    }
    assert redelivery_lateness_ms(result) == 500.0  # delivery 4 waits the last backoff again
    nats = {"ack_wait_s": 1.0, "backoff_s": None, "gap_ms_by_delivery": {"delivery2": {"p99": 1000.2}}}
    assert redelivery_lateness_ms(nats) == peer_ratios.LATENESS_FLOOR_MS
    assert redelivery_lateness_ms({"gap_ms_by_delivery": {}}) is None


def test_lines_without_comparable_figures_give_no_measures():
    loadavg, physical = json.loads(RUN[0]), {"peer": "physical", "test": "disk", "result": {}}
    assert measures(loadavg) == [] and measures(physical) == []
    assert measures(json.loads(rate("nats-jetstream", "consume", None))) == []


def test_table_has_a_column_pair_per_peer():
    rows, peers = ratio_rows(read_lines(RUN))
    table = format_table(rows, peers).splitlines()
    assert table[0] == (
        "| workload | PocketMQ | PocketMQ figure | nats-jetstream | ratio to nats-jetstream | redis-streams "
        "| ratio to redis-streams |"
    )
    assert (
        "| produce, one in flight | Producer.send | 7,500 msg/s | 6,000 msg/s | 1.25x | 10,000 msg/s | 0.75x |" in table
    )
    assert (
        "| produce, 100 in flight | AsyncProducer.send_async | 25,000 msg/s | 50,000 msg/s | 0.50x | - | - |" in table
    )


def test_main_prints_the_table_and_the_load(tmp_path, capsys):
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join(RUN) + "\n")
    assert peer_ratios.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "nats 2026-11-27T15:00:00+0000: 2.5 / 3.0 / 4.0" in out
    assert "| consume + ack, acks not waited | push |" in out


def test_main_without_peers_says_so_and_without_pocketmq_fails(tmp_path, capsys):
    alone = tmp_path / "alone.jsonl"
    alone.write_text(rate("pocketmq", "produce_sync", 7500, batch=100) + "\n")
    assert peer_ratios.main([str(alone)]) == 0
    assert "no peer results" in capsys.readouterr().out
    peers_only = tmp_path / "peers.jsonl"
    peers_only.write_text(rate("nats-jetstream", "produce_sync", 6000, batch=100) + "\n")
    assert peer_ratios.main([str(peers_only)]) == 1
