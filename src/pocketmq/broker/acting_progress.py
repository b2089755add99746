"""What a slave did while acting as master, kept beside its replica (``config/acting_master.json``).

The slave's store stays a byte-exact replica of its master's, so the records that would say "this CK was
revived" (an ACK in the revive queue) or "this timer was delivered" (a tombstone in the timer queue) cannot be
written there. The acting slave keeps them in this side file instead, rewritten atomically after every round
that changed it:

- ``closedCks``: per revive queue, the ACK record (RocketMQ's JSON) that closes each CK the slave revived;
- ``timers``: (timer queue offset, due ms) of each delay message the slave delivered through the escape bridge.

Uses: a restart of the acting slave applies it again (closes those CKs in its ledger, drops those timers from
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
from pathlib import Path

from pocketmq.broker.pop.checkpoint import AckRecord
from pocketmq.store.metadata import atomic_write_json, load_json

log = logging.getLogger(__name__)


class ActingProgress:
    def __init__(self, path: Path):
        self._path = Path(path)
        self.version = 0  # raised by every change; a handover confirms up to one version
        self._closed: list[dict] = []  # {"reviveQueueId", "ack" (JSON text), "v"}
        self._timers: list[dict] = []  # {"queueOffset", "deliverMs", "v"}

    def load(self) -> None:
        obj = load_json(self._path, {})
        self.version = int(obj.get("version", 0))
        self._closed = list(obj.get("closedCks", []))
        self._timers = list(obj.get("timers", []))
        if self._closed or self._timers:
            log.info("event=acting_progress_loaded closed_cks=%d timers=%d version=%d", len(self._closed),
                     len(self._timers), self.version)

    def save(self) -> None:
        atomic_write_json(self._path, self._obj())

    def _obj(self) -> dict:
        return {"version": self.version, "closedCks": self._closed, "timers": self._timers}

    # -- recording ------------------------------------------------------------------------------------------------
    def record_closed(self, revive_queue_id: int, ack: AckRecord) -> None:
        self.version += 1
        self._closed.append({"reviveQueueId": revive_queue_id, "ack": ack.to_json().decode(), "v": self.version})

    def record_delivered(self, queue_offset: int, deliver_ms: int) -> None:
        self.version += 1
        self._timers.append({"queueOffset": queue_offset, "deliverMs": deliver_ms, "v": self.version})

    # -- reading --------------------------------------------------------------------------------------------------
    def closed_acks(self, revive_queue_id: int | None = None) -> list[tuple[int, AckRecord]]:
        """(revive queue id, ACK) of every CK closed while acting (of one revive queue when given)."""
        return [(int(e["reviveQueueId"]), AckRecord.from_json(e["ack"])) for e in self._closed
                if revive_queue_id is None or int(e["reviveQueueId"]) == revive_queue_id]

    def delivered_timers(self) -> list[tuple[int, int]]:
        """(timer queue offset, due ms) of every timer delivered while acting."""
        return [(int(e["queueOffset"]), int(e["deliverMs"])) for e in self._timers]

    def snapshot(self) -> bytes:
        """The handover body: everything recorded, with the version the master confirms."""
        return json.dumps(self._obj(), separators=(",", ":")).encode()

    def applied(self, version: int) -> int:
        """The master has taken everything up to ``version``: forget it; returns how many entries went."""
        before = len(self._closed) + len(self._timers)
        self._closed = [e for e in self._closed if int(e["v"]) > version]
        self._timers = [e for e in self._timers if int(e["v"]) > version]
        self.save()
        return before - len(self._closed) - len(self._timers)

    def __len__(self) -> int:
        return len(self._closed) + len(self._timers)

    def __repr__(self) -> str:
        return f"<ActingProgress closed_cks={len(self._closed)} timers={len(self._timers)} version={self.version}>"


def parse_snapshot(body: bytes) -> tuple[int, list[tuple[int, AckRecord]], list[tuple[int, int]]]:
    """(version, closed CK acks, delivered timers) of a handover body; ValueError when it does not parse."""
    try:
        obj = json.loads(body or b"{}")
        closed = [(int(e["reviveQueueId"]), AckRecord.from_json(e["ack"])) for e in obj.get("closedCks", [])]
        timers = [(int(e["queueOffset"]), int(e["deliverMs"])) for e in obj.get("timers", [])]
        return int(obj.get("version", 0)), closed, timers
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"acting progress does not parse: {exc}") from None
