"""A Spark standalone cluster of real processes on 127.0.0.1: one master and ``workers`` workers.

Each daemon is a JVM started from the PySpark distribution's own jars and classes
(``org.apache.spark.deploy.master.Master``, ``org.apache.spark.deploy.worker.Worker``), as ``spark-class`` would
start it, with ephemeral ports. A worker launches an executor JVM per application, and the executor forks its own
Python workers: so a job submitted to ``master_url`` reads and writes in processes other than its driver.

The cluster is tiny on purpose (tests and benches share small machines): each worker offers ``worker_cores``
cores and ``worker_memory_mb`` MB, and an application must ask for no more (``EXECUTOR_CONF``).
Workers and their executors inherit this process's environment: with ``PYSPARK_PYTHON`` the driver's
interpreter, Python workers import the same ``pocketmq`` (an installed package on the workers, the simplest of
the deployments in docs/spark.md).

    with StandaloneCluster(tmp_dir).start() as cluster:
        SparkSession.builder.master(cluster.master_url).config(map=EXECUTOR_CONF) ...
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

from pocketmq.testing.polling import wait_until

WORKER_MEMORY_MB = 512
# What an application asks of this cluster: one executor per worker, each the whole worker.
EXECUTOR_CONF = {
    "spark.executor.cores": "1",
    "spark.executor.memory": f"{WORKER_MEMORY_MB}m",
    "spark.cores.max": "2",
    "spark.driver.host": "127.0.0.1",
}
# Master and worker daemons only schedule (executors get their own JVMs): a small heap, and the quick compiler and
# serial collector, which start faster on a busy machine.
DAEMON_JAVA_OPTIONS = ["-Xmx160m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = "Successfully registered with master"
_PR_SET_PDEATHSIG = 1


def spark_home() -> Path:
    """The PySpark distribution: its ``jars/`` hold every class the daemons need."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def scala_version(home: Path) -> str:
    """``2.13`` for PySpark 4. A worker builds its executors' command line with Spark's launcher, which needs the
    Scala version (``spark-class`` exports it) to find ``jars/`` outside a source build."""
    launcher = next(home.glob("jars/spark-launcher_*.jar"))
    return launcher.name.split("_", 1)[1].split("-", 1)[0]


@dataclass
class SparkDaemon:
    """One master or worker JVM and its log."""

    name: str
    proc: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM (a worker's shutdown hook kills its executors), then SIGKILL after ``timeout_s``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class StandaloneCluster:
    def __init__(
        self, root: Path, *, workers: int = 2, worker_cores: int = 1, worker_memory_mb: int = WORKER_MEMORY_MB
    ):
        self.root = root
        self.worker_count = workers
        self.worker_cores = worker_cores
        self.worker_memory_mb = worker_memory_mb
        self.master: SparkDaemon | None = None
        self.workers: list[SparkDaemon] = []
        self.master_url = ""

    def start(self, timeout_s: float = 180.0) -> StandaloneCluster:
        try:
            self.master = self._launch("master", "org.apache.spark.deploy.master.Master", [])
            self.master_url = wait_until(
                lambda: self._logged(self.master, _MASTER_URL), timeout_s, message="the Spark master listening"
            )
            self.workers = [
                self._launch(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    [
                        "--cores",
                        str(self.worker_cores),
                        "--memory",
                        f"{self.worker_memory_mb}m",
                        "--work-dir",
                        str(self.root / f"worker-{i}"),
                        self.master_url,
                    ],
                )
                for i in range(self.worker_count)
            ]
            for worker in self.workers:
                wait_until(partial(self._registered, worker), timeout_s, message=f"{worker.name} registered")
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, name: str, main_class: str, args: list[str]) -> SparkDaemon:
        java = shutil.which("java") or "java"
        home = spark_home()
        env = dict(
            os.environ,
            SPARK_HOME=str(home),
            SPARK_SCALA_VERSION=scala_version(home),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_DIRS=str(self.root / "local"),
        )
        self.root.mkdir(parents=True, exist_ok=True)
        log_path = self.root / f"{name}.log"
        command = [
            java,
            *DAEMON_JAVA_OPTIONS,
            "-cp",
            f"{home}/jars/*",
            main_class,
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ]
        command += ["--webui-port", "0", *args]
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=_terminate_with_parent,
            )
        return SparkDaemon(name, proc, log_path)

    def _alive_log(self, daemon: SparkDaemon) -> str:
        if daemon.proc.poll() is not None:
            raise RuntimeError(f"Spark {daemon.name} exited with {daemon.proc.returncode}:\n{daemon.log()[-3000:]}")
        return daemon.log()

    def _registered(self, worker: SparkDaemon) -> bool:
        return _REGISTERED in self._alive_log(worker)

    def _logged(self, daemon: SparkDaemon | None, pattern: re.Pattern[str]) -> str | None:
        assert daemon is not None
        match = pattern.search(self._alive_log(daemon))
        return match.group(1) if match else None

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers run now (children of the worker processes)."""
        workers = {w.proc.pid for w in self.workers}
        return [pid for pid, ppid in _parents().items() if ppid in workers and EXECUTOR_MAIN in _cmdline(pid)]

    def executor_dirs(self) -> list[Path]:
        """Every executor's directory a worker created (``<work-dir>/<app-id>/<executor-id>``), dead ones too."""
        return sorted(p for i in range(self.worker_count) for p in (self.root / f"worker-{i}").glob("app-*/*"))

    def stop(self) -> None:
        for daemon in [*self.workers, *([self.master] if self.master else [])]:
            daemon.stop()

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _terminate_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the process that started it ends, a crashed test run
    included, so no daemon outlives its cluster (a worker's shutdown hook then stops its executors)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def executor_jvm_pid() -> int | None:
    """The executor JVM above this process, for code running in a Python worker; None when there is none (local
    mode: the Python workers hang off the driver's JVM). Looked up once per process: it reads all of ``/proc``."""
    return _executor_above(os.getpid())


@cache
def _executor_above(pid: int) -> int | None:
    parents = _parents()
    current = parents.get(pid)
    while current and current > 1:
        if EXECUTOR_MAIN in _cmdline(current):
            return current
        current = parents.get(current)
    return None


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (Linux ``/proc``)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_running(pid: int | None) -> bool:
    """Whether ``pid`` is a living process (not gone, not a zombie waiting for its parent)."""
    if pid is None:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
