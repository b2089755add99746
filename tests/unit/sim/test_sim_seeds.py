"""The deterministic simulation (pocketmq.testing.sim): many seeds pass every checker, a seed replays exactly,
and each checker catches a known bug injected into the simulated system, printing the seed to replay."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pocketmq.testing.sim import Bugs, replay_command, run_seed
from pocketmq.testing.sim.config import BUGS

# the short form: `make sim` runs 1000 seeds (docs/ha.md); POCKETMQ_SIM_SEEDS=N runs N here
SEEDS = int(os.environ.get("POCKETMQ_SIM_SEEDS", "60"))
BUG_SEARCH_SEEDS = 120  # each bug below is caught well within this many seeds (the first at seed <= 60 today)


@pytest.mark.timeout(300)  # CPU-bound: about 7 s alone, more on a machine busy with other work
def test_seeds_pass_every_checker():
    started = time.monotonic()
    failures = []
    for seed in range(SEEDS):
        result = run_seed(seed)
        if not result.ok:
            failures.append(result.report())
    elapsed_s = time.monotonic() - started
    assert not failures, f"{len(failures)} of {SEEDS} seeds failed ({elapsed_s:.1f} s):\n" + "\n".join(failures[:5])


def test_a_seed_replays_exactly():
    first, again, other = run_seed(11), run_seed(11), run_seed(12)
    assert [e for e in first.history.events] == [e for e in again.history.events]
    assert first.digest == again.digest and first.stats == again.stats
    assert other.digest != first.digest
    kinds = {kind for _, kind, _ in first.history.events}
    assert {"send_ok", "delivered", "ack_stored", "retry_copy", "broker_killed"} <= kinds  # a real run


@pytest.mark.parametrize(
    ("bug", "checker"),
    [
        ("sync_ack_before_replication", "sync_sends"),
        ("endless_ck_rewrite", "rewrite_bound"),
        ("breaker_ignored", "breaker_bound"),
        ("drop_ending", "pop_outcomes"),
    ],
)
def test_each_checker_catches_its_injected_bug(bug, checker):
    assert set(BUGS) >= {bug}
    bugs = Bugs(frozenset({bug}))
    for seed in range(BUG_SEARCH_SEEDS):
        result = run_seed(seed, bugs=bugs)
        if not result.ok:
            break
    else:
        pytest.fail(f"{bug}: no seed of {BUG_SEARCH_SEEDS} caught it")
    assert {v.checker for v in result.violations} == {checker}, result.report()
    report = result.report()
    assert report.startswith(f"seed={seed} FAILED")
    assert f"replay: {replay_command(seed, bugs)}" in report
    assert replay_command(seed, bugs) == f"python -m pocketmq.testing.sim --seed {seed} --bug {bug}"
    replayed = run_seed(seed, bugs=bugs)
    assert replayed.digest == result.digest and replayed.violations == result.violations


def test_the_command_line_prints_the_failing_seed_and_exits_1():
    seed = 0
    assert not run_seed(seed, bugs=Bugs(frozenset({"sync_ack_before_replication"}))).ok
    proc = subprocess.run(
        [sys.executable, "-m", "pocketmq.testing.sim", "--seed", str(seed), "--bug", "sync_ack_before_replication"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith(f"seed={seed} FAILED")
    assert "sync_sends:" in proc.stdout and f"--seed {seed} --bug sync_ack_before_replication" in proc.stdout
    summary = subprocess.run(
        [sys.executable, "-m", "pocketmq.testing.sim", "--seeds", "3", "--first", "5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert summary.returncode == 0, summary.stdout + summary.stderr
    assert summary.stdout.strip().splitlines()[-1].startswith("sim: 3 seeds from 5, 0 failed")


def test_no_silent_divergence_with_an_async_flush_window():
    """The HA bug the simulation found (docs/ha.md, 'What it found'): a master served slaves unflushed records;
    after its power loss it wrote new records where the slave held others, and the slave's offset acked them.
    Masters now serve only durable records and check the slave's last record (seeds 5 and 35 failed before)."""
    from pocketmq.testing.sim import SimConfig

    config = SimConfig(flush_latency_ms=(50, 400))  # the window ASYNC_FLUSH (the store default) leaves
    results = [run_seed(seed, config) for seed in (5, 35)]
    lost = [v for r in results for v in r.violations if v.checker == "sync_sends"]
    assert not lost, "\n".join(r.report() for r in results)


def test_an_exception_inside_a_run_is_reported_with_its_seed(monkeypatch):
    import pocketmq.broker.pop.revive as revive  # the simulation runs the real revive service

    def decide_raises(*args, **kwargs):
        raise ValueError("a core raised")

    monkeypatch.setattr(revive, "decide", decide_raises)
    result = run_seed(3)
    assert [v.checker for v in result.violations] == ["crash"]
    assert "ValueError: a core raised" in result.violations[0].detail
    assert (
        result.report().startswith("seed=3 FAILED")
        and "replay: python -m pocketmq.testing.sim --seed 3" in result.report()
    )
