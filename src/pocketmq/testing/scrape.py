"""Read a real process's ``/metrics`` in tests (``serve --metrics-port 0``; ``PocketProcess.metrics`` is where)."""

from __future__ import annotations

import urllib.request

from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import PocketProcess


def scrape(proc: PocketProcess) -> str:
    """``proc``'s ``/metrics``, the text format."""
    with urllib.request.urlopen(f"http://{proc.metrics}/metrics", timeout=5) as reply:
        return reply.read().decode()


def metric(proc: PocketProcess, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with ``labels`` in ``proc``'s ``/metrics``."""
    text = scrape(proc)
    wanted = [f'{key}="{value}"' for key, value in labels.items()]
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, value = line.rsplit(" ", 1)
            if all(w in head for w in wanted):
                total += float(value)
    return total


def wait_rounds(proc: PocketProcess, histogram: str, rounds: int, timeout_s: float = 30.0) -> None:
    """Wait until ``proc`` has finished ``rounds`` whole runs of a periodic task that times each run in
    ``histogram``. One more than ``rounds`` is awaited: a run already under way when this starts ends first.

    This is how a test shows that *nothing more happens* over a few rounds without sleeping for a guessed time.
    """
    count = f"{histogram}_count"
    target = metric(proc, count) + rounds + 1
    wait_until(lambda: metric(proc, count) >= target, timeout_s, f"{rounds} rounds of {histogram}")
