"""FIFO pop state of one broker: an ``OrderlyQueue`` per (group, topic, queue id), persisted atomically.

FIFO pops write no CK: what is in flight, with its attempt and deadline, lives in the ``OrderlyQueue``s, which
are saved as one JSON file (``<data_dir>/config/pop_fifo.json``, temp file + fsync + rename) at most every
``persist_interval_ms`` when something changed, and at shutdown.

An ack or a change of invisible time (``promised``) is also appended at once, before it answers, to a journal
beside the file (``pop_fifo.json.journal``: one line per change, the queue's whole state after it), which
``load`` merges into the saved state (``OrderlyQueue.merge``: monotone, so a line older than the file changes
nothing) and each save empties. An append is one small write, no fsync (the page cache survives a ``kill -9``,
as the commit log's records do; a power loss under ASYNC_FLUSH may take the last lines, as it may take the last
ACK records of normal POP); a full save costs an fsync of the whole state (about 12 ms on a shared disk), which
every ack would wait for otherwise.

What a ``kill -9`` can cost: the pops of the last interval. A pop not yet saved is forgotten, so its message
is delivered again at once after the restart (a duplicate, attempt not counted). An ack that answered is never
forgotten: its message does not come back. Nothing is lost: the state only ever forgets pops.

A slave gets its master's state with the metadata sync (``to_json`` there, ``replace`` here: broker.ha_services),
so when it acts as master a message group in flight on the master stays blocked, and the master's handles ack.
The way back: a returning master merges the acting slave's state into its own (``merge``, at the handover:
broker.acting_services), so what the slave delivered stays in flight and what was acked there stays done.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pocketmq.broker.pop.orderly import OrderlyQueue
from pocketmq.runtime.files import atomic_write_json, load_json

log = logging.getLogger(__name__)

ORDERLY_REVIVE_QUEUE_ID = 999  # RocketMQ's revive queue id of orderly pops; marks FIFO receipt handles
_KEY_SEPARATOR = "@"


class FifoPopState:
    def __init__(self, path: Path):
        self._path = Path(path)
        self._journal = self._path.with_name(self._path.name + ".journal")
        self._queues: dict[tuple[str, str, int], OrderlyQueue] = {}
        self._dirty = False
        self._loaded = False
        # Acks and changes of invisible time made here since start: part of the master's metadata version, so
        # a SYNC master answers them once a slave applied a snapshot that holds them (docs/ha.md).
        self.data_version = 0

    def load(self) -> None:
        """Read the file once (a master's handover may load it before its POP starts)."""
        if self._loaded:
            return
        self._loaded = True
        self._queues.update(parse_fifo_state(load_json(self._path, {})))
        replayed = self.merge(self._journaled())
        log.info(
            "event=fifo_pop_state_loaded queues=%d journal_queues_merged=%d path=%s",
            len(self._queues),
            replayed,
            self._path,
        )

    def _journaled(self) -> dict[tuple[str, str, int], OrderlyQueue]:
        """The last journal line of each queue (a later line holds everything an earlier one did)."""
        try:
            lines = self._journal.read_bytes().splitlines()
        except FileNotFoundError:
            return {}
        queues: dict[tuple[str, str, int], OrderlyQueue] = {}
        for line in lines:
            try:
                queues.update(parse_fifo_state(json.loads(line)))
            except ValueError as exc:  # a line cut by a power loss: the ones before it hold
                log.warning("event=fifo_pop_journal_line_unreadable path=%s error=%s", self._journal, exc)
        return queues

    def queue(self, group: str, topic: str, queue_id: int, start_offset: int) -> OrderlyQueue:
        key = (group, topic, queue_id)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = OrderlyQueue(start_offset)
        return queue

    def find(self, group: str, topic: str, queue_id: int) -> OrderlyQueue | None:
        return self._queues.get((group, topic, queue_id))

    def all_queues(self) -> dict[tuple[str, str, int], OrderlyQueue]:
        """(group, topic, queue id) -> its state, every group's."""
        return dict(self._queues)

    def of_group(self, group: str) -> dict[tuple[str, int], OrderlyQueue]:
        return {(t, q): oq for (g, t, q), oq in self._queues.items() if g == group}

    def changed(self) -> None:
        self._dirty = True

    def promised(self, group: str, topic: str, queue_id: int) -> None:
        """A change of one queue a client is told about (an ack, a change of invisible time): journaled before it
        answers, and a new ``data_version``. OSError when the journal could not be written."""
        self._dirty = True
        self.data_version += 1
        key = (group, topic, queue_id)
        line = json.dumps({"queues": {_KEY_SEPARATOR.join((group, topic, str(queue_id))): self._queues[key].to_json()}})
        with open(self._journal, "ab") as journal:
            journal.write(line.encode() + b"\n")

    def to_json(self) -> dict:
        """The whole state as the file holds it (``parse_fifo_state`` reads it back)."""
        return {"queues": {_KEY_SEPARATOR.join((g, t, str(q))): oq.to_json() for (g, t, q), oq in self._queues.items()}}

    def replace(self, queues: dict[tuple[str, str, int], OrderlyQueue]) -> bool:
        """Make the state equal to ``queues`` (a master's, parsed by ``parse_fifo_state``); returns whether it
        changed (then it is saved at the next ``persist``)."""
        current = {key: oq.to_json() for key, oq in self._queues.items()}
        if current == {key: oq.to_json() for key, oq in queues.items()}:
            return False
        self._queues = dict(queues)
        self._dirty = True
        return True

    def merge(self, queues: dict[tuple[str, str, int], OrderlyQueue]) -> int:
        """Merge another broker's state (``OrderlyQueue.merge`` per queue); returns how many queues changed
        (then it is saved at the next ``persist``)."""
        changed = 0
        for key, other in queues.items():
            mine = self._queues.get(key)
            before = mine.to_json() if mine is not None else None
            if mine is None:
                mine = self._queues[key] = OrderlyQueue(other.commit_offset)
            mine.merge(other)
            changed += mine.to_json() != before
        self._dirty = self._dirty or changed > 0
        return changed

    def persist(self) -> bool:
        if not self._dirty:
            return False
        self._dirty = False
        try:
            atomic_write_json(self._path, self.to_json())
            self._journal.unlink(missing_ok=True)  # the file holds every journaled change now
        except OSError:
            self._dirty = True
            raise
        return True

    def __repr__(self) -> str:
        return f"<FifoPopState queues={len(self._queues)} dirty={self._dirty}>"


def parse_fifo_state(document: dict) -> dict[tuple[str, str, int], OrderlyQueue]:
    """(group, topic, queue id) -> ``OrderlyQueue`` of a ``FifoPopState.to_json`` document; ValueError when it
    does not parse."""
    queues = {}
    try:
        for key, obj in document.get("queues", {}).items():
            group, topic, queue_id = key.split(_KEY_SEPARATOR)
            queues[(group, topic, int(queue_id))] = OrderlyQueue.from_json(obj)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"FIFO pop state does not parse: {exc!r}") from None
    return queues
