"""What the long-running commands (``pocketmq serve``, ``pocketmq namesrv``) share: logging, the ready file, and
running until SIGTERM/SIGINT.

- ``configure_logging()``: the entry point's log format, ``time level logger message`` on stderr.
- ``write_ready_file(path, addresses)``: once listening, write ``{"remoting": "H:P" | null, "namesrv": "H:P" |
  null, "grpc": "H:P" | null, "metrics": "H:P" | null}`` (keys not given are null) atomically (temp file +
  fsync + rename), so a test that sees the file can read all of it (``pocketmq.testing.processes``).
- ``StopSignals()``: catches SIGTERM and SIGINT from the moment it is made; ``await wait()`` returns once one
  came. Made before the command starts anything: a signal that comes while it starts, or between its ready file
  and its wait, would otherwise take the default action and end the process without its clean stop (a test
  harness or a service manager stopping a broker right after it said it was ready).
- ``run_until_signalled(start, stop)``: ``await start()``, wait for the signal, then ``await stop()``. ``stop``
  also runs when ``start`` fails half way, so it must cope with a partial start.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

READY_FILE_KEYS = ("remoting", "namesrv", "grpc", "metrics", "console")
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def configure_logging(level: int = logging.INFO, *, with_pid: bool = False) -> None:
    """``with_pid``: each line names its process (the proxy's workers share one log). SIGUSR1 writes the stack of
    every thread to stderr (the log), for a process that does not answer or does not end (``kill -USR1 PID``)."""
    pid = " pid=%(process)d" if with_pid else ""
    logging.basicConfig(level=level, format=f"%(asctime)s %(levelname)s{pid} %(name)s %(message)s")
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def write_ready_file(path: str | Path, addresses: dict[str, str | None]) -> None:
    unknown = set(addresses) - set(READY_FILE_KEYS)
    if unknown:
        raise ValueError(f"ready file keys {sorted(unknown)} not in {READY_FILE_KEYS}")
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({key: addresses.get(key) for key in READY_FILE_KEYS}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class StopSignals:
    """SIGTERM and SIGINT, caught from construction (on the running loop) until ``wait()`` returns."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        for sig in _STOP_SIGNALS:
            self._loop.add_signal_handler(sig, self._stopping.set)

    async def wait(self) -> None:
        """Return once SIGTERM or SIGINT came (maybe before this call). The handlers are removed then, so a
        second signal during the clean stop ends the process at once."""
        try:
            await self._stopping.wait()
        finally:
            for sig in _STOP_SIGNALS:
                self._loop.remove_signal_handler(sig)


async def run_until_signalled(start: Callable[[], Awaitable[Any]], stop: Callable[[], Awaitable[Any]]) -> None:
    signals = StopSignals()
    try:
        await start()
        await signals.wait()
    finally:
        await stop()
