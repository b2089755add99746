"""What a slave did while acting as master, kept beside its replica (``config/acting_master.json``).

The slave's store stays a byte-exact replica of its master's, so the records that would say "this CK was
revived" (an ACK in the revive queue) or "this timer was delivered" (a tombstone in the timer queue) cannot be
written there. The acting slave keeps them in this side file instead, rewritten atomically after every round
that changed it:

- ``acks``: per revive queue, the ACK records (RocketMQ's JSON) the slave would have appended there: the one
  that closes each CK it revived, and each ack a consumer sent it for a CK of its replica;
- ``timers``: (timer queue offset, due ms) of each delay message the slave delivered through the escape bridge;
- ``stages``: the staged-POP registrations changed on the slave while it acted (registered again, unregistered,
  a queue's first origin, a group deleted), the last change of each (group, topic): newer than the master's
  entry, so the master takes them over its own;
- ``actedVersion``: the version at which the slave last started acting, until a master took its progress
  since: what it popped and acked moved only its own consumer offsets and FIFO state, which the master must
  take too, also when it did not restart (a master that was frozen or cut off: ``handover_due``).

The handover body also carries the slave's consumer offsets, FIFO POP state and staged-POP registrations
(its own while it acts), which the master merges into its own (forward only; registrations it lacks).

Uses: a restart of the acting slave applies it again (those acks to its ledger, drops those timers from
its wheel), so it does not repeat its work; and the returning master takes it over (``snapshot`` over
ACTING_MASTER_HANDOVER, docs/ha.md): it appends the ACKs and tombstones to its own store before its revive
and timer start, then confirms with the snapshot's ``version`` (``applied``), which removes those entries here.
Entries added after the snapshot (none, normally: the handover stops the acting services first) stay.

The file holds only the work of one outage (it is emptied at each handover): its size is bounded by the
CKs revived and timers delivered while the master was away.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.broker.pop.checkpoint import AckRecord
from pocketmq.broker.pop.fifo import parse_fifo_state
from pocketmq.broker.pop.staged import StagedTopic, parse_pop_stages
from pocketmq.runtime.files import atomic_write_json, load_json

log = logging.getLogger(__name__)


class ActingProgress:
    def __init__(self, path: Path):
        self._path = Path(path)
        self.version = 0  # raised by every change; a handover confirms up to one version
        self._acks: list[dict] = []  # {"reviveQueueId", "ack" (JSON text), "v"}
        self._timers: list[dict] = []  # {"queueOffset", "deliverMs", "v"}
        self._stages: list[dict] = []  # {"group", "topic", "staged" (StagedTopic JSON, None: removed), "v"}
        self._acted_version: int | None = None  # started acting at this version; None: no master needs to know

    def load(self) -> None:
        obj = load_json(self._path, {})
        self.version = int(obj.get("version", 0))
        self._acks = list(obj.get("acks", []))
        self._timers = list(obj.get("timers", []))
        self._stages = list(obj.get("stages", []))
        acted = obj.get("actedVersion")
        self._acted_version = int(acted) if acted is not None else None
        if len(self):
            log.info(
                "event=acting_progress_loaded acks=%d timers=%d stages=%d version=%d",
                len(self._acks),
                len(self._timers),
                len(self._stages),
                self.version,
            )

    def save(self) -> None:
        atomic_write_json(self._path, self._obj())

    def _obj(self) -> dict:
        obj = {"version": self.version, "acks": self._acks, "timers": self._timers, "stages": self._stages}
        if self._acted_version is not None:
            obj["actedVersion"] = self._acted_version
        return obj

    # -- recording ------------------------------------------------------------------------------------------------
    def record_acting(self) -> None:
        """The slave starts acting: from now on its master has progress to take (saved at once)."""
        self.version += 1
        self._acted_version = self.version
        self.save()

    def record_ack(self, revive_queue_id: int, ack: AckRecord) -> None:
        self.version += 1
        self._acks.append({"reviveQueueId": revive_queue_id, "ack": ack.to_json().decode(), "v": self.version})

    def record_delivered(self, queue_offset: int, deliver_ms: int) -> None:
        self.version += 1
        self._timers.append({"queueOffset": queue_offset, "deliverMs": deliver_ms, "v": self.version})

    def record_stages(self, key: tuple[str, str], staged: StagedTopic | None) -> None:
        """A staged-POP registration changed here (None: removed); saved at once, as the registry is."""
        self.version += 1
        group, topic = key
        self._stages = [e for e in self._stages if (e["group"], e["topic"]) != key]
        entry = staged.to_json() if staged is not None else None
        self._stages.append({"group": group, "topic": topic, "staged": entry, "v": self.version})
        self.save()

    # -- reading --------------------------------------------------------------------------------------------------
    def acks(self, revive_queue_id: int | None = None) -> list[tuple[int, AckRecord]]:
        """(revive queue id, ACK) of every ack kept while acting (of one revive queue when given)."""
        return [
            (queue_id, ack)
            for queue_id, ack in _acks(self._acks)
            if revive_queue_id is None or queue_id == revive_queue_id
        ]

    def delivered_timers(self) -> list[tuple[int, int]]:
        """(timer queue offset, due ms) of every timer delivered while acting."""
        return _timers(self._timers)

    def snapshot(self, consumer_offsets: dict, pop_fifo: dict | None = None, pop_stages: dict | None = None) -> bytes:
        """The handover body: everything recorded, with the version the master confirms, and the slave's
        consumer offsets (``ConsumerOffsetManager.snapshot()``: pops and commits made on it while acting), FIFO
        POP state (``FifoPopState.to_json()``) and staged-POP registrations (``PopStageRegistry.to_json()``)."""
        body = {**self._obj(), "offsets": consumer_offsets}
        if pop_fifo is not None:
            body["popFifo"] = pop_fifo
        if pop_stages is not None:
            body["popStages"] = pop_stages
        return json.dumps(body, separators=(",", ":")).encode()

    def applied(self, version: int) -> int:
        """The master has taken everything up to ``version``: forget it; returns how many entries went."""
        before = len(self)
        self._acks = [e for e in self._acks if int(e["v"]) > version]
        self._timers = [e for e in self._timers if int(e["v"]) > version]
        self._stages = [e for e in self._stages if int(e["v"]) > version]
        if self._acted_version is not None and self._acted_version <= version:
            self._acted_version = None
        self.save()
        return before - len(self)

    @property
    def handover_due(self) -> bool:
        """Whether a master has not yet taken what this slave did since it last started acting."""
        return self._acted_version is not None or len(self) > 0

    def __len__(self) -> int:
        return len(self._acks) + len(self._timers) + len(self._stages)

    def __repr__(self) -> str:
        return f"<ActingProgress acks={len(self._acks)} timers={len(self._timers)} version={self.version}>"


def _acks(entries: list[dict]) -> list[tuple[int, AckRecord]]:
    return [(int(e["reviveQueueId"]), AckRecord.from_json(e["ack"])) for e in entries]


def _timers(entries: list[dict]) -> list[tuple[int, int]]:
    return [(int(e["queueOffset"]), int(e["deliverMs"])) for e in entries]


def _stages(entries: list[dict]) -> dict[tuple[str, str], StagedTopic | None]:
    return {
        (e["group"], e["topic"]): None if e["staged"] is None else StagedTopic.from_json(e["staged"]) for e in entries
    }


@dataclass(frozen=True, slots=True)
class Handover:
    version: int
    acks: list[tuple[int, AckRecord]]
    timers: list[tuple[int, int]]
    consumer_offsets: dict
    pop_fifo: dict = field(default_factory=dict)  # (group, topic, queue id) -> OrderlyQueue; {} from an older slave
    pop_stages: dict = field(default_factory=dict)  # (group, topic) -> StagedTopic
    # (group, topic) -> StagedTopic or None (removed): changed on the slave while it acted; {} from an older slave
    stage_changes: dict = field(default_factory=dict)


def parse_snapshot(body: bytes) -> Handover:
    """A handover body; ValueError when it does not parse (nothing of it is applied then)."""
    try:
        obj = json.loads(body or b"{}")
        offsets = obj.get("offsets", {})
        if not isinstance(offsets, dict):
            raise TypeError("offsets is not an object")
        return Handover(
            int(obj.get("version", 0)),
            _acks(obj.get("acks", [])),
            _timers(obj.get("timers", [])),
            offsets,
            parse_fifo_state(obj.get("popFifo", {})),
            parse_pop_stages(obj.get("popStages", {})),
            _stages(obj.get("stages", [])),
        )
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"acting progress does not parse: {exc}") from None
