"""The pending table: endings before and after a message is read, the schedule, and the progress a restart reads
from (every op record about a message it finds pending lies after the op progress)."""

import random

from pocketmq.broker.transaction.decision import CheckSettings, Verdict
from pocketmq.broker.transaction.state import PendingHalf, PendingTable, Status

BORN = 1_700_000_000_000
SETTINGS = CheckSettings(timeout_ms=1_000, interval_ms=5_000, check_max=3, file_reserved_ms=10**9)


def half(offset, *, op_from=0, born=BORN, topic="t"):
    return PendingHalf(offset, 1000 + offset, topic, born, born, op_from=op_from)


def test_an_ending_before_the_message_is_read_keeps_it_out():
    table = PendingTable(0, 0, SETTINGS)
    assert table.status(0) == Status.PENDING  # stored, not read yet
    assert table.begin_resolve(0)
    assert table.status(0) == Status.RESOLVING
    assert not table.begin_resolve(0)  # a second ending while the first is written
    table.end_resolve(0, stored=True)
    assert table.status(0) == Status.RESOLVED
    assert not table.add_half(half(0))
    assert table.add_half(half(1))
    assert list(table.pending) == [1] and table.half_until == 2
    assert table.status(0) == Status.RESOLVED and not table.begin_resolve(0)


def test_a_failed_ending_leaves_the_message_pending_and_scheduled():
    table = PendingTable(0, 0, SETTINGS)
    table.add_half(half(0))
    [(taken, decision)] = table.take_due(BORN + 1_000, 10)
    assert decision.verdict is Verdict.CHECK
    assert table.begin_resolve(0)
    table.end_resolve(0, stored=False)
    assert table.status(0) == Status.PENDING
    assert [h.queue_offset for h, _ in table.take_due(BORN + 1_000, 10)] == [0]


def test_resolution_and_check_mark_ops():
    table = PendingTable(0, 0, SETTINGS)
    for offset in range(3):
        table.add_half(half(offset))
    table.apply_resolution([1, 7])  # 7: not read yet
    table.apply_check_mark(0, 2, BORN + 3_000)
    assert list(table.pending) == [0, 2]
    assert (table.pending[0].checks, table.pending[0].last_check_ms) == (2, BORN + 3_000)
    assert table.status(7) == Status.RESOLVED
    for offset in range(3, 8):
        table.add_half(half(offset))
    assert 7 not in table.pending


def test_schedule_checks_each_message_once_per_interval_then_discards():
    table = PendingTable(0, 0, SETTINGS)
    table.add_half(half(0))
    table.add_half(half(1, born=BORN + 500))
    assert table.take_due(BORN + 999, 10) == []
    [(first, _)] = table.take_due(BORN + 1_000, 10)
    assert first.queue_offset == 0
    table.checked(first, BORN + 1_000)
    assert table.take_due(BORN + 1_400, 10) == []
    [(second, _)] = table.take_due(BORN + 1_500, 10)
    table.checked(second, BORN + 1_500)
    now, verdicts = BORN + 1_500, []
    while now < BORN + 30_000:
        now += 500
        for h, decision in table.take_due(now, 10):
            verdicts.append((h.queue_offset, decision.verdict, now - BORN))
            if decision.verdict is Verdict.CHECK:
                table.checked(h, now)
            else:
                assert table.begin_resolve(h.queue_offset)
                table.end_resolve(h.queue_offset, stored=True)
    assert verdicts == [
        (0, Verdict.CHECK, 6_000),
        (1, Verdict.CHECK, 6_500),
        (0, Verdict.CHECK, 11_000),
        (1, Verdict.CHECK, 11_500),
        (0, Verdict.DISCARD, 16_000),
        (1, Verdict.DISCARD, 16_500),
    ]
    assert table.pending == {}


def test_a_message_being_ended_is_not_taken_and_comes_back_if_the_ending_fails():
    table = PendingTable(0, 0, SETTINGS)
    table.add_half(half(0))
    assert table.begin_resolve(0)
    assert table.take_due(BORN + 2_000, 10) == []
    table.end_resolve(0, stored=False)
    assert [h.queue_offset for h, _ in table.take_due(BORN + 2_000, 10)] == [0]


def test_new_settings_reschedule_everything():
    table = PendingTable(0, 0, SETTINGS)
    table.add_half(half(0))
    [(h, _)] = table.take_due(BORN + 1_000, 10)
    table.checked(h, BORN + 1_000)
    assert table.take_due(BORN + 2_000, 10) == []
    table.configure(CheckSettings(timeout_ms=1_000, interval_ms=500, check_max=3, file_reserved_ms=10**9))
    assert [x.queue_offset for x, _ in table.take_due(BORN + 2_000, 10)] == [0]


def test_take_due_is_bounded_by_its_limit():
    table = PendingTable(0, 0, SETTINGS)
    for offset in range(1_000):
        table.add_half(half(offset))
    taken = table.take_due(BORN + 1_000, 256)
    assert [h.queue_offset for h, _ in taken] == list(range(256))
    assert len(table.take_due(BORN + 1_000, 10_000)) == 744


def test_progress_follows_the_oldest_pending_message_and_its_op_floor():
    table = PendingTable(10, 100, SETTINGS)
    assert table.progress() == (10, 100)
    table.begin_half_read(op_end=120)
    table.add_half(half(10, op_from=105))
    table.add_half(half(11, op_from=118))
    table.end_half_read()
    table.op_until = 130
    assert table.progress() == (10, 105)
    table.apply_resolution([10])
    assert table.progress() == (11, 118)
    table.apply_resolution([11])
    assert table.progress() == (12, 120)  # nothing pending: messages not read yet came after op end 120


def test_progress_model_a_restart_from_progress_rebuilds_the_same_pending_set():
    """Random histories of sends (each taking the op queue's end), endings and reads, with restarts from the
    saved progress: the rebuilt pending set is the live one's, and every op is read again when needed."""
    for seed in range(200):
        rng = random.Random(seed)
        half_log: list[int] = []  # op_from of each half message, by half queue offset
        op_log: list[list[int]] = []  # the offsets each op record ends
        live = PendingTable(0, 0, SETTINGS)
        ended: set[int] = set()
        read_half = read_op = 0

        def catch_up(table, half_from, op_from_):
            table.begin_half_read(len(op_log))
            for offset in range(half_from, len(half_log)):
                if table.status(offset) == Status.RESOLVED:
                    table.skip_half(offset)
                else:
                    table.add_half(half(offset, op_from=half_log[offset]))
            table.end_half_read()
            for offsets in op_log[op_from_:]:
                table.apply_resolution(offsets)
            table.op_until = len(op_log)
            return len(half_log), len(op_log)

        for _ in range(60):
            action = rng.random()
            if action < 0.4:
                half_log.append(len(op_log))
            elif action < 0.7 and half_log:
                offset = rng.randrange(len(half_log))
                if offset not in ended and live.begin_resolve(offset):
                    op_log.append([offset])
                    live.end_resolve(offset, stored=True)
                    ended.add(offset)
            elif action < 0.9:
                read_half, read_op = catch_up(live, read_half, read_op)
            else:
                half_from, op_from_ = live.progress()
                rebuilt = PendingTable(half_from, op_from_, SETTINGS)
                catch_up(rebuilt, half_from, op_from_)
                read_half, read_op = catch_up(live, read_half, read_op)
                assert set(rebuilt.pending) == set(live.pending) == set(range(len(half_log))) - ended, seed
