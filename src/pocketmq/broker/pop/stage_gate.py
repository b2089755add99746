"""The stage gate of a staged POP queue (docs/staged.md, "POP form"): what one pop may hand out. Pure.

A (group, topic) registered with stage definitions (e.g. ``[10, 20, 70]``) consumes each queue as one staged
sequence: the message at queue offset ``o`` has sequence number ``o - origin`` (``origin``: the queue offset
where the sequence starts, fixed at registration), so its stage is a function of its offset alone. A queue's
*lowest open offset* is the smallest offset still in flight (popped, neither acked nor dead-lettered), or the
next offset never popped when nothing is in flight. The current stage is the stage of that offset:

- new messages are handed out only below the current stage's end, so nothing of stage k+1 leaves before
  every message of stage k is acked or dead-lettered; inside the stage, all of it may be out at once;
- a message whose invisible time passed is handed out again in place (same queue offset, attempt + 1), so it
  stays in its stage and keeps holding back the next one; past the group's max attempts it is dead-lettered.

Offsets below ``origin`` (in flight when the sequence started) form a stage of their own before stage 0.
Every input is durable elsewhere: in-flight messages are the open CKs of the revive log (their attempt is the
CK's ``ra``), the next offset is the consumer offset, the origin is the registration. So the gate needs no
state of its own, and a broker restart resumes every queue exactly where it stood.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.common.stages import stage_end


@dataclass(frozen=True, slots=True)
class InFlight:
    queue_offset: int
    deadline_ms: int  # when it becomes visible again
    attempt: int  # reconsume times of its current delivery (0: the first)


@dataclass(frozen=True, slots=True)
class GateDecision:
    dead_letters: tuple[int, ...] = ()  # expired past the max attempts: dead-letter, then ask again
    redeliver: tuple[int, ...] = ()  # expired: hand out again with ``redeliver_attempt``
    redeliver_attempt: int = 0
    fresh_from: int = 0  # the next offset never popped
    fresh_end: int = 0  # hand out new messages from ``fresh_from`` below this queue offset (exclusive)


def current_stage_end(definitions: list[int], origin: int, lowest_open: int) -> float:
    """The queue offset (exclusive) up to which messages may be out while ``lowest_open`` is not done."""
    if lowest_open < origin:
        return origin
    return origin + stage_end(definitions, lowest_open - origin)


def decide(
    definitions: list[int],
    origin: int,
    in_flight: list[InFlight],
    next_offset: int,
    now_ms: int,
    wanted: int,
    max_attempts: int,
) -> GateDecision:
    """What a pop of ``wanted`` messages takes from the queue now. Expired messages go first (one attempt per
    decision: they share one CK, which carries one attempt); new ones only when none is expired."""
    next_offset = max([next_offset] + [f.queue_offset + 1 for f in in_flight])
    lowest = min([next_offset] + [f.queue_offset for f in in_flight])
    expired = sorted((f for f in in_flight if f.deadline_ms <= now_ms), key=lambda f: f.queue_offset)
    dead = tuple(f.queue_offset for f in expired if f.attempt + 2 > max_attempts)
    if dead:
        return GateDecision(dead_letters=dead, fresh_from=next_offset, fresh_end=next_offset)
    if expired:
        attempt = expired[0].attempt
        again = tuple(f.queue_offset for f in expired if f.attempt == attempt)[:wanted]
        return GateDecision(
            redeliver=again, redeliver_attempt=attempt + 1, fresh_from=next_offset, fresh_end=next_offset
        )
    end = current_stage_end(definitions, origin, lowest)
    return GateDecision(fresh_from=next_offset, fresh_end=int(min(end, next_offset + wanted)))
