"""The three ways a queue is popped, behind one interface, and the pure rule that picks one.

- **normal** (``pop/normal.py``): read from the group's offset, write a CK, move the offset; what is not acked in
  time is revived into the pop retry topic.
- **FIFO** (``pop/fifo_pop.py``): a FIFO group (``consumeMessageOrderly``, or a request that asks for order) gets
  one message of a message group in flight at a time; no CK, the state is ``pop/fifo.py``'s.
- **staged** (``pop/staged.py``): a (group, topic) registered with stage definitions is popped stage by stage
  (``stage_gate.decide``); its expired messages come back in place. Its pop retry topic is popped the normal way.

The engine (``pop/engine.py``) picks the mode of a receive once per pass over the queues (``choose_mode``: a
stage registration made while a receive long-polls applies from its next pass), and asks it for each queue of
the pass. Acks, changes of invisible time and forwards to the DLQ go to the mode of their receipt handle:
FIFO handles name revive queue 999, the others are the normal or staged mode's by their topic.
"""

from __future__ import annotations

import enum
from contextlib import AbstractContextManager
from typing import Protocol

from pocketmq.broker.pop.fifo import ORDERLY_REVIVE_QUEUE_ID
from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.receive import PoppedQueue, PopResult, Receive
from pocketmq.common.errors import InvalidReceiptHandleError, NotReplicatedError

# A waiting pop of a mode that time alone unblocks (an invisible time passing: FIFO, staged) re-checks this often.
TIME_RECHECK_MS = 500


class ModeKind(enum.Enum):
    NORMAL = "normal"
    FIFO = "fifo"
    STAGED = "staged"


def choose_mode(*, fifo: bool, staged: bool) -> ModeKind:
    """FIFO wins over stages: a FIFO group keeps its message groups in order on a staged topic too."""
    if fifo:
        return ModeKind.FIFO
    return ModeKind.STAGED if staged else ModeKind.NORMAL


def is_fifo_handle(handle: ReceiptHandle) -> bool:
    return handle.revive_queue_id == ORDERLY_REVIVE_QUEUE_ID


class ChangeNotReplicatedError(NotReplicatedError):
    """A change of invisible time this master stored but no slave acknowledged: ``handle``, the new receipt
    handle, is good on this broker (the old one, after a failover)."""

    def __init__(self, cause: NotReplicatedError, handle: ReceiptHandle):
        super().__init__(str(cause), slave_in_sync=cause.slave_in_sync)
        self.handle = handle


class PopMode(Protocol):
    reads_retry_topic: bool  # the pass reads the pop retry topic's queues too, and a waiting pop watches it
    recheck_ms: int | None  # a waiting pop re-checks this often (time alone unblocks it); None: on arrivals only

    async def pop_queue(
        self, receive: Receive, topic: str, queue_id: int, wanted: int, result: PopResult
    ) -> PoppedQueue | None:
        """Take up to ``wanted`` messages of one queue for ``result`` (records what they promise first)."""

    async def ack(self, group: str, handles: list[ReceiptHandle]) -> list[InvalidReceiptHandleError | None]:
        """Ack every handle; one entry per handle: None when acked, the error when the handle is invalid."""

    async def change_invisible(
        self, group: str, handle: ReceiptHandle, invisible_ms: int, now_ms: int
    ) -> ReceiptHandle:
        """A new deadline for one popped message; returns its new handle (the old one is no longer valid).
        ChangeNotReplicatedError when a slave did not acknowledge it."""

    def hold_handle(self, group: str, handle: ReceiptHandle) -> AbstractContextManager[None]:
        """InvalidReceiptHandleError unless the handle's message is in flight here (or may be forwarded); inside,
        revive leaves its CK alone (a forward to the DLQ writes the dead letter, then acks: revive must not
        write a retry copy in between)."""
