"""A ``ProcessQueue``: the messages of one queue pulled but not yet done, and the offset that is safe to commit.

Messages are kept by queue offset in arrival (= offset) order. The committable offset is the smallest offset
still held, or one past the largest seen once the queue is empty: a message is only passed once it is done or
handed back to the broker. Flow control reads ``count`` and ``size_bytes``.

Orderly consumption takes messages in order (``take``), holds them as "consuming", and either commits them
(``commit``) or puts them back to be taken first again (``put_back``).

Pure and single-threaded: used only from the consumer's event loop.
"""

from __future__ import annotations

import itertools

from pocketmq.common.message import MessageExt


class ProcessQueue:
    def __init__(self) -> None:
        self._messages: dict[int, MessageExt] = {}  # queue offset -> message, ascending insertion
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self._max_offset = -1
        self.size_bytes = 0
        self.dropped = False
        self.locked = False  # orderly clustering: the broker lock is held
        self.lock_renewed_ms = 0.0
        self.last_pull_ms = 0.0

    @property
    def count(self) -> int:
        return len(self._messages) + len(self._consuming)

    def add(self, messages: list[MessageExt]) -> None:
        for msg in messages:
            if msg.queue_offset in self._messages or msg.queue_offset in self._consuming:
                continue
            self._messages[msg.queue_offset] = msg
            self.size_bytes += len(msg.body)
            self._max_offset = max(self._max_offset, msg.queue_offset)

    def remove(self, messages: list[MessageExt]) -> int:
        """Forget ``messages`` (done or handed back); returns the offset now safe to commit (-1: nothing seen)."""
        for msg in messages:
            if self._messages.pop(msg.queue_offset, None) is not None:
                self.size_bytes -= len(msg.body)
        return self.commit_offset()

    def commit_offset(self) -> int:
        held = [next(iter(d)) for d in (self._consuming, self._messages) if d]
        if held:
            return min(held)
        return self._max_offset + 1 if self._max_offset >= 0 else -1

    def span(self) -> int:
        """Distance between the smallest and largest offsets held (RocketMQ's maxSpan flow control)."""
        if not self._messages:
            return 0
        return self._max_offset - next(iter(self._messages))

    # -- orderly --------------------------------------------------------------------------------------------------
    def take(self, max_count: int) -> list[MessageExt]:
        """The next ``max_count`` messages in offset order, now held as consuming."""
        taken = []
        for offset in list(itertools.islice(self._messages, max_count)):  # insertion order is offset order
            msg = self._messages.pop(offset)
            self._consuming[offset] = msg
            taken.append(msg)
        return taken

    def put_back(self, messages: list[MessageExt]) -> None:
        """Messages taken but to be consumed again: they go before everything not taken yet."""
        rest = self._messages
        self._messages = {}
        for msg in sorted(messages, key=lambda m: m.queue_offset):
            self._consuming.pop(msg.queue_offset, None)
            self._messages[msg.queue_offset] = msg
        self._messages.update(rest)

    def commit(self) -> int:
        """The consuming messages are done; returns the offset safe to commit."""
        for msg in self._consuming.values():
            self.size_bytes -= len(msg.body)
        self._consuming.clear()
        return self.commit_offset()

    def __repr__(self) -> str:
        return (
            f"<ProcessQueue count={self.count} bytes={self.size_bytes} commit={self.commit_offset()} "
            f"dropped={self.dropped} locked={self.locked}>"
        )
