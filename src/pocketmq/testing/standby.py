"""Start ``pocketmq`` commands in processes that imported the broker ahead of time (``pocketmq.cli.standby``).

A cold ``python -m pocketmq.cli.main serve`` spends about a second importing before it binds a port; the
process of a standby did that while the test before was running, so a broker it runs is ready in tens of
milliseconds. ``launch`` hands the request to the standby kept ahead (or, when none is, to a new one, which is no
slower than a cold start); ``prewarm``, once the process launched is ready, starts the next standby, so its
imports do not slow the start it follows and one is warming while the test runs.

Every process launched here has a pipe on its stdin whose writing end only this process holds: when this
process ends, however it ends, the child sees end of file and stops (``pocketmq.cli.standby``).
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

STANDBY_MODULE = "pocketmq.cli.standby"


class StandbyPool:
    """One standby process kept ahead of the next ``launch``, started with this process's environment."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: subprocess.Popen | None = None
        self._launch_env = _standby_env()
        atexit.register(self.close)

    def prewarm(self) -> None:
        """Start the standby for the next ``launch`` now, if none is warming."""
        with self._lock:
            if self._next is None or self._next.poll() is not None:
                self._next = self._spawn()

    def launch(self, argv: list[str], *, cwd: Path, env: dict[str, str], log_path: Path) -> subprocess.Popen:
        """Run ``pocketmq <argv>`` in a standby; returns its process (stdin still open: it is the parent tie)."""
        request = {"argv": argv, "cwd": str(cwd), "env": env, "log": str(log_path)}
        with self._lock:
            if env.get("PYTHONPATH") != self._launch_env.get("PYTHONPATH"):
                # a standby imported from its own path: one started for another path would run other code
                proc = self._spawn(env)
            else:
                proc = self._next if self._next is not None and self._next.poll() is None else self._spawn()
                self._next = None
        line = json.dumps(request).encode() + b"\n"
        try:
            _write(proc, line)
        except BrokenPipeError:  # the standby died after the look above (killed from outside): start afresh
            proc = self._spawn(env)
            _write(proc, line)
        return proc

    def close(self) -> None:
        """End the standby kept ahead: killed, since it has run nothing (it may still be importing, and would
        only see end of file once done)."""
        with self._lock:
            proc, self._next = self._next, None
        if proc is not None:
            proc.kill()
            proc.wait(timeout=10)
            release(proc)

    def _spawn(self, env: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", STANDBY_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env or self._launch_env,
        )


def _write(proc: subprocess.Popen, line: bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line)
    proc.stdin.flush()


def _standby_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"  # output reaches the log as it is written, a test reads it mid-run
    return env


def release(proc: subprocess.Popen) -> None:
    """Close this end of ``proc``'s stdin: a child still running sees end of file and stops."""
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except BrokenPipeError:  # the child is gone already
            pass


STANDBYS = StandbyPool()
