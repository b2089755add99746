"""Start real ``pocketmq`` processes on 127.0.0.1 with ephemeral ports, for integration tests.

A process is started with ``--ready-file PATH``: once listening, it writes a JSON object of its addresses
(``{"remoting": "127.0.0.1:P", "namesrv": "127.0.0.1:P" | null, "grpc": "127.0.0.1:P" | null}``) there,
atomically. Ports are 0 (the OS picks) unless given, so tests never collide.

Processes start in standbys that imported the broker ahead of time (``pocketmq.testing.standby``): a start takes
tens of milliseconds instead of a second, and a process stops by itself when the process that started it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.testing.polling import wait_until
from pocketmq.testing.standby import STANDBYS, release
from pocketmq.testing.warm_python import shared_warm_python

STACKS_WRITE_S = 2.0  # for a process that did not stop to write its threads' stacks before it is killed


@dataclass
class PocketProcess:
    """A running ``pocketmq`` process and the addresses it reported."""

    args: list[str]
    workdir: Path
    log_path: Path
    ready_file: Path
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    addresses: dict[str, str | None] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        """The id of the process of the latest start (it may have exited since)."""
        if self.proc is None:
            raise RuntimeError(f"pocketmq {' '.join(self.args)} not started")
        return self.proc.pid

    def address(self, kind: str) -> str:
        """The ``kind`` address the process reported; LookupError when it reported none (not started, or it
        serves no such port: a broker with an outside name server has no "namesrv")."""
        addr = self.addresses.get(kind)
        if addr is None:
            raise LookupError(f"pocketmq {' '.join(self.args)} reported no {kind} address")
        return addr

    @property
    def remoting(self) -> str:
        return self.address("remoting")

    @property
    def namesrv(self) -> str:
        return self.address("namesrv")

    @property
    def grpc(self) -> str:
        return self.address("grpc")

    @property
    def metrics(self) -> str | None:
        """The ``/metrics`` HTTP address (``serve --metrics-port``), else None."""
        return self.addresses.get("metrics")

    def start(self, timeout_s: float = 30.0) -> PocketProcess:
        self.ready_file.unlink(missing_ok=True)
        if self.proc is not None:
            release(self.proc)  # the process of the previous start, ended (``restart``) or killed by the test
        self.proc = STANDBYS.launch(
            [*self.args, "--ready-file", str(self.ready_file)], cwd=self.workdir, env=self.env, log_path=self.log_path
        )
        try:
            self.addresses = wait_until(self._addresses_when_ready, timeout_s, interval_s=0.02)
        except AssertionError:
            self.kill()
            raise TimeoutError(
                f"pocketmq {' '.join(self.args)} not ready within {timeout_s}s:\n{self.log_tail()}"
            ) from None
        STANDBYS.prewarm()  # for the next start, now that this one no longer needs the CPU
        return self

    def _addresses_when_ready(self) -> dict[str, str | None] | None:
        """The addresses of the ready file once written; RuntimeError when the process exited instead."""
        assert self.proc is not None, "not started"
        if self.ready_file.exists():
            return json.loads(self.ready_file.read_text())
        if self.proc.poll() is not None:
            raise RuntimeError(f"pocketmq {' '.join(self.args)} exited with {self.proc.returncode}:\n{self.log_tail()}")
        return None

    def kill(self) -> None:
        """``kill -9``: no flush, no goodbye."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        if self.proc:
            release(self.proc)

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """A clean stop (SIGTERM), escalating to SIGKILL after ``timeout_s``; before that, SIGUSR1 has the process
        write every thread's stack into its log (cli/running.py), which says where the stop hung."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGUSR1)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=STACKS_WRITE_S)
                self.kill()
        if self.proc:
            release(self.proc)
        return self.proc.returncode if self.proc else None

    def restart(self, timeout_s: float = 30.0) -> PocketProcess:
        """Start again with the same arguments; with port 0 the ports change unless pinned in ``args``."""
        return self.start(timeout_s)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(home)  # the official client and anything else that logs under ~ stays in the test dir
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def broker_process(
    workdir: Path, name: str = "broker-a", *, namesrv: str | None = None, extra_args: list[str] | None = None
) -> PocketProcess:
    """A ``pocketmq serve`` process (embedded name server unless ``namesrv`` is given), not yet started.

    Ports default to 0; pin them in ``extra_args`` to keep them across ``restart()``.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    args = ["serve", "--data-dir", str(workdir / "data"), "--broker-name", name]
    given = " ".join(extra_args or [])
    if "--remoting-port" not in given:
        args += ["--remoting-port", "0"]
    if "--port" not in given.replace("--remoting-port", "").replace("--namesrv-port", ""):
        args += ["--port", "0"]
    if namesrv:
        args += ["--namesrv", namesrv]
    elif "--namesrv-port" not in given:
        args += ["--namesrv-port", "0"]
    args += extra_args or []
    return PocketProcess(
        args=args,
        workdir=workdir,
        log_path=workdir / f"{name}.log",
        ready_file=workdir / f"{name}.ready.json",
        env=_env(workdir),
    )


def namesrv_process(workdir: Path, *, extra_args: list[str] | None = None) -> PocketProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    args = ["namesrv", "--port", "0", *(extra_args or [])]
    return PocketProcess(
        args=args,
        workdir=workdir,
        log_path=workdir / "namesrv.log",
        ready_file=workdir / "namesrv.ready.json",
        env=_env(workdir),
    )


def proxy_process(
    workdir: Path, namesrv: str, *, workers: int = 2, extra_args: list[str] | None = None
) -> PocketProcess:
    """A ``pocketmq proxy`` process of ``workers`` workers on an ephemeral gRPC port, not yet started."""
    workdir.mkdir(parents=True, exist_ok=True)
    args = ["proxy", "--namesrv", namesrv, "--grpc-port", "0", "--workers", str(workers), *(extra_args or [])]
    return PocketProcess(
        args=args,
        workdir=workdir,
        log_path=workdir / "proxy.log",
        ready_file=workdir / "proxy.ready.json",
        env=_env(workdir),
    )


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc), for benchmarks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A resident memory figure of ``pid`` in MiB (/proc status: VmRSS, and its parts RssAnon, the heap, and RssFile,
    pages of mapped files such as the store's that the kernel can drop), for benchmarks; 0.0 when absent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# ``--set`` arguments for ``broker_process`` giving delay level n a wait of n * 100 ms, so retries come back fast
FAST_DELAY_LEVEL_ARGS = ["--set", "message_delay_level=" + " ".join(f"{100 * i}ms" for i in range(1, 19))]


def run_cli(
    *args: str, namesrv: str | None = None, stdin: str | None = None, env: dict[str, str] | None = None, timeout_s=30.0
) -> subprocess.CompletedProcess:
    """One ``pocketmq`` client command to its end, its output captured as text; ``POCKETMQ_NAMESRV`` is
    ``namesrv`` (unset when ``None``), ``POCKETMQ_NAMESPACE`` unset, ``env`` adds variables. It runs in the warm Python of this process
    (``pocketmq.testing.warm_python``: no second of imports per command)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("POCKETMQ_NAMESRV", "POCKETMQ_NAMESPACE")}
    full_env.update({"POCKETMQ_NAMESRV": namesrv} if namesrv else {})
    full_env.update(env or {})
    return subprocess.run(
        [str(shared_warm_python().bin_dir / "pocketmq"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=full_env,
    )
