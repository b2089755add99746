"""The shell of auto-renewed invisibility (broker/pop/renewal.py's ``RenewalTable``), shared by the embedded
gRPC front end and the proxy: they differ only in how an invisible time is changed (the broker's POP engine,
or CHANGE_MESSAGE_INVISIBLETIME to the broker the handle names).

A periodic check every ``RENEW_SCAN_MS`` renews each tracked message near its deadline while its client's
session lives; a renewal the store took on the master but a slave did not acknowledge keeps being renewed; any
other refusal (acked elsewhere, revived already) ends it. An ack, nack or forward asks ``current_handle`` for
the handle to act on: a renewal in progress finishes first, so neither sees a handle the renewal just closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from pocketmq.broker.pop.mode import ChangeNotReplicatedError
from pocketmq.broker.pop.receipt import InvalidReceiptHandle, ReceiptHandle
from pocketmq.broker.pop.renewal import RenewalTable
from pocketmq.common.errors import InvalidReceiptHandleError, PocketMQError
from pocketmq.common.topic import pop_retry_topic
from pocketmq.metrics.registry import MetricsRegistry
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.periodic import PeriodicTask
from pocketmq.server.sessions import SessionRegistry

log = logging.getLogger(__name__)

RENEW_SCAN_MS = 1_000

# (group, current handle, invisible ms) -> the handle after the change
ChangeInvisible = Callable[[str, ReceiptHandle, int], Awaitable[ReceiptHandle]]


def decode_handle(text: str) -> ReceiptHandle:
    try:
        return ReceiptHandle.decode(text)
    except InvalidReceiptHandle as exc:
        raise InvalidReceiptHandleError(str(exc)) from None


class AutoRenewer:
    def __init__(
        self,
        renewals: RenewalTable,
        change: ChangeInvisible,
        sessions: SessionRegistry | None,
        *,
        clock: Clock,
        metrics: MetricsRegistry | None = None,
    ):
        self.renewals = renewals
        self._change = change
        self._sessions = sessions  # a client is alive while it has a session (None: every client is)
        self._clock = clock
        self._renewing: dict[str, asyncio.Future] = {}  # first handle text -> its renewal in progress
        self._task = PeriodicTask("grpc-auto-renew", self.renew_due, RENEW_SCAN_MS, clock=clock, metrics=metrics)

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    def track(self, first_text: str, client_id: str, group: str, handle: ReceiptHandle) -> None:
        self.renewals.track(first_text, client_id, group, handle, self._clock.now_ms())

    async def renew_due(self) -> int:
        """Renew every tracked message near its deadline whose client lives; returns how many were renewed."""
        renewed = 0
        for text, renewal in self.renewals.due(self._clock.now_ms()):
            if text not in self.renewals:  # acked or nacked while an earlier one was renewed: its handle is taken
                continue
            if self._sessions is not None and self._sessions.get(renewal.client_id) is None:
                self.renewals.drop(text)  # the client is gone: its messages come back after their deadline
                continue
            done = self._renewing[text] = asyncio.get_running_loop().create_future()
            try:
                self.renewals.renewed(
                    text, await self._change(renewal.group, renewal.handle, self.renewals.invisible_ms)
                )
                renewed += 1
            except ChangeNotReplicatedError as exc:  # renewed on this master, not on a slave yet: keep renewing
                log.warning("event=grpc_auto_renew_not_replicated group=%s error=%s", renewal.group, exc)
                self.renewals.renewed(text, exc.handle)
            except PocketMQError as exc:  # acked elsewhere, revived already, or the store refused: stop here
                log.info("event=grpc_auto_renew_ended group=%s error=%s", renewal.group, exc)
                self.renewals.drop(text)
            finally:
                del self._renewing[text]
                done.set_result(None)
        return renewed

    async def current_handle(self, text: str, group: str, topic: str) -> ReceiptHandle:
        """The handle to act on for a handle a client sent with a request of ``group`` on ``topic``: the current
        one of an auto-renewed message (whose renewal ends here), else the handle itself.
        InvalidReceiptHandleError when it is none, or names neither ``topic`` nor ``group``'s pop retry topic of
        it (a retried message's): the caller's rights were checked on ``topic``, and the proxy asks the broker as
        its own user, so a handle of another topic is refused before anything is done with it."""
        handle = decode_handle(text)
        if handle.topic not in (topic, pop_retry_topic(group, topic)):
            raise InvalidReceiptHandleError(f"the receipt handle is not of topic {topic!r}")
        in_progress = self._renewing.get(text)
        if in_progress is not None:
            await in_progress
        current = self.renewals.take(text)
        return current if current is not None else handle
