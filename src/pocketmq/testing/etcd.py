"""A real etcd (one member, or a cluster of several) on 127.0.0.1 for tests of the controller (``serve --controller
etcd://...``).

- ``etcd_problem()``: ``None`` when an ``etcd`` 3.x binary is on PATH, else one sentence saying what is wrong
  and how to fix it.
- ``etcd_required()``: in CI (``CI`` set to a true value) a missing etcd is an error, not a reason to skip:
  the same rule as Java for the Spark tests (both checks are ``pocketmq.testing.tools``).
- ``etcd_or_skip()``: what a fixture calls first: skips the test (fails it in CI) when etcd is missing.
- ``EtcdCluster``: ``start()`` runs ``size`` ``etcd`` members (one by default) in a temp directory on free ports
  and waits until each is healthy; ``pause()`` / ``resume()`` stop and continue all of them (nobody reaches
  etcd meanwhile), ``kill()`` ends them (SIGKILL). One member: ``members[i].kill()`` / ``pause()`` /
  ``resume()``, and ``restart(member)`` starts a killed one again on its ports and data; ``leader()`` is the
  member raft elected, ``not_leading(member)`` hands the leadership on when that member has it. ``endpoint`` is the
  ``etcd://127.0.0.1:P1,...`` brokers take.
- ``etcd_server``: the pytest fixture's body for one member (``etcd = pytest.fixture(etcd_server)`` in a test
  module).
- ``python -m pocketmq.testing.etcd``: prints the problem and exits 1 (``make etcd`` runs it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.runtime.ports import free_port
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
class EtcdMember:
    """One etcd process of an ``EtcdCluster``; its ports stay the same over ``kill`` and ``start``."""

    name: str
    workdir: Path
    client_port: int
    peer_port: int
    proc: subprocess.Popen | None = None

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def spawn(self, initial_cluster: str) -> None:
        """Start the process (its data directory, once written, says which cluster it belongs to)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            "etcd",
            *("--name", self.name, "--data-dir", str(self.workdir / "data")),
            *("--listen-client-urls", self.client_url, "--advertise-client-urls", self.client_url),
            *("--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url),
            *("--initial-cluster", initial_cluster, "--log-level", "warn"),
        ]
        with open(self.workdir / "etcd.log", "ab") as log_file:
            self.proc = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, cwd=self.workdir)

    def answers(self) -> bool:
        """Whether it is healthy: up, and part of a cluster that has a leader."""
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"etcd {self.name} exited with {self.proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", self.client_port), timeout=0.2) as conn:
                conn.sendall(b"GET /health HTTP/1.0\r\n\r\n")
                return b'"health":"true"' in conn.recv(4096)
        except OSError:
            return False

    def log_tail(self) -> str:
        return (self.workdir / "etcd.log").read_text(errors="replace")[-2000:]

    def pause(self) -> None:
        """SIGSTOP: it answers nobody (clients nor the other members) until ``resume``."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@dataclass
class EtcdCluster:
    """``size`` etcd members on 127.0.0.1 (one by default); ``pause``, ``resume`` and ``kill`` act on every member,
    ``members[i]`` on one."""

    workdir: Path
    size: int = 1
    members: list[EtcdMember] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        """What brokers take: ``etcd://127.0.0.1:P1,127.0.0.1:P2,...``."""
        return "etcd://" + ",".join(f"127.0.0.1:{m.client_port}" for m in self.members)

    def start(self, timeout_s: float = 30.0) -> EtcdCluster:
        self.members = [EtcdMember(f"m{i}", self.workdir / f"m{i}", free_port(), free_port()) for i in range(self.size)]
        try:
            for member in self.members:
                member.spawn(self._initial_cluster())
            for member in self.members:
                self.wait_healthy(member, timeout_s)
        except (AssertionError, RuntimeError):
            self.kill()
            raise
        return self

    def _initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    def wait_healthy(self, member: EtcdMember, timeout_s: float = 30.0) -> None:
        try:
            wait_until(member.answers, timeout_s, f"etcd {member.name} on {member.client_url}")
        except AssertionError:
            raise TimeoutError(
                f"etcd {member.name} is not healthy on {member.client_url}:\n{member.log_tail()}"
            ) from None

    def restart(self, member: EtcdMember, timeout_s: float = 30.0) -> None:
        """Start a killed member again on its ports and data, and wait until it is healthy."""
        member.spawn(self._initial_cluster())
        self.wait_healthy(member, timeout_s)

    def leader(self) -> EtcdMember:
        """The member raft elected leader, as the first member that answers says."""
        for member in self.members:
            with contextlib.suppress(OSError, ValueError):
                by_id = {_post(m, "/v3/maintenance/status")["header"]["member_id"]: m for m in self.members}
                return by_id[_post(member, "/v3/maintenance/status")["leader"]]
        raise RuntimeError("no etcd member says who leads")

    def not_leading(self, member: EtcdMember, timeout_s: float = 10.0) -> None:
        """Make sure ``member`` is a follower: killing the leader stops etcd for an election (about its election
        timeout, 1 s), which is not what a test of one member down means to show."""
        leader = self.leader()
        if leader is member:
            target = next(m for m in self.members if m is not member)
            target_id = _post(target, "/v3/maintenance/status")["header"]["member_id"]
            _post(leader, "/v3/maintenance/transfer-leadership", {"targetID": target_id})
        wait_until(lambda: self.leader() is not member, timeout_s, f"etcd {member.name} not leading")

    def pause(self) -> None:
        """Every member stopped: nobody reaches etcd until ``resume``."""
        for member in self.members:
            member.pause()

    def resume(self) -> None:
        for member in self.members:
            member.resume()

    def kill(self) -> None:
        for member in self.members:
            member.resume()
            member.kill()


def _post(member: EtcdMember, path: str, body: dict | None = None) -> dict:
    """One request to ``member``'s JSON gateway (etcd's gRPC API over HTTP)."""
    request = urllib.request.Request(member.client_url + path, data=json.dumps(body or {}).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=2) as reply:
        return json.loads(reply.read())


def etcd_or_skip() -> None:
    """Skip the calling test when etcd is missing; in CI, fail it."""
    skip_or_fail(etcd_problem(), NEEDED_BY)


def etcd_server(tmp_path: Path):
    """A started single-member ``EtcdCluster`` in ``tmp_path / "etcd"`` (skipped, or failed in CI, without etcd),
    killed after the test: a generator for a pytest fixture (``etcd = pytest.fixture(etcd_server)``)."""
    etcd_or_skip()
    server = EtcdCluster(tmp_path / "etcd").start()
    try:
        yield server
    finally:
        server.kill()


if __name__ == "__main__":
    exit_on_problem(ETCD, NEEDED_BY)
