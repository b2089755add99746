"""What the clients saw during a chaos run: one event per send, delivery, ack, nack and client error.

Events are plain dicts (the official client's subprocess writes the same ones as JSON lines), with wall-clock
``t`` (seconds) so events of different processes compare:

    {"e": "send", "who": "sdk", "id": ..., "ok": True, "status": "SEND_OK", "t": ...}
    {"e": "deliver", "group": ..., "id": ..., "attempt": 1, "broker": ..., "topic": ..., "t0": receive start, "t": ...}
    {"e": "ack_sent" | "nack_sent", "group": ..., "id": ..., "attempt": 1, "t0": request start, "t": ...}  # before the call
    {"e": "ack" | "nack", "group": ..., "id": ..., "attempt": 1, "ok": True, "error": ..., "t0": request start, "t": ...}
        # a failure without the broker's answer (connection lost, timeout) also has "no_answer": True
    {"e": "error", "who": ..., "op": ..., "error": ..., "t": ...}
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path


class History:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self._lock = threading.Lock()

    def add(self, e: str, **fields) -> None:
        fields.setdefault("t", time.time())
        with self._lock:
            self.events.append({"e": e, **fields})

    def extend_from_jsonl(self, path: Path) -> int:
        """Append the events of a JSON-lines file (a torn last line, from a kill -9, is skipped)."""
        if not path.exists():
            return 0
        added = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                added.append(json.loads(line))
            except ValueError:
                continue
        with self._lock:
            self.events.extend(added)
        return len(added)

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.events)
