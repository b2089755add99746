"""The store checkpoint: the phys offset up to which the consume queues and the index are on disk.

File ``<data_dir>/checkpoint``, JSON ``{"phys_offset": N, "verified_phys_offset": V, "saved_at_ms": T}``,
replaced atomically (``metadata.atomic_write_json``), so a crash leaves the old or the new value.

``verified_phys_offset`` is where the commit log ended when the store last started: recovery checked every
frame below it then, so the next recovery verifies the frames from there on (written since) even when the
checkpoint covers them. Missing (a store written before it existed): the next recovery verifies everything.

Invariant kept by the writer (``MessageStore``'s flush): a checkpoint ``N`` is saved only after the commit
log up to ``N`` *and* every consume queue unit and index entry of the records below ``N`` were fsynced.
Recovery therefore trusts everything below ``N`` and validates and re-dispatches the commit log from ``N``.
A missing file means "nothing is known": recovery validates and re-dispatches the whole log.

Thread safety: ``save`` blocks (fsyncs) and runs in the flush worker thread; ``load`` runs at start.
"""

from __future__ import annotations

from pathlib import Path

from pocketmq.common.errors import StoreError
from pocketmq.runtime.files import atomic_write_json, load_json

CHECKPOINT_FILE = "checkpoint"


class Checkpoint:
    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / CHECKPOINT_FILE
        self.phys_offset: int | None = None  # None: no checkpoint saved yet
        self.verified_phys_offset = 0  # 0 with no checkpoint or one without the field: verify everything

    def load(self) -> int | None:
        content = load_json(self.path, None)
        self.verified_phys_offset = 0
        if content is None:
            self.phys_offset = None
        else:
            try:
                self.phys_offset = int(content["phys_offset"])
                self.verified_phys_offset = int(content.get("verified_phys_offset", 0))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise StoreError(f"{self.path} is not a store checkpoint: {exc}") from None
        return self.phys_offset

    def save(self, phys_offset: int, verified_phys_offset: int, now_ms: int) -> None:
        """Blocking (fsync): call from a worker thread."""
        atomic_write_json(
            self.path, {"phys_offset": phys_offset, "verified_phys_offset": verified_phys_offset, "saved_at_ms": now_ms}
        )
        self.phys_offset = phys_offset
        self.verified_phys_offset = verified_phys_offset

    def __repr__(self) -> str:
        return f"<Checkpoint phys_offset={self.phys_offset}>"
