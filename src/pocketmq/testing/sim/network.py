"""The simulated network: request/reply between named nodes with per-link delay, drops, partitions and nodes
that are down.

A request is delivered after a random delay unless its link is cut (a partition), a draw says it is dropped,
or its sender is down; a request that reaches a node that is down is answered by a refused connection
(``RemotingError``), as a closed port answers. The caller gets a ``SimFuture`` that resolves with the reply
or fails with ``RemotingTimeoutError`` when nothing came back in time (dropped request or reply, partition,
a reply slower than the timeout). Replies travel the same link and can be dropped or delayed too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pocketmq.common.errors import RemotingError, RemotingTimeoutError
from pocketmq.testing.sim.kernel import Kernel, SimFuture

Respond = Callable[[Any], None]  # a handler's answer to one request
Handler = Callable[[str, Any, Respond], None]  # (source, request, respond)


@dataclass(slots=True)
class LinkFaults:
    drop_probability: float = 0.0  # each message, each way
    min_delay_ms: int = 1
    max_delay_ms: int = 5
    spike_probability: float = 0.0  # a message held much longer (a congested or retransmitting link)
    spike_delay_ms: int = 800


class Network:
    def __init__(self, kernel: Kernel):
        self._kernel = kernel
        self._handlers: dict[str, Handler] = {}
        self._up: dict[str, bool] = {}
        self._cut: set[tuple[str, str]] = set()
        self.faults = LinkFaults()
        self.messages_dropped = 0

    def attach(self, addr: str, handler: Handler) -> None:
        self._handlers[addr] = handler
        self._up[addr] = True

    def set_up(self, addr: str, up: bool) -> None:
        self._up[addr] = up

    def partition(self, side: set[str]) -> None:
        """Cut every link between ``side`` and the other nodes."""
        others = [a for a in sorted(self._handlers) if a not in side]
        for a in sorted(side):
            for b in others:
                self._cut.add((min(a, b), max(a, b)))

    def heal(self) -> None:
        self._cut.clear()

    def call(self, src: str, dst: str, request: Any, timeout_ms: int) -> SimFuture:
        future = SimFuture()
        self._kernel.after(
            timeout_ms, lambda: future.fail(RemotingTimeoutError(f"no answer from {dst} in {timeout_ms} ms"))
        )
        self._send(src, dst, lambda: self._arrive(src, dst, request, future))
        return future

    def _arrive(self, src: str, dst: str, request: Any, future: SimFuture) -> None:
        if not self._up.get(dst, False):
            self._send(dst, src, lambda: future.fail(RemotingError(f"connection to {dst} refused")), from_down=True)
            return
        self._handlers[dst](src, request, lambda reply: self._send(dst, src, lambda: future.resolve(reply)))

    def _send(self, src: str, dst: str, deliver: Callable[[], None], *, from_down: bool = False) -> None:
        faults, rng = self.faults, self._kernel.rng
        if (not from_down and not self._up.get(src, False)) or (min(src, dst), max(src, dst)) in self._cut:
            self.messages_dropped += 1
            return
        if rng.random() < faults.drop_probability:
            self.messages_dropped += 1
            return
        delay_ms = rng.randint(faults.min_delay_ms, faults.max_delay_ms)
        if rng.random() < faults.spike_probability:
            delay_ms += faults.spike_delay_ms
        self._kernel.after(delay_ms, deliver)

    def __repr__(self) -> str:
        down = sorted(a for a, up in self._up.items() if not up)
        return f"<Network down={down} cut_links={len(self._cut)} dropped={self.messages_dropped}>"
