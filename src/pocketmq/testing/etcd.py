"""A real single-node etcd on 127.0.0.1 for tests of the controller (``serve --controller etcd://...``).

- ``etcd_problem()``: ``None`` when an ``etcd`` 3.x binary is on PATH, else one sentence saying what is wrong
  and how to fix it.
- ``etcd_required()``: in CI (``CI`` set to a true value) a missing etcd is an error, not a reason to skip:
  the same rule as Java for the Spark tests (both checks are ``pocketmq.testing.tools``).
- ``etcd_or_skip()``: what a fixture calls first: skips the test (fails it in CI) when etcd is missing.
- ``EtcdServer``: ``start()`` runs ``etcd`` in a temp directory on free ports and waits until it answers;
  ``pause()`` / ``resume()`` stop and continue it (nobody reaches it meanwhile), ``kill()`` ends it (SIGKILL).
- ``etcd_server``: the pytest fixture's body (``etcd = pytest.fixture(etcd_server)`` in a test module). ``endpoint`` is the ``etcd://127.0.0.1:PORT`` brokers take.
- ``python -m pocketmq.testing.etcd``: prints the problem and exits 1 (``make etcd`` runs it).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pocketmq.testing.chaos.cluster import free_port
from pocketmq.testing.polling import wait_until
from pocketmq.testing.tools import Tool, exit_on_problem, skip_or_fail, tool_problem, tool_required

MIN_ETCD_MAJOR = 3
NEEDED_BY = f"the failover tests need etcd {MIN_ETCD_MAJOR}.x"
INSTALL_HINT = "install etcd 3.x (Debian: apt-get install etcd-server) and put etcd on PATH"
_VERSION = re.compile(r"etcd Version: (\d+)\.(\d+)")


def etcd_major(version_output: str) -> int | None:
    match = _VERSION.search(version_output)
    return int(match.group(1)) if match else None


ETCD = Tool("etcd", "--version", etcd_major, lambda major: major == MIN_ETCD_MAJOR, "is not etcd 3.x", INSTALL_HINT)


def etcd_problem() -> str | None:
    return tool_problem(ETCD)


def etcd_required() -> bool:
    """Whether a missing etcd fails the tests that need it (CI), rather than skipping them."""
    return tool_required()


@dataclass
class EtcdServer:
    workdir: Path
    client_port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"etcd://127.0.0.1:{self.client_port}"

    def start(self, timeout_s: float = 20.0) -> EtcdServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.client_port = free_port()
        peer_port = free_port()
        client_url, peer_url = f"http://127.0.0.1:{self.client_port}", f"http://127.0.0.1:{peer_port}"
        args = [
            "etcd",
            *("--name", "test", "--data-dir", str(self.workdir / "data")),
            *("--listen-client-urls", client_url, "--advertise-client-urls", client_url),
            *("--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url),
            *("--initial-cluster", f"test={peer_url}", "--log-level", "warn"),
        ]
        with open(self.workdir / "etcd.log", "ab") as log_file:
            self.proc = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, cwd=self.workdir)
        try:
            wait_until(self._answers, timeout_s, f"etcd on {client_url}")
        except AssertionError:
            self.kill()
            tail = (self.workdir / "etcd.log").read_text(errors="replace")[-2000:]
            raise TimeoutError(f"etcd did not start on {client_url}:\n{tail}") from None
        return self

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"etcd exited with {self.proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", self.client_port), timeout=0.2) as conn:
                conn.sendall(b"GET /health HTTP/1.0\r\n\r\n")
                return b'"health":"true"' in conn.recv(4096)
        except OSError:
            return False

    def pause(self) -> None:
        """SIGSTOP: etcd answers nobody (every broker is cut off from it) until ``resume``."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def etcd_or_skip() -> None:
    """Skip the calling test when etcd is missing; in CI, fail it."""
    skip_or_fail(etcd_problem(), NEEDED_BY)


def etcd_server(tmp_path: Path):
    """A started ``EtcdServer`` in ``tmp_path / "etcd"`` (skipped, or failed in CI, without etcd), killed after the
    test: a generator for a pytest fixture (``etcd = pytest.fixture(etcd_server)``)."""
    etcd_or_skip()
    server = EtcdServer(tmp_path / "etcd").start()
    try:
        yield server
    finally:
        server.resume()
        server.kill()


if __name__ == "__main__":
    exit_on_problem(ETCD, NEEDED_BY)
