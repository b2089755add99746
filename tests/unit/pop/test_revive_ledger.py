"""The revive ledger against a simple model, with restarts that re-read the revive log from the commit offset."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.pop.checkpoint import AckRecord, PopCheckpoint
from pocketmq.broker.pop.ledger import ReviveLedger

INVISIBLE_MS = 100


class Harness:
    """A revive log (list of records), the ledger reading it, and the model: un-acked popped messages."""

    def __init__(self):
        self.log: list[PopCheckpoint | AckRecord] = []
        self.ledger = ReviveLedger()
        self.now_ms = 1_000
        self.next_queue_offset = 0
        self.outstanding: dict[tuple[str, int], int] = {}  # (ck key, queue offset) -> revive time
        self.revived: list[int] = []
        self.acked: set[int] = set()

    def append(self, record) -> None:
        self.log.append(record)
        self.catch_up()

    def catch_up(self) -> None:
        for offset in range(self.ledger.next_offset, len(self.log)):
            record = self.log[offset]
            if isinstance(record, PopCheckpoint):
                self.ledger.on_checkpoint(record, offset)
            else:
                self.ledger.on_ack(record, offset)

    def pop(self, count: int) -> None:
        offsets = list(range(self.next_queue_offset, self.next_queue_offset + count))
        self.next_queue_offset += count
        ck = PopCheckpoint.of_offsets("T", "G", 0, offsets, self.now_ms, INVISIBLE_MS, "b")
        self.append(ck)
        for o in offsets:
            self.outstanding[(ck.key, o)] = ck.revive_time_ms

    def ack(self, pick: int) -> None:
        if not self.outstanding:
            return
        key, offset = sorted(self.outstanding)[pick % len(self.outstanding)]
        ck = next(r for r in self.log if isinstance(r, PopCheckpoint) and r.key == key)
        self.append(AckRecord("T", "G", 0, ck.start_offset, ck.pop_time_ms, "b", (offset,)))
        del self.outstanding[(key, offset)]
        self.acked.add(offset)

    def revive(self) -> None:
        for ck in self.ledger.due(self.now_ms):
            unacked = ck.unacked_offsets()
            self.revived.extend(unacked)
            # revive closes a CK durably by acking what it handed back
            self.append(
                AckRecord(
                    ck.topic, ck.group, ck.queue_id, ck.start_offset, ck.pop_time_ms, ck.broker_name, tuple(unacked)
                )
            )
            for o in unacked:
                del self.outstanding[(ck.key, o)]

    def restart(self) -> None:
        self.ledger = ReviveLedger(self.ledger.commit_offset())
        self.catch_up()

    def check(self) -> None:
        open_messages = {(ck.key, o) for ck in self.ledger.due(10**18) for o in ck.unacked_offsets()}
        assert open_messages == set(self.outstanding)
        assert not self.acked & set(self.revived), "an acked message was revived"
        assert len(self.revived) == len(set(self.revived)), "a message was revived twice"


steps = st.lists(
    st.one_of(
        st.tuples(st.just("pop"), st.integers(1, 32)),
        st.tuples(st.just("ack"), st.integers(0, 1000)),
        st.tuples(st.just("tick"), st.integers(1, 150)),
        st.tuples(st.just("revive"), st.just(0)),
        st.tuples(st.just("restart"), st.just(0)),
    ),
    max_size=60,
)


@given(steps)
def test_ledger_matches_the_model_across_restarts(ops):
    h = Harness()
    for op, arg in ops:
        if op == "pop":
            h.pop(arg)
        elif op == "ack":
            h.ack(arg)
        elif op == "tick":
            h.now_ms += arg
        elif op == "revive":
            h.revive()
        else:
            h.restart()
        h.check()
    h.now_ms += INVISIBLE_MS
    h.revive()
    assert not h.outstanding and len(h.ledger) == 0
    assert set(h.revived) | h.acked == set(range(h.next_queue_offset))


def test_commit_offset_stays_at_the_oldest_open_ck():
    ledger = ReviveLedger()
    a = PopCheckpoint.of_offsets("T", "G", 0, [0, 1], 0, 10, "b")
    b = PopCheckpoint.of_offsets("T", "G", 0, [2], 1, 10, "b")
    ledger.on_checkpoint(a, 0)
    ledger.on_checkpoint(b, 1)
    ledger.on_ack(AckRecord("T", "G", 0, 2, 1, "b", (2,)), 2)
    assert ledger.commit_offset() == 0 and len(ledger) == 1
    ledger.on_ack(AckRecord("T", "G", 0, 0, 0, "b", (0, 1)), 3)
    assert ledger.commit_offset() == 4 and len(ledger) == 0
    ledger.on_ack(AckRecord("T", "G", 0, 9, 9, "b", (9,)), 4)
    assert ledger.orphan_acks == 1
    assert "open=0" in repr(ledger)


def test_pop_state_counts_in_flight_and_waiting():
    ledger = ReviveLedger()
    ledger.on_checkpoint(PopCheckpoint.of_offsets("T", "G", 3, [0, 1, 2], 0, 10, "b"), 0)
    ledger.on_checkpoint(PopCheckpoint.of_offsets("T", "G", 3, [3], 50, 10, "b"), 1)
    state = ledger.pop_state(now_ms=20)[("G", "T", 3)]
    assert (state.in_flight, state.waiting_to_revive) == (1, 3)
