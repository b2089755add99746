"""One revive queue: CK and ACK records as messages of the revive topic, and the ledger that reads them.

Records are messages of ``rmq_sys_REVIVE_LOG_<cluster>`` (one of its queues, the *revive queue*), with the
JSON of ``PopCheckpoint`` / ``AckRecord`` as body and RocketMQ's tags: ``ck`` for a checkpoint, ``ack`` for an
ack of one message, ``bAck`` for an ack of several. The revive offset of a record is its queue offset.

``ReviveQueue.catch_up()`` reads every record appended since the last call (synchronously: the store's reads
do not block) and feeds it to the ``ReviveLedger``, in order. Every path that needs an up-to-date view of
what is open (an ack checks its handle, revive picks due CKs) catches up first, so the ledger is the single
source of truth and a restart rebuilds it by reading from the committed revive offset. The records this queue
appends itself (``append``) are fed as they are appended when the ledger had read everything before them: what
the catch-up would read, without reading it back.

Revive catches a queue up on its passes, so a CK appended in between is not in the ledger yet; to hand it back on
time all the same, whoever appends a CK here says so (``expect``): the queue keeps the earliest revive time of
the CKs appended since its last catch-up (``next_revive_time_ms`` counts it) and tells ``on_earlier_revive``
(revive's wake-up) when that time moves earlier. It is memory only: after a restart the records themselves are
read again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.ledger import ReviveLedger
from pocketmq.common import properties as props
from pocketmq.common.errors import InvalidReceiptHandleError, NotReplicatedError, ServiceNotAvailableError, StoreError
from pocketmq.common.message import MessageExt
from pocketmq.common.topic import ACK_TAG, BATCH_ACK_TAG, CK_TAG
from pocketmq.store.api import GetStatus, PutResult, PutStatus

if TYPE_CHECKING:
    from pocketmq.broker.write_path import Replication

log = logging.getLogger(__name__)

_CATCH_UP_BATCH = 256
_READ_MAX_BYTES = 4 * 1024 * 1024


class PartlyClosedError(ServiceNotAvailableError):
    """Closing a batch of revived CKs failed after the first ``closed`` of them were closed (with their rewritten
    CKs written): only the others stay open. The escape bridge writes them one by one, so it can stop midway."""

    def __init__(self, message: str, closed: int):
        super().__init__(message)
        self.closed = closed


def checkpoint_message(revive_topic: str, ck: PopCheckpoint) -> MessageExt:
    return MessageExt(
        topic=revive_topic,
        body=ck.to_json(),
        queue_id=ck.revive_queue_id,
        properties={props.TAGS: CK_TAG, props.UNIQ_KEY: f"{ck.key}@ck@{ck.rewrite_count}"},
    )


def ack_message(revive_topic: str, revive_queue_id: int, ack: AckRecord) -> MessageExt:
    tag = ACK_TAG if len(ack.acked_offsets) == 1 else BATCH_ACK_TAG
    return MessageExt(topic=revive_topic, body=ack.to_json(), queue_id=revive_queue_id, properties={props.TAGS: tag})


class ReviveQueue:
    """The ledger of one revive queue plus its appender; the store is the one of this broker."""

    def __init__(self, store, revive_topic: str, queue_id: int, broker_name: str, start_offset: int):
        self._store = store
        self.topic = revive_topic
        self.queue_id = queue_id
        self._broker_name = broker_name
        # Retention may have removed records below the committed offset's successor; start at what exists.
        self.ledger = ReviveLedger(max(start_offset, store.min_queue_offset(revive_topic, queue_id)))
        self.bad_records = 0
        # (group, topic, queue id) -> the queue offset after the last message a CK of this group read here has
        # popped: where the pop offset stands at least (``raise_pop_offsets``).
        self.popped_to: dict[tuple[str, str, int], int] = {}
        # The earliest revive time of the CKs appended since the last catch-up (None: none), and who is told when
        # it moves earlier (``expect``).
        self._unread_revive_time_ms: int | None = None
        self.on_earlier_revive: Callable[[int], None] | None = None

    async def append(self, records: Sequence[PopCheckpoint | AckRecord]) -> list[PutResult]:
        """Append CK / ACK records, in order, in one store call; StoreError when the store did not take them."""
        messages = [
            checkpoint_message(self.topic, r)
            if isinstance(r, PopCheckpoint)
            else ack_message(self.topic, self.queue_id, r)
            for r in records
        ]
        results = await self._store.put_messages(messages)
        for result in results:
            if not result.status.stored:
                raise StoreError(f"revive queue {self.queue_id}: {result.status.value} {result.reason}")
        self._read_appended(records, results)
        return results

    def _read_appended(self, records: Sequence[PopCheckpoint | AckRecord], results: list[PutResult]) -> None:
        """Feed the ledger the records just appended, as a catch-up would read them, when it has read everything
        before them (else the next catch-up reads them, in order: another append came between, or a CK names
        another revive queue). Why: reading an ACK back (a store read, a record decode, its JSON) was about a
        third of what an ack cost the broker, and every ack catches up first."""
        ledger = self.ledger
        if results[0].queue_offset != ledger.next_offset or any(
            isinstance(r, PopCheckpoint) and r.revive_queue_id != self.queue_id for r in records
        ):
            return
        for record, result in zip(records, results, strict=True):
            if isinstance(record, PopCheckpoint):
                ledger.on_checkpoint(record, result.queue_offset)
                self._note_popped(record)
            else:
                ledger.on_ack(
                    record if record.broker_name else replace(record, broker_name=self._broker_name),
                    result.queue_offset,
                )

    async def append_checkpoint(self, ck: PopCheckpoint) -> None:
        await self.append([ck])
        self.expect([ck])

    def expect(self, cks: Iterable[PopCheckpoint]) -> None:
        """``cks`` were appended here (their records are in the store): revive wakes by their revive times, though
        the ledger learns of them only at its next catch-up."""
        earliest = min((ck.revive_time_ms for ck in cks), default=None)
        if earliest is None or (self._unread_revive_time_ms is not None and self._unread_revive_time_ms <= earliest):
            return
        self._unread_revive_time_ms = earliest
        if self.on_earlier_revive is not None:
            self.on_earlier_revive(earliest)

    def next_revive_time_ms(self) -> int | None:
        """The earliest revive time of the open CKs the ledger has not listed as due, and of the CKs appended
        since the last catch-up: when revive must look at this queue next; None when no CK waits."""
        times = [t for t in (self.ledger.next_revive_time_ms(), self._unread_revive_time_ms) if t is not None]
        return min(times, default=None)

    def catch_up(self) -> int:
        """Feed the ledger every record appended since the last call; returns how many were read."""
        store, ledger = self._store, self.ledger
        # Synchronous from here: every CK ``expect`` was told of is in the store, so it is read now.
        self._unread_revive_time_ms = None
        read = 0
        while True:
            offset = ledger.next_offset
            got = store.get_messages(self.topic, self.queue_id, offset, _CATCH_UP_BATCH, max_bytes=_READ_MAX_BYTES)
            if got.status is not GetStatus.FOUND:
                if (
                    got.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.MESSAGE_WAS_REMOVING)
                    and got.next_begin_offset > offset
                ):
                    log.error(
                        "event=revive_records_removed queue=%d from=%d to=%d",
                        self.queue_id,
                        offset,
                        got.next_begin_offset,
                    )
                    for skipped in range(offset, got.next_begin_offset):
                        ledger.skip(skipped)
                    continue
                return read
            for msg in got.messages():
                self._feed(msg)
                read += 1

    def _feed(self, msg: MessageExt) -> None:
        tag = msg.properties.get(props.TAGS)
        try:
            if tag == CK_TAG:
                ck = PopCheckpoint.from_json(msg.body)
                self.ledger.on_checkpoint(ck, msg.queue_offset)
                self._note_popped(ck)
                return
            if tag in (ACK_TAG, BATCH_ACK_TAG):
                self.ledger.on_ack(AckRecord.from_json(msg.body, self._broker_name), msg.queue_offset)
                return
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
            self.bad_records += 1
            log.error(
                "event=revive_record_unreadable queue=%d offset=%d error=%s", self.queue_id, msg.queue_offset, exc
            )
        self.ledger.skip(msg.queue_offset)

    def raise_pop_offsets(self, offsets) -> int:
        """Move each pop offset (``offsets``: the ``ConsumerOffsetManager``) up to the end of the CKs read so far,
        never back; returns how many moved.

        A CK is appended before its pop moves the offset, and the offsets are saved on an interval, so after a
        kill -9 (or on a slave, whose offsets come with the periodic metadata sync) the saved offset can stand
        below CKs that were read here: popping from there would hand those messages out again beside the CK that
        revives them. CKs before the committed revive offset are closed, and were popped before the offsets
        saved with that revive offset, so reading from the committed revive offset is enough."""
        return sum(
            offsets.commit(group, topic, queue_id, end) for (group, topic, queue_id), end in self.popped_to.items()
        )

    def _note_popped(self, ck: PopCheckpoint) -> None:
        if ck.broker_name not in ("", self._broker_name):
            return  # escaped here from another group: its offsets are that group's
        key = (ck.group, ck.topic, ck.queue_id)
        end = max(ck.queue_offsets) + 1
        if end > self.popped_to.get(key, -1):
            self.popped_to[key] = end

    def __repr__(self) -> str:
        return f"<ReviveQueue {self.topic}/{self.queue_id} {self.ledger!r}>"


async def store_copies(store, topics, messages: list[MessageExt]) -> None:
    """Append retry copies / dead letters in one store call (their topics are created on demand); StoreError
    when the store did not take them."""
    for msg in messages:
        topics.get_or_create(msg.topic)
    results = await store.put_messages(messages)
    if not all(r.status.stored for r in results):
        raise StoreError(f"store refused the copies: {results[0].status.value} {results[0].reason}")


async def replicated(replication: Replication | None, results: list[PutResult]) -> None:
    """Return once a slave holds the records of ``results`` (``replication``: the ``cluster.ha_master.HaMaster``
    of a SYNC_MASTER, else None: at once); NotReplicatedError when no slave acknowledged them in time."""
    if replication is None:
        return
    for result in await replication.replicated(results):
        _raise_unless_replicated(result.status)


def _raise_unless_replicated(status: PutStatus) -> None:
    if status in (PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE):
        raise NotReplicatedError(
            f"stored on the master, but {status.value}: no slave acknowledged it",
            slave_in_sync=status is PutStatus.FLUSH_SLAVE_TIMEOUT,
        )


class LocalPopWrites:
    """Where the pop engine writes CK and ACK records and dead letters on a master: this broker's revive queues
    and store (the ``pop`` part of ``broker.write_path.LocalWritePath``).

    Under SYNC replication (``replication``: the master's ``HaMaster``) an ack and a change of invisible time
    answer once a slave holds their records, as a send does: an ack that returned OK holds after a failover,
    and the acting slave never hands the acked message out again. So does a FIFO ack or change of invisible
    time, which writes no record: it answers once a slave applied a metadata snapshot holding the FIFO POP
    state it made (``fifo_state``). A pop's CK does not wait: without it on the slave, the slave's pop offset is
    behind it too (``broker.ha_metadata.OffsetsGate``) and the message is delivered again (at least once); nor
    does a FIFO pop (without it the slave delivers that message again at once, attempt 1: at least once)."""

    def __init__(self, store, topics, replication: Replication | None = None):
        self._store = store
        self._topics = topics
        self._replication = replication

    def forwardable(self, ck_key: str, queue_offset: int) -> bool:
        return False  # a handle whose CK is not open here is invalid: a master's CKs are its own

    def escaped_in_flight(self, group: str, topic: str, queue_id: int) -> list[PopCheckpoint]:
        return []  # every CK of a master's pops is in its own revive queues

    async def put_messages(self, messages: list[MessageExt]) -> None:
        await store_copies(self._store, self._topics, messages)

    async def checkpoint(self, queue: ReviveQueue, ck: PopCheckpoint) -> int:
        """Store a pop's CK; returns the revive queue id its receipt handles name."""
        await queue.append_checkpoint(ck)
        return queue.queue_id

    async def acks(self, queue: ReviveQueue, acks: list[AckRecord]) -> None:
        results = await queue.append(acks)
        await replicated(self._replication, results)

    async def forward_acks(self, acks: list[AckRecord]) -> None:
        raise _not_here()  # a master forwards nothing (forwardable): its handles' CKs are its own

    async def change(self, queue: ReviveQueue | None, old_ack: AckRecord, new_ck: PopCheckpoint) -> int:
        """Close a message in its CK and open a one-message CK with the new deadline, in one store call."""
        if queue is None:
            raise _not_here()
        results = await queue.append([old_ack, new_ck])
        queue.expect([new_ck])
        await replicated(self._replication, results)
        return queue.queue_id

    async def fifo_state(self) -> None:
        """After a FIFO ack or change of invisible time: under SYNC replication, return once a slave applied the
        FIFO POP state with it; NotReplicatedError when none did in time (it holds on the master all the same)."""
        if self._replication is not None:
            _raise_unless_replicated(await self._replication.metadata_replicated())


def _not_here() -> InvalidReceiptHandleError:
    return InvalidReceiptHandleError("the receipt handle's CK is not open on this broker")
