"""Auto-renewed invisibility with stable receipt handles: what the broker does for push consumers.

A v2 push consumer receives with ``auto_renew`` and no invisible duration, then keeps the receipt handle it
got until its listener is done, however long that takes; it acks or nacks (ChangeInvisibleDuration) with that
first handle. The broker therefore keeps each such message invisible while its client lives: ``due(now_ms)``
lists the messages whose deadline is within ``ahead_ms``; the shell renews each (a change of invisible time
to ``invisible_ms``, which gives the message a new handle) while the client's session is alive, and
``renewed`` records the new handle. An ack, nack or forward that names the first handle is served with the
current one (``take``), and ends the renewal. A message is renewed for at most ``max_renew_ms`` after its
receive (a listener hung in a live client must not hold a message forever), then its invisible time runs out
and it is redelivered. A client that is gone stops renewing: its messages come back after their deadline.

The table is pure (every decision takes ``now_ms``); the shell (server/grpc_consumer.py) does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.broker.pop.receipt import ReceiptHandle

DEFAULT_AUTO_RENEW_INVISIBLE_MS = 60_000  # the proxy's default invisible time of auto-renewed receives
DEFAULT_RENEW_AHEAD_MS = 10_000  # renew this long before the deadline
DEFAULT_MAX_RENEW_MS = 3 * 3600 * 1000  # PocketMQ's choice: renew for at most 3 h after the receive


@dataclass(slots=True)
class Renewal:
    client_id: str
    group: str
    handle: ReceiptHandle  # the current one: the first handle, or the last renewal's
    received_ms: int


class RenewalTable:
    """First handle text -> its renewal, for every message delivered by an auto-renew receive."""

    def __init__(
        self,
        *,
        invisible_ms: int = DEFAULT_AUTO_RENEW_INVISIBLE_MS,
        ahead_ms: int = DEFAULT_RENEW_AHEAD_MS,
        max_renew_ms: int = DEFAULT_MAX_RENEW_MS,
    ):
        self.invisible_ms = invisible_ms
        self.ahead_ms = ahead_ms
        self.max_renew_ms = max_renew_ms
        self._renewals: dict[str, Renewal] = {}

    def track(self, first_text: str, client_id: str, group: str, handle: ReceiptHandle, now_ms: int) -> None:
        self._renewals[first_text] = Renewal(client_id, group, handle, now_ms)

    def take(self, first_text: str) -> ReceiptHandle | None:
        """The current handle of a tracked message, which stops being renewed; None when it is not tracked."""
        renewal = self._renewals.pop(first_text, None)
        return renewal.handle if renewal is not None else None

    def due(self, now_ms: int) -> list[tuple[str, Renewal]]:
        """Renewals whose deadline is within ``ahead_ms``; those past ``max_renew_ms`` are dropped instead."""
        out = []
        for text, renewal in list(self._renewals.items()):
            if renewal.handle.revive_time_ms - self.ahead_ms > now_ms:
                continue
            if now_ms - renewal.received_ms >= self.max_renew_ms:
                del self._renewals[text]
            else:
                out.append((text, renewal))
        return out

    def renewed(self, first_text: str, handle: ReceiptHandle) -> None:
        """Record a renewal's new handle, unless the message was acked or nacked meanwhile."""
        renewal = self._renewals.get(first_text)
        if renewal is not None:
            renewal.handle = handle

    def drop(self, first_text: str) -> None:
        self._renewals.pop(first_text, None)

    def __contains__(self, first_text: str) -> bool:
        return first_text in self._renewals

    def __len__(self) -> int:
        return len(self._renewals)

    def __repr__(self) -> str:
        return f"<RenewalTable tracked={len(self._renewals)} invisible_ms={self.invisible_ms}>"
