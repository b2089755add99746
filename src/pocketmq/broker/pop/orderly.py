"""FIFO (orderly) POP of one (group, topic, queue): one message of a message group in flight at a time.

RocketMQ's orderly pop blocks a whole queue while any of its messages is invisible. PocketMQ blocks only the
message group (``__SHARDINGKEY``) of the message in flight, so the other groups that hash to the same queue
keep flowing, and each group still sees its messages strictly in order:

- ``select`` walks the queue from ``commit_offset`` (the lowest offset not yet done) over the messages the
  caller read, oldest first. A message that is done is skipped; a message whose group already has an
  earlier message in flight, or waiting to be delivered again, *blocks* that group for the rest of the walk.
  A message that was delivered before and whose invisible time has passed is delivered again, with its
  attempt counted up (it comes before anything later of its group).
- ``ack`` marks a delivered message done; ``commit_offset`` then moves over the done prefix.
- ``change_invisible`` moves the deadline of a message in flight (its attempt stays the same).
- A message whose attempts would exceed ``max_attempts`` is handed to the dead-letter path instead
  (``Selection.dead_letters``) and counts as done once the caller confirms with ``ack``.

Pure: the caller passes ``now_ms`` and the messages (queue offset, message group); the state is a plain
snapshot (``to_json``/``from_json``) that the broker persists.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class _Delivery:
    attempt: int  # 1-based delivery attempt of the last delivery
    invisible_until_ms: int


@dataclass(frozen=True, slots=True)
class Candidate:
    queue_offset: int
    message_group: str  # "" for a message without a group: it is its own group


@dataclass(slots=True)
class Selection:
    deliver: list[tuple[int, int]] = field(default_factory=list)  # (queue offset, attempt)
    dead_letters: list[tuple[int, int]] = field(default_factory=list)  # (queue offset, attempts made)


class OrderlyQueue:
    def __init__(self, commit_offset: int = 0):
        self.commit_offset = commit_offset
        self._in_flight: dict[int, _Delivery] = {}  # queue offset -> last delivery
        self._done: set[int] = set()  # offsets > commit_offset that are done

    def select(
        self, candidates: list[Candidate], now_ms: int, invisible_ms: int, max_count: int, max_attempts: int
    ) -> Selection:
        selection = Selection()
        blocked: set[str] = set()
        for cand in candidates:
            offset = cand.queue_offset
            if offset < self.commit_offset or offset in self._done:
                continue
            group = cand.message_group or f"\x00{offset}"  # no group: never blocks another message
            if group in blocked:
                continue
            blocked.add(group)
            previous = self._in_flight.get(offset)
            if previous is not None and previous.invisible_until_ms > now_ms:
                continue  # in flight: its group waits
            if len(selection.deliver) >= max_count:
                continue
            attempt = previous.attempt + 1 if previous else 1
            if attempt > max_attempts:
                selection.dead_letters.append((offset, attempt - 1))
                continue
            self._in_flight[offset] = _Delivery(attempt, now_ms + invisible_ms)
            selection.deliver.append((offset, attempt))
        return selection

    def ack(self, queue_offset: int) -> bool:
        """Mark done; False when the offset was never delivered or is done already (a stale ack)."""
        if queue_offset < self.commit_offset or queue_offset in self._done:
            return False
        if self._in_flight.pop(queue_offset, None) is None:
            return False
        self._done.add(queue_offset)
        while self.commit_offset in self._done:
            self._done.discard(self.commit_offset)
            self.commit_offset += 1
        return True

    def mark_done(self, queue_offsets) -> None:
        """Offsets that will never be delivered (filtered out by tags) count as done unless in flight."""
        for offset in queue_offsets:
            if offset >= self.commit_offset and offset not in self._in_flight:
                self._done.add(offset)
        while self.commit_offset in self._done:
            self._done.discard(self.commit_offset)
            self.commit_offset += 1

    def skip_to(self, queue_offset: int) -> None:
        """Everything below ``queue_offset`` is done (filtered out by tags, or removed by retention)."""
        if queue_offset > self.commit_offset:
            self.commit_offset = queue_offset
            self._done = {o for o in self._done if o >= queue_offset}
            self._in_flight = {o: d for o, d in self._in_flight.items() if o >= queue_offset}
            while self.commit_offset in self._done:
                self._done.discard(self.commit_offset)
                self.commit_offset += 1

    def merge(self, other: OrderlyQueue) -> None:
        """Take in what ``other`` (another broker's copy of this queue: an acting slave's, handed back) knows.
        Monotone, so merging an older copy changes nothing it should not: the higher commit offset and every
        done offset win over a delivery in flight, and of two deliveries of one offset the later one (higher
        attempt, then later deadline) wins."""
        commit = max(self.commit_offset, other.commit_offset)
        done = {o for o in self._done | other._done if o >= commit}
        in_flight: dict[int, _Delivery] = {}
        for deliveries in (self._in_flight, other._in_flight):
            for offset, d in deliveries.items():
                known = in_flight.get(offset)
                if (
                    offset >= commit
                    and offset not in done
                    and (known is None or (d.attempt, d.invisible_until_ms) > (known.attempt, known.invisible_until_ms))
                ):
                    in_flight[offset] = _Delivery(d.attempt, d.invisible_until_ms)
        self.commit_offset, self._done, self._in_flight = commit, done, in_flight
        while self.commit_offset in self._done:
            self._done.discard(self.commit_offset)
            self.commit_offset += 1

    def change_invisible(self, queue_offset: int, now_ms: int, invisible_ms: int) -> bool:
        delivery = self._in_flight.get(queue_offset)
        if delivery is None:
            return False
        delivery.invisible_until_ms = now_ms + invisible_ms
        return True

    def attempt_of(self, queue_offset: int) -> int:
        delivery = self._in_flight.get(queue_offset)
        return delivery.attempt if delivery else 0

    def in_flight(self, now_ms: int) -> int:
        return sum(1 for d in self._in_flight.values() if d.invisible_until_ms > now_ms)

    def to_json(self) -> dict:
        return {
            "commit": self.commit_offset,
            "done": sorted(self._done),
            "flight": {str(o): [d.attempt, d.invisible_until_ms] for o, d in sorted(self._in_flight.items())},
        }

    @classmethod
    def from_json(cls, obj: dict) -> OrderlyQueue:
        queue = cls(int(obj["commit"]))
        queue._done = {int(o) for o in obj.get("done", ())}
        queue._in_flight = {int(o): _Delivery(int(a), int(t)) for o, (a, t) in obj.get("flight", {}).items()}
        return queue

    def __repr__(self) -> str:
        return f"<OrderlyQueue commit={self.commit_offset} in_flight={len(self._in_flight)} done={len(self._done)}>"
