"""The in-memory metrics registry: counters, gauges, histograms with labels, collectors and limits."""

from __future__ import annotations

import pytest

from pocketmq.metrics import MetricsRegistry


def test_counter_counts_per_label_set():
    metrics = MetricsRegistry()
    reads = metrics.counter("reads_total", "reads", ("broker", "result"))
    reads.inc(broker="b", result="FOUND")
    reads.inc(3, broker="b", result="FOUND")
    reads.inc(broker="c", result="FAILED")
    assert metrics.value("reads_total", broker="b", result="FOUND") == 4
    assert metrics.value("reads_total", broker="c", result="FAILED") == 1
    assert metrics.value("reads_total", broker="c", result="FOUND") == 0  # never moved
    assert metrics.value("no_such_total") == 0
    assert reads.values() == {("b", "FOUND"): 4, ("c", "FAILED"): 1}


def test_counter_refuses_to_go_down_and_wrong_labels():
    reads = MetricsRegistry().counter("reads_total", "reads", ("broker",))
    with pytest.raises(ValueError, match="cannot go down"):
        reads.inc(-1, broker="b")
    with pytest.raises(ValueError, match=r"takes labels \['broker'\]"):
        reads.inc(result="x")


def test_asking_again_returns_the_family_and_a_clash_is_an_error():
    metrics = MetricsRegistry()
    first = metrics.counter("x_total", "x", ("a",))
    assert metrics.counter("x_total", "x", ("a",)) is first
    with pytest.raises(ValueError, match="exists as a counter"):
        metrics.gauge("x_total", "x", ("a",))
    with pytest.raises(ValueError, match="exists as a counter"):
        metrics.counter("x_total", "x", ("b",))
    with pytest.raises(ValueError, match="not Prometheus names"):
        metrics.counter("bad-name_total", "x")


def test_gauge_sets_moves_and_removes():
    metrics = MetricsRegistry()
    lag = metrics.gauge("lag_bytes", "lag", ("slave",))
    lag.set(100, slave="s1")
    lag.inc(-40, slave="s1")
    assert metrics.value("lag_bytes", slave="s1") == 60
    lag.remove(slave="s1")
    assert lag.values() == {}


def test_histogram_buckets_sum_and_count():
    metrics = MetricsRegistry()
    latency = metrics.histogram("latency_seconds", "latency", ("broker",), buckets=(0.01, 0.1, 1.0))
    for value in (0.005, 0.01, 0.05, 2.0):
        latency.observe(value, broker="b")
    assert latency.count(broker="b") == 4 and latency.sum(broker="b") == pytest.approx(2.065)
    [family] = metrics.collect()
    buckets = [(s.labels["le"], s.value) for s in family.samples if s.suffix == "_bucket"]
    assert buckets == [("0.01", 2), ("0.1", 3), ("1.0", 3), ("+Inf", 4)]  # cumulative; le includes the bound
    with pytest.raises(ValueError, match="histogram"):
        metrics.value("latency_seconds", broker="b")


def test_collectors_run_before_every_collect():
    metrics = MetricsRegistry()
    gauge = metrics.gauge("computed", "set by a collector")
    calls = []

    def collector():
        calls.append(1)
        gauge.set(len(calls))

    metrics.add_collector(collector)
    metrics.collect()
    [family] = metrics.collect()
    assert family.samples[0].value == 2


def test_a_failing_collector_hides_nothing_else():
    metrics = MetricsRegistry()
    metrics.counter("kept_total", "kept").inc()

    def broken():
        raise RuntimeError("boom")

    metrics.add_collector(broken)
    assert [f.name for f in metrics.collect()] == ["kept_total"]


def test_series_past_the_limit_are_not_recorded():
    metrics = MetricsRegistry(max_series=2)
    c = metrics.counter("c_total", "c", ("k",))
    for key in "abc":
        c.inc(k=key)
    c.inc(k="a")  # existing series still move
    assert c.values() == {("a",): 2, ("b",): 1}


def test_registries_are_independent():
    one, two = MetricsRegistry(), MetricsRegistry()
    one.counter("c_total", "c").inc()
    assert two.value("c_total") == 0
