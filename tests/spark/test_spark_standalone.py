"""The source, the sink and the example pipeline on a real Spark standalone cluster: a master and two workers
(pocketmq.testing.spark_standalone), each executor a JVM of its own with its own Python workers, the drivers
separate processes. JVMs start slowly, so the two long tests (the pipeline; exactly once across an executor killed
mid-batch and a driver killed and restarted: several minutes) are marked ``spark_cluster`` and run by
``make spark-cluster`` only; ``make test`` runs the short one, a few messages copied by executors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pocketmq.client.config import ClientConfig
from pocketmq.client.pull_consumer import PullConsumer
from pocketmq.testing.polling import wait_until
from pocketmq.testing.spark_standalone import StandaloneCluster, is_running

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 1200  # a driver and its executors on 2 shared cores: minutes under load


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("standalone")).start() as spark_cluster:
        yield spark_cluster


@pytest.fixture
def one_worker(tmp_path_factory):
    """The short test's cluster: a master and one worker (one JVM fewer to start)."""
    with StandaloneCluster(tmp_path_factory.mktemp("one-worker"), workers=1).start() as spark_cluster:
        yield spark_cluster


def driver_env() -> dict[str, str]:
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)


def tasks_run_by_executors(standalone: StandaloneCluster, before: set[Path]) -> dict[str, int]:
    """Per worker, the tasks its executors (started after ``before``) ran, from their logs."""
    runs: Counter[str] = Counter()
    for executor_dir in set(standalone.executor_dirs()) - before:
        log = (executor_dir / "stderr").read_text(errors="replace")
        runs[executor_dir.parent.parent.name] += log.count("Running task")
    return dict(runs)


def copy_job(standalone: StandaloneCluster, namesrv: str, source: str, target: str, work: Path) -> list[str]:
    """The command line of a driver running copy_job.py (a streaming copy of ``source`` into ``target``)."""
    (work / "marks").mkdir(exist_ok=True)
    return [
        sys.executable,
        str(Path(__file__).with_name("copy_job.py")),
        *("--master", standalone.master_url, "--namesrv", namesrv, "--source", source),
        *("--target", target, "--checkpoint", str(work / "checkpoint"), "--marks", str(work / "marks")),
    ]


def read_bodies(namesrv: str, topic: str) -> Counter[str]:
    bodies: Counter[str] = Counter()
    with PullConsumer("standalone-checker", ClientConfig(namesrv_addr=namesrv)) as consumer:
        for queue in consumer.fetch_queues(topic):
            offset, end = consumer.min_offset(queue), consumer.max_offset(queue)
            while offset < end:
                pulled = consumer.pull(queue, offset, 256)
                bodies.update(m.body.decode() for m in pulled.messages)
                offset = pulled.next_begin_offset
    return bodies


@pytest.mark.timeout(600)  # four JVMs start: over 4 minutes were seen on 2 cores shared with other test runs
def test_executors_in_other_processes_read_and_write(one_worker, cluster, tmp_path):
    source, target = cluster.new_topic("short-in"), cluster.new_topic("short-out")
    sent = cluster.produce(source, 40)
    copied = subprocess.run(
        [*copy_job(one_worker, cluster.namesrv, source, target, tmp_path), "--batch"],
        env=driver_env(),
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
    )
    assert copied.returncode == 0, copied.stdout[-3000:] + copied.stderr[-3000:]
    assert read_bodies(cluster.namesrv, target) == Counter(b.decode() for b in sent)
    # The rows went through executor JVMs the workers started, none through the driver.
    executors = {p.name for p in (tmp_path / "marks").glob("executor-*")}
    assert executors and "executor-None" not in executors


@pytest.mark.spark_cluster
@pytest.mark.timeout(1800)
def test_the_example_pipeline_on_the_cluster(standalone):
    before = set(standalone.executor_dirs())
    done = subprocess.run(
        [sys.executable, "run_pipeline.py", "--master", standalone.master_url, "--orders", "2000"],
        cwd=ROOT / "examples" / "pipeline",
        env=driver_env(),
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Both outputs hold every closed window once, across the job's stop and restart from its checkpoints.
    assert done.stdout.count("MATCH against") == 2 and "MISMATCH" not in done.stdout, done.stdout
    # The drivers planned; the executors of both workers read, aggregated and wrote.
    runs = tasks_run_by_executors(standalone, before)
    assert set(runs) == {"worker-0", "worker-1"} and all(runs.values()), runs


@pytest.mark.spark_cluster
@pytest.mark.timeout(1800)
def test_exactly_once_across_a_killed_executor_and_a_restarted_driver(standalone, cluster, tmp_path):
    MESSAGES = 40_000
    # Message n is at offset n // 4 of the topic's 4th queue n % 4; batch 1 reads offsets 0..5999 of each queue,
    # batch 2 the rest. The executor dies in batch 1 at offset 5800, when the sink has sent part of its rows;
    # the driver dies in batch 2.
    KILL_EXECUTOR_AT, KILL_DRIVER_AT = 5800 * 4, 8000 * 4
    source, target = cluster.new_topic("cluster-in"), cluster.new_topic("cluster-out")
    sent = cluster.produce(source, MESSAGES)
    job = copy_job(standalone, cluster.namesrv, source, target, tmp_path)
    marks = tmp_path / "marks"

    def held(n: int) -> dict:
        path = marks / f"held-{n}"
        return wait_until(lambda: path.exists() and json.loads(path.read_text()), JOB_TIMEOUT_S, message=path.name)

    log = (tmp_path / "driver-1.log").open("w")
    driver = subprocess.Popen(
        [*job, "--hold", str(KILL_EXECUTOR_AT), "--hold", str(KILL_DRIVER_AT)],
        env=driver_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its JVM in its group: killing the group kills the whole driver
    )
    try:
        executor = held(KILL_EXECUTOR_AT)["executor_pid"]
        assert executor in standalone.executor_pids()
        os.kill(executor, signal.SIGKILL)
        # Spark retries the task on an executor (a new one replaces the dead), the batch commits, batch 2 starts.
        held(KILL_DRIVER_AT)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        log.close()
    assert not is_running(executor)

    restarted = subprocess.run(
        [*job, "--available-now"], env=driver_env(), capture_output=True, text=True, timeout=JOB_TIMEOUT_S
    )
    assert restarted.returncode == 0, restarted.stdout[-3000:] + restarted.stderr[-3000:]
    copied = read_bodies(cluster.namesrv, target)
    assert sum(copied.values()) == MESSAGES and set(copied) == {b.decode() for b in sent}
    # Rows went through at least three executor JVMs (the killed one included), none of them a driver.
    executors = {p.name for p in marks.glob("executor-*")}
    assert "executor-None" not in executors and f"executor-{executor}" in executors and len(executors) >= 3
