"""Replication epochs: which master wrote which part of the commit log, so a diverged slave finds where its
log stops being its master's and cuts it there by itself.

An *epoch* is one master tenure: its number (one more than the last the broker knew; under a controller, the
epoch etcd granted the tenure, ``tenure_number``), the phys offset where
its first record goes (the log's end when the tenure began) and a random tenure id. The id is what makes
two epochs the same: without a controller, two brokers that each started as master may pick the same
number for different logs. A broker begins a tenure each time it starts as master (``begin_tenure``); a
slave keeps the master's epochs for the part of the log it holds (``adopt``). Entry ``i`` covers the log
from its start to the next entry's start (the last one to the log's end).

Before following a master, a slave compares epochs (``plan``): the last epoch the two histories share ends
at the smaller of its two ends (a later tenure of either side starts there), and the logs are the same
below that point (the common prefix). Records of the slave beyond it were never the master's: the slave
truncates them, unless that would cut what was *confirmed*: ``confirmed_phys_offset`` is the highest offset
its (old) master counted as replicated to a slave for a SYNC send (SEND_OK may have gone to a producer for
any record below it; for a broker that was master, what it confirmed itself). Cutting below it could drop
the last copy of an acknowledged message, so the slave refuses and keeps its data for an operator. Above it
nothing was acknowledged as replicated: those records were on one broker only (a master's unreplicated
tail, or an ASYNC send), which a SYNC producer never got SEND_OK for. The continuity check
(``ha_state.replication_start``) still runs after the cut, so a wrong plan is refused, never followed.

File ``<data dir>/ha_epochs.json`` (``EpochFile``), replaced atomically::

    {"epochs": [{"epoch": 1, "startPhysOffset": 0, "tenureId": "9f2c..."}, ...], "confirmedPhysOffset": N}
"""

from __future__ import annotations

import enum
import json
import logging
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from pocketmq.runtime.files import atomic_write_json, load_json

log = logging.getLogger(__name__)

EPOCH_FILE = "ha_epochs.json"


@dataclass(frozen=True, slots=True)
class Epoch:
    epoch: int
    start_phys_offset: int
    tenure_id: str

    def to_json(self) -> dict:
        return {"epoch": self.epoch, "startPhysOffset": self.start_phys_offset, "tenureId": self.tenure_id}

    @staticmethod
    def from_json(obj: dict) -> Epoch:
        epoch, start, tenure = int(obj["epoch"]), int(obj["startPhysOffset"]), str(obj["tenureId"])
        if epoch < 0 or start < 0 or not tenure:
            raise ValueError(f"bad epoch entry {obj!r}")
        return Epoch(epoch, start, tenure)


def new_tenure_id() -> str:
    return secrets.token_hex(8)


def parse_epochs(items) -> list[Epoch]:
    """Epoch entries from JSON; ValueError when one is malformed or they are not in order."""
    try:
        epochs = [Epoch.from_json(item) for item in items]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"epoch entries do not parse: {exc}") from None
    for before, after in zip(epochs, epochs[1:]):
        if after.epoch <= before.epoch or after.start_phys_offset < before.start_phys_offset:
            raise ValueError(f"epoch entries out of order: {before} then {after}")
    return epochs


def tenure_number(epochs: list[Epoch], controller_epoch: int = 0) -> int:
    """The number of the next tenure: one more than the last, or under a controller the epoch etcd granted
    (so a tenure has one number in etcd and in the log). Only a log whose epochs already reach it (numbered
    by static roles before the controller was used) goes on from its own last number."""
    return max(epochs[-1].epoch + 1 if epochs else 1, controller_epoch)


def begin_tenure(
    epochs: list[Epoch], max_phys_offset: int, min_phys_offset: int, tenure_id: str, controller_epoch: int = 0
) -> list[Epoch]:
    """The epochs of a broker that starts as master: a new one from its log's end, numbered by
    ``tenure_number``. A last tenure that wrote nothing is replaced (no slave can hold a record of it), and
    entries wholly below the log's start (retention removed their records) are dropped, so the list grows by
    tenures that wrote something."""
    kept = [e for e in epochs if e.start_phys_offset < max_phys_offset]
    number = tenure_number(epochs, controller_epoch)
    first_live = 0
    for i, e in enumerate(kept):
        if e.start_phys_offset <= min_phys_offset:
            first_live = i
    return [*kept[first_live:], Epoch(number, max_phys_offset, tenure_id)]


def epoch_end(epochs: list[Epoch], index: int, log_end: int) -> int:
    """Where entry ``index`` ends in a log ending at ``log_end``: the next entry's start, else the log's end."""
    return epochs[index + 1].start_phys_offset if index + 1 < len(epochs) else log_end


def adopt(master_epochs: list[Epoch], slave_end: int) -> list[Epoch]:
    """A slave's epochs once its log equals the master's up to ``slave_end``: the master's that began below."""
    return [e for e in master_epochs if e.start_phys_offset < slave_end]


def common_prefix_end(slave_epochs: list[Epoch], slave_end: int, master_epochs: list[Epoch], master_end: int) -> int:
    """Where the two logs stop being the same: the end of the last shared epoch on the side where it ends
    first; 0 when they share none (the slave's whole log is another history)."""
    master_index = {(e.epoch, e.tenure_id, e.start_phys_offset): i for i, e in enumerate(master_epochs)}
    for i in range(len(slave_epochs) - 1, -1, -1):
        e = slave_epochs[i]
        j = master_index.get((e.epoch, e.tenure_id, e.start_phys_offset))
        if j is not None:
            return min(epoch_end(slave_epochs, i, slave_end), epoch_end(master_epochs, j, master_end))
    return 0


class PlanKind(enum.Enum):
    FOLLOW = "follow"  # the slave's log is a prefix of the master's history: replicate
    TRUNCATE = "truncate"  # cut the slave's log at ``truncate_to``, then replicate
    REFUSE = "refuse"  # cutting would drop confirmed records or everything above retention: keep the data
    UNKNOWN = "unknown"  # the slave has no epochs (an older data directory): the continuity check decides


@dataclass(frozen=True, slots=True)
class ReplicaPlan:
    kind: PlanKind
    truncate_to: int = 0
    common_end: int = 0
    reason: str = ""


def plan(
    slave_epochs: list[Epoch],
    slave_min: int,
    slave_end: int,
    master_epochs: list[Epoch],
    master_end: int,
    confirmed_phys_offset: int,
) -> ReplicaPlan:
    """What a slave whose log is ``[slave_min, slave_end)`` does before following the master."""
    if not slave_epochs or not master_epochs or slave_end == slave_min:
        return ReplicaPlan(PlanKind.UNKNOWN if slave_end > slave_min else PlanKind.FOLLOW)
    common = common_prefix_end(slave_epochs, slave_end, master_epochs, master_end)
    if common >= slave_end:
        return ReplicaPlan(PlanKind.FOLLOW, common_end=common)
    if common < confirmed_phys_offset:
        return ReplicaPlan(
            PlanKind.REFUSE,
            common_end=common,
            reason=(
                f"the logs part at {common}, below {confirmed_phys_offset}, up to which this broker's records were "
                "confirmed as replicated (SYNC sends may have been acknowledged): the master lacks them; make this "
                "broker the master, or clear its data directory to drop them"
            ),
        )
    if common <= slave_min and slave_min > 0:
        return ReplicaPlan(
            PlanKind.REFUSE,
            common_end=common,
            reason=(
                f"the logs part at {common}, at or below this broker's first record at {slave_min} (retention): "
                "nothing in common to keep; clear its data directory to copy the master"
            ),
        )
    return ReplicaPlan(PlanKind.TRUNCATE, truncate_to=common, common_end=common)


class EpochFile:
    """A broker's epochs and confirmed offset, in memory and in ``<data dir>/ha_epochs.json``."""

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / EPOCH_FILE
        self.epochs: list[Epoch] = []
        self.confirmed_phys_offset = 0
        self._saved: tuple[list[Epoch], int] = ([], 0)  # what the file holds: epochs, confirmed offset
        self._save_lock = threading.Lock()  # the periodic save runs in a worker thread, the others on the loop

    def load(self) -> None:
        obj = load_json(self.path, {})
        try:
            self.epochs = parse_epochs(obj.get("epochs", []))
            self.confirmed_phys_offset = int(obj.get("confirmedPhysOffset", 0))
            self._saved = (self.epochs, self.confirmed_phys_offset)
        except (ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"{self.path} does not parse: {exc}") from None

    def save(self) -> None:
        """Atomic and durable (blocking)."""
        with self._save_lock:
            epochs, confirmed = self.epochs, self.confirmed_phys_offset
            atomic_write_json(self.path, {"epochs": [e.to_json() for e in epochs], "confirmedPhysOffset": confirmed})
            self._saved = (epochs, confirmed)

    def confirmed(self, phys_offset: int) -> None:
        """Records below ``phys_offset`` were confirmed as replicated (kept in memory; ``save_if_confirmed``)."""
        self.confirmed_phys_offset = max(self.confirmed_phys_offset, phys_offset)

    def save_if_changed(self) -> bool:
        """Save when the confirmed offset moved or the epochs changed since the last save (a periodic task
        calls this; it also retries a tenure whose save failed)."""
        if (self.epochs, self.confirmed_phys_offset) == self._saved:
            return False
        self.save()
        return True

    def begin_tenure(self, max_phys_offset: int, min_phys_offset: int, controller_epoch: int = 0) -> Epoch:
        self.epochs = begin_tenure(self.epochs, max_phys_offset, min_phys_offset, new_tenure_id(), controller_epoch)
        if controller_epoch and self.epochs[-1].epoch != controller_epoch:
            log.warning(
                "event=ha_epoch_not_controller_epoch epoch=%d controller_epoch=%d reason=this log's epochs were "
                "numbered higher before the controller was used",
                self.epochs[-1].epoch,
                controller_epoch,
            )
        try:
            self.save()
        except OSError as exc:
            # A master must start on a full disk (reads, acks and restarts go on); its sends are refused until
            # there is room, and the periodic save writes the tenure within a second of the disk having room.
            log.error("event=ha_epochs_save_failed path=%s error=%r retry=periodic", self.path, exc)
        return self.epochs[-1]

    def replace(self, epochs: list[Epoch]) -> bool:
        """Take ``epochs`` (a slave adopting its master's); saved when they changed. Returns whether they did."""
        if epochs == self.epochs:
            return False
        self.epochs = epochs
        self.save()
        return True

    def cut(self, phys_offset: int) -> None:
        """The log was truncated at ``phys_offset``: forget epochs that began at or after it."""
        self.replace([e for e in self.epochs if e.start_phys_offset < phys_offset])

    @property
    def current(self) -> Epoch | None:
        return self.epochs[-1] if self.epochs else None

    def to_body(self) -> bytes:
        return json.dumps({"epochs": [e.to_json() for e in self.epochs]}, separators=(",", ":")).encode()

    def __repr__(self) -> str:
        last = self.epochs[-1] if self.epochs else None
        return f"<EpochFile epochs={len(self.epochs)} last={last} confirmed={self.confirmed_phys_offset}>"


def epochs_of_body(body: bytes) -> list[Epoch]:
    """The epochs of a master's HA_EPOCHS answer; ValueError when it does not parse."""
    try:
        obj = json.loads(body or b"{}")
        return parse_epochs(obj.get("epochs", []))
    except (json.JSONDecodeError, AttributeError) as exc:
        raise ValueError(f"epochs do not parse: {exc}") from None
