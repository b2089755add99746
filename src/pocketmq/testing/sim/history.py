"""The trace of a run: what each node observed, in virtual time. Checkers read only this (and the final
contents of the disks), never the nodes' state."""

from __future__ import annotations

import hashlib
from typing import Any

from pocketmq.testing.sim.kernel import Kernel


class History:
    def __init__(self, kernel: Kernel):
        self._kernel = kernel
        self.events: list[tuple[int, str, dict[str, Any]]] = []

    def record(self, kind: str, **fields: Any) -> None:
        self.events.append((self._kernel.elapsed_ms(), kind, fields))

    def digest(self) -> str:
        """A fingerprint of the whole trace: two runs of one seed must give the same one."""
        sha = hashlib.sha256()
        for t, kind, fields in self.events:
            sha.update(f"{t} {kind} {sorted(fields.items())!r}\n".encode())
        return sha.hexdigest()[:16]
