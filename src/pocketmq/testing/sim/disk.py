"""A broker's simulated disk: its commit log (records written, and how many of them are flushed), its
metadata file, and injected read failures of message records.

A crash keeps only the flushed records (power loss: the unflushed tail is gone); metadata writes are atomic and
durable at once (PocketMQ writes metadata with temp file + fsync + rename). A flush completes after a disk
latency; a flush still running at a crash never completes. Reads fail with ``OSError`` with the injected
probability (a bad sector, an I/O error), drawn from the run's one generator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pocketmq.common.message import MessageExt
from pocketmq.common.topic import is_system_topic
from pocketmq.testing.sim.kernel import Kernel, SimFuture


class SimDisk:
    def __init__(self, kernel: Kernel, *, flush_latency_ms: tuple[int, int]):
        self._kernel = kernel
        self._flush_latency_ms = flush_latency_ms
        self.records: list[MessageExt] = []
        self.flushed_count = 0
        self.meta: dict[str, Any] = {}
        self.read_failure_probability = 0.0
        self._generation = 0  # a crash starts a new one; flushes of an older one never complete
        self._waiters: list[tuple[int, SimFuture]] = []  # (records that must be durable, who waits)
        self.on_flushed: Callable[[list[MessageExt]], None] | None = None

    def append(self, records: list[MessageExt]) -> None:
        self.records.extend(records)

    def flush(self) -> SimFuture:
        """Resolves once every record written so far is durable: by this flush or by any other that covers it
        (a group commit), so a durable record never waits on a slower flush that a crash then cancels."""
        done = SimFuture()
        target, generation = len(self.records), self._generation
        self._waiters.append((target, done))

        def complete() -> None:
            if generation != self._generation:
                return
            if target > self.flushed_count:
                newly = self.records[self.flushed_count : target]
                self.flushed_count = target
                if self.on_flushed is not None:
                    self.on_flushed(newly)
            ready = [f for t, f in self._waiters if t <= self.flushed_count]
            self._waiters = [(t, f) for t, f in self._waiters if t > self.flushed_count]
            for future in ready:
                future.resolve()

        self._kernel.after(self._kernel.rng.randint(*self._flush_latency_ms), complete)
        return done

    def crash(self) -> int:
        """Power loss: drop the unflushed tail; returns how many records were lost."""
        lost = len(self.records) - self.flushed_count
        del self.records[self.flushed_count :]
        self._generation += 1
        self._waiters = []  # their process is gone
        return lost

    def read(self, index: int) -> MessageExt:
        """Record ``index``; reads of message records (not of the system topics: the revive log) fail with the
        injected probability, so a failing disk shows in pops and revive reads rather than stopping revive."""
        record = self.records[index]
        if (
            self.read_failure_probability
            and not is_system_topic(record.topic)
            and self._kernel.rng.random() < self.read_failure_probability
        ):
            raise OSError(f"injected read failure at record {index}")
        return record

    def __repr__(self) -> str:
        return f"<SimDisk records={len(self.records)} flushed={self.flushed_count}>"
