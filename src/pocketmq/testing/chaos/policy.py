"""What a chaos consumer does with a delivered message: a pure function of the seed, the message id and its
delivery attempt, shared by the SDK consumer and the official client's subprocess, so a replay makes the same
choices for the same deliveries."""

from __future__ import annotations

import enum
import time
import zlib
from collections.abc import Callable

TOPIC = "chaos"
SDK_GROUP = "chaos-sdk"
OFFICIAL_GROUP = "chaos-official"
RETRY_MAX_TIMES = 2  # so a poison message reaches the DLQ within a run (3 deliveries)
INVISIBLE_MS = 2000  # a dropped message comes back after this
NACK_INVISIBLE_MS = 1000  # a nack is a change of invisible time to this (the broker's floor)
POISON_PERCENT = 3  # never acked: each must end in %DLQ%<group> with its reason


class Disposition(enum.Enum):
    ACK = "ack"
    NACK = "nack"  # change invisible time: back after NACK_INVISIBLE_MS, same attempt
    DROP = "drop"  # neither: back after INVISIBLE_MS, attempt + 1


def _draw(*parts: object) -> int:
    """0..99, the same for the same parts in every process."""
    return zlib.crc32(":".join(map(str, parts)).encode()) % 100


def is_poison(seed: int, msg_id: str) -> bool:
    return _draw(seed, msg_id, "poison") < POISON_PERCENT


def disposition(seed: int, msg_id: str, attempt: int, settling: bool) -> Disposition:
    """Poison messages are dropped every time; others get 70 % ack, 15 % nack, 15 % drop while the faults run,
    and are all acked once the run settles."""
    if is_poison(seed, msg_id):
        return Disposition.DROP
    if settling:
        return Disposition.ACK
    draw = _draw(seed, msg_id, attempt)
    return Disposition.ACK if draw < 70 else Disposition.NACK if draw < 85 else Disposition.DROP


def act(
    record: Callable[..., None],
    group: str,
    seed: int,
    msg_id: str,
    attempt: int,
    settling: bool,
    *,
    ack: Callable[[], object],  # what the clients' calls return is not used
    nack: Callable[[], object],
    errors: tuple[type[BaseException], ...],
    unanswered: Callable[[BaseException], bool] = lambda exc: False,
) -> None:
    """Do what ``disposition`` says with one delivery (``ack``/``nack`` call the client) and ``record`` the
    outcome as an ``ack``/``nack`` event (history.py); a drop records nothing. A failure for which
    ``unanswered`` is true came without the broker's answer (a connection lost, a timeout): it is recorded with
    ``no_answer``, since the broker may have stored it (killed after the write, before its reply)."""
    choice = disposition(seed, msg_id, attempt, settling)
    if choice is Disposition.DROP:
        return
    kind = "ack" if choice is Disposition.ACK else "nack"
    t0 = time.time()  # the broker may store it from here on, whenever its answer comes back
    # Recorded first: a client killed while the call is out leaves this without an outcome, and the broker may
    # have stored it (the checkers treat such a message as possibly acked, not lost).
    record(f"{kind}_sent", group=group, id=msg_id, attempt=attempt, t0=t0)
    try:
        (ack if choice is Disposition.ACK else nack)()
        record(kind, group=group, id=msg_id, attempt=attempt, ok=True, t0=t0)
    except errors as exc:
        unknown = {"no_answer": True} if unanswered(exc) else {}
        record(kind, group=group, id=msg_id, attempt=attempt, ok=False, error=repr(exc)[:300], t0=t0, **unknown)
