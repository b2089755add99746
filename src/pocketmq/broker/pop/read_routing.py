"""Which reader serves the message behind a CK, and reading the messages of many CKs in few round trips.

A CK names the broker group that stores its messages (``ck.broker_name``). That is this broker's group for
CKs of its own pops, and another group's for CKs escaped here from a group whose master is down (RIP-32's
escape bridge): those messages must be read remotely. ``ReaderRouter.for_broker`` gives the local reader for
this broker's group (and for CKs without a broker name) and one remote reader per other group, built on first
use by ``remote_factory`` (``setup.py`` builds ``cluster.remote_reader.RemoteMessageReader``s that share one
``BreakerBoard``).

``read_unacked(cks)`` reads every un-acked message of a batch of CKs with one ``read_many`` per
(broker group, topic, queue): for a remote group that is one RPC per queue (per 256 offsets) instead of one
per message, and while the group's breaker is open none at all. ``unacked_by_queue`` is the pure grouping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from pocketmq.broker.pop.checkpoint import PopCheckpoint
from pocketmq.broker.pop.reader import MessageReader
from pocketmq.common.read_result import FailureReason, ReadResult

log = logging.getLogger(__name__)

ReadKey = tuple[str, str, int]  # (broker group name, topic, queue id): what one read_many covers


def unacked_by_queue(cks: Iterable[PopCheckpoint], own_broker_name: str) -> dict[ReadKey, list[int]]:
    """The un-acked queue offsets of ``cks``, sorted and without repeats, by the queue that stores them."""
    offsets: dict[ReadKey, set[int]] = {}
    for ck in cks:
        offsets.setdefault(read_key(ck, own_broker_name), set()).update(ck.unacked_offsets())
    return {key: sorted(found) for key, found in offsets.items() if found}


def read_key(ck: PopCheckpoint, own_broker_name: str) -> ReadKey:
    return ck.broker_name or own_broker_name, ck.topic, ck.queue_id


class ReaderRouter:
    def __init__(self, own_broker_name: str, local: MessageReader, remote_factory: Callable[[str], MessageReader]):
        self.own_broker_name = own_broker_name
        self.local = local
        self._remote_factory = remote_factory
        self._remote: dict[str, MessageReader] = {}

    def for_broker(self, broker_name: str) -> MessageReader:
        if not broker_name or broker_name == self.own_broker_name:
            return self.local
        reader = self._remote.get(broker_name)
        if reader is None:
            reader = self._remote[broker_name] = self._remote_factory(broker_name)
        return reader

    def key_of(self, ck: PopCheckpoint) -> ReadKey:
        return read_key(ck, self.own_broker_name)

    async def read_unacked(self, cks: list[PopCheckpoint]) -> dict[ReadKey, dict[int, ReadResult]]:
        """A typed result for every un-acked offset of ``cks``, by ``key_of(ck)``; never raises (a read that
        raised, or an offset a reader left out, is a FAILED read with ``need_retry``: RocketMQ #10985)."""
        results: dict[ReadKey, dict[int, ReadResult]] = {}
        for key, offsets in unacked_by_queue(cks, self.own_broker_name).items():
            broker_name, topic, queue_id = key
            try:
                got = await self.for_broker(broker_name).read_many(topic, queue_id, offsets)
            except Exception as exc:
                log.warning(
                    "event=revive_read_raised broker=%s topic=%s queue=%d offsets=%d error=%r",
                    broker_name,
                    topic,
                    queue_id,
                    len(offsets),
                    exc,
                )
                got = {}
                missing = ReadResult.failed(FailureReason.EXCEPTION, f"{type(exc).__name__}: {exc}")
            else:
                missing = ReadResult.failed(FailureReason.EXCEPTION, "the reader returned no result")
            results[key] = {offset: got.get(offset, missing) for offset in offsets}
        return results

    def __repr__(self) -> str:
        return f"<ReaderRouter {self.own_broker_name} remote={sorted(self._remote)}>"
