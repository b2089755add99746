"""Election and fencing decisions (cluster/election.py), on a manual clock: no etcd."""

from __future__ import annotations

import random

import pytest

from pocketmq.cluster.controller import RETRY_PAUSE_MS
from pocketmq.cluster.election import (
    Action,
    Candidate,
    GroupState,
    LeaseTimer,
    LocalState,
    Role,
    accepts_replicated,
    accepts_writes,
    best_candidate,
    decide,
    eligible,
)
from pocketmq.runtime.clock import ManualClock

pytestmark = pytest.mark.timeout(30)


def fresh(broker_id: int) -> LocalState:
    return LocalState(broker_id, Role.NONE, 0, holds_lease=False)


def test_a_new_group_lets_every_broker_campaign_and_the_longest_log_goes_first():
    state = GroupState(epoch=0, holder_id=None, in_sync_ids=frozenset())
    candidates = [Candidate(0, 100), Candidate(1, 300), Candidate(2, 300)]
    assert decide(fresh(1), state, candidates).action is Action.CAMPAIGN
    assert decide(fresh(1), state, candidates).epoch == 1
    assert decide(fresh(0), state, candidates).action is Action.WAIT
    assert decide(fresh(2), state, candidates).action is Action.WAIT  # same log, higher id


def test_only_the_in_sync_set_of_the_last_epoch_may_take_the_lease():
    state = GroupState(epoch=4, holder_id=None, in_sync_ids=frozenset({0, 2}))
    # broker 1 has the longest log but fell out of sync: it may have missed acknowledged records
    candidates = [Candidate(1, 900), Candidate(2, 500)]
    assert not eligible(1, state)
    assert decide(fresh(1), state, candidates).action is Action.WAIT
    assert "in-sync set" in decide(fresh(1), state, candidates).reason
    won = decide(fresh(2), state, candidates)
    assert (won.action, won.epoch) == (Action.CAMPAIGN, 5)
    assert best_candidate(state, candidates) == 2


def test_nobody_campaigns_when_no_in_sync_broker_is_up():
    state = GroupState(epoch=3, holder_id=None, in_sync_ids=frozenset({0}))
    assert best_candidate(state, [Candidate(1, 10), Candidate(2, 10)]) is None
    assert decide(fresh(1), state, [Candidate(1, 10)]).action is Action.WAIT


def test_the_lease_holder_becomes_master_of_the_epoch_and_the_others_follow():
    state = GroupState(epoch=7, holder_id=2, in_sync_ids=frozenset({0, 1, 2}))
    became = decide(LocalState(2, Role.SLAVE, 6, holds_lease=False), state, [])
    assert (became.action, became.epoch, became.master_id) == (Action.BECOME_MASTER, 7, 2)
    follow = decide(LocalState(1, Role.SLAVE, 6, holds_lease=False), state, [])
    assert (follow.action, follow.epoch, follow.master_id) == (Action.FOLLOW, 7, 2)
    same = decide(LocalState(1, Role.SLAVE, 7, holds_lease=False), state, [])
    assert same.action is Action.STAY


def test_an_old_master_that_comes_back_follows_the_newer_epoch():
    state = GroupState(epoch=8, holder_id=1, in_sync_ids=frozenset({1}))
    decision = decide(fresh(0), state, [Candidate(0, 10_000)])
    assert (decision.action, decision.master_id, decision.epoch) == (Action.FOLLOW, 1, 8)


@pytest.mark.parametrize(
    ("local", "state", "why"),
    [
        (LocalState(0, Role.MASTER, 5, holds_lease=False), GroupState(5, 0, frozenset({0})), "lease not renewed"),
        (LocalState(0, Role.MASTER, 5, holds_lease=True), GroupState(6, 1, frozenset({1})), "newer epoch 6"),
        (LocalState(0, Role.MASTER, 5, holds_lease=True), GroupState(5, None, frozenset({0})), "lease is gone"),
    ],
)
def test_a_master_steps_down(local, state, why):
    decision = decide(local, state, [])
    assert decision.action is Action.STEP_DOWN
    assert why in decision.reason


def test_a_master_with_its_lease_stays():
    local = LocalState(0, Role.MASTER, 5, holds_lease=True)
    assert decide(local, GroupState(5, 0, frozenset({0, 1})), []).action is Action.STAY


def test_fencing_refuses_writes_of_a_stale_epoch():
    master = LocalState(0, Role.MASTER, 5, holds_lease=True)
    assert accepts_writes(master, newest_epoch_seen=5)
    assert not accepts_writes(master, newest_epoch_seen=6)
    assert not accepts_writes(LocalState(0, Role.MASTER, 5, holds_lease=False), newest_epoch_seen=5)
    assert not accepts_writes(LocalState(1, Role.SLAVE, 5, holds_lease=False), newest_epoch_seen=5)
    assert accepts_replicated(master_epoch=6, newest_epoch_seen=6)
    assert not accepts_replicated(master_epoch=5, newest_epoch_seen=6)


def test_the_lease_timer_counts_from_when_the_keepalive_was_sent():
    clock = ManualClock()
    timer = LeaseTimer(clock, ttl_ms=2_000, margin_ms=300)
    assert not timer.holds()
    sent_ms = timer.sent()
    clock.advance(400)  # the answer took 400 ms: the lease still counts from the send
    timer.renewed(sent_ms)
    clock.advance(1_299)
    assert timer.holds()
    clock.advance(1)
    assert not timer.holds()
    assert timer.remaining_ms() == 0.0


def test_a_late_answer_to_an_older_keepalive_does_not_shorten_the_lease():
    clock = ManualClock()
    timer = LeaseTimer(clock, ttl_ms=2_000, margin_ms=300)
    first = timer.sent()
    clock.advance(600)
    second = timer.sent()
    timer.renewed(second)
    timer.renewed(first)
    clock.advance(1_650)
    assert timer.holds()
    timer.lost()
    assert not timer.holds()


def test_the_margin_must_be_below_the_ttl():
    with pytest.raises(ValueError, match="below the TTL"):
        LeaseTimer(ManualClock(), ttl_ms=1_000, margin_ms=1_000)


@pytest.mark.parametrize("seed", range(20))
def test_a_partitioned_master_stops_writing_before_anyone_else_can_be_elected(seed):
    """A model of etcd's lease (expires ``ttl`` after the last keep-alive *arrived*) and of a master that renews
    every third of the TTL with random delays, until a partition drops its keep-alives. At every virtual ms:
    while the master would still accept writes, etcd has not expired the lease (so nobody else holds it)."""
    rng = random.Random(seed)
    clock = ManualClock()
    ttl_ms = 2_000
    timer = LeaseTimer(clock, ttl_ms=ttl_ms, margin_ms=300)
    partition_at_ms = rng.randint(1_000, 10_000)
    etcd_expires_ms: float | None = None
    answers: list[tuple[float, float]] = []  # (answer arrives at, sent at)
    next_keepalive_ms = 0.0
    now_ms = 0.0
    while now_ms < partition_at_ms + 2 * ttl_ms:
        if now_ms >= next_keepalive_ms:
            next_keepalive_ms = now_ms + timer.keepalive_interval_ms
            sent_ms = timer.sent()
            if now_ms < partition_at_ms:
                arrives_ms = now_ms + rng.uniform(0, 200)  # reaches etcd
                etcd_expires_ms = arrives_ms + ttl_ms
                answers.append((arrives_ms + rng.uniform(0, 200), sent_ms))
        for answer in [a for a in answers if a[0] <= now_ms]:
            answers.remove(answer)
            timer.renewed(answer[1])
        master = LocalState(0, Role.MASTER, 1, holds_lease=timer.holds())
        if accepts_writes(master, newest_epoch_seen=1):
            assert etcd_expires_ms is not None and now_ms < etcd_expires_ms, f"two writers at {now_ms} ms"
        clock.advance(1)
        now_ms += 1
    assert not timer.holds()  # and it did step down
    assert etcd_expires_ms is not None and etcd_expires_ms > partition_at_ms


class EndpointsModel:
    """The controller's keep-alive loop over several etcd endpoints (``cluster/controller.py``), in virtual ms:
    renew every ``keepalive_interval_ms``; a keep-alive not answered within ``keepalive_timeout_ms`` is sent to
    the next endpoint after ``RETRY_PAUSE_MS``. Each leg of a round trip takes up to ``leg_ms``. etcd's lease
    expires ``ttl`` after the last keep-alive that *arrived*, answered in time or not."""

    def __init__(self, rng: random.Random, timer: LeaseTimer, endpoints: int, leg_ms: float):
        self.rng, self.timer, self.leg_ms = rng, timer, leg_ms
        self.alive = [True] * endpoints
        self.current = 0
        self.next_send_ms = 0.0
        self.waiting: tuple[float, float | None, float] | None = None  # (sent at, answer at, give up at)
        self.etcd_expires_ms: float | None = None

    def tick(self, now_ms: float) -> None:
        if self.waiting is None and now_ms >= self.next_send_ms:
            sent_ms, answer_ms = self.timer.sent(), None
            if self.alive[self.current]:
                arrives_ms = now_ms + self.rng.uniform(0, self.leg_ms)
                self.etcd_expires_ms = arrives_ms + self.timer.ttl_ms
                answer_ms = arrives_ms + self.rng.uniform(0, self.leg_ms)
            self.waiting = (sent_ms, answer_ms, now_ms + self.timer.keepalive_timeout_ms)
        if self.waiting is not None:
            sent_ms, answer_ms, give_up_ms = self.waiting
            if answer_ms is not None and answer_ms <= min(now_ms, give_up_ms):
                self.timer.renewed(sent_ms)
                self.waiting, self.next_send_ms = None, now_ms + self.timer.keepalive_interval_ms
            elif now_ms >= give_up_ms:
                self.current = (self.current + 1) % len(self.alive)
                self.waiting, self.next_send_ms = None, now_ms + RETRY_PAUSE_MS


@pytest.mark.parametrize("seed", range(20))
def test_one_silent_etcd_member_does_not_end_a_tenure_and_a_partition_still_does_in_time(seed):
    """Three endpoints, round trips up to 300 ms. One member goes silent at a random moment, maybe the one the
    master talks to: the master renews through the next one without ever losing its lease. Later every member
    goes silent (the master is cut off): it stops writing before etcd lets the lease lapse, and does stop."""
    rng = random.Random(seed)
    clock = ManualClock()
    timer = LeaseTimer(clock, ttl_ms=2_000, margin_ms=300)
    model = EndpointsModel(rng, timer, endpoints=3, leg_ms=150)
    silent_at_ms = rng.randint(1_000, 5_000)
    partition_at_ms = silent_at_ms + rng.randint(3_000, 6_000)
    silent_member = rng.randrange(3)
    now_ms = 0.0
    while now_ms < partition_at_ms + 2 * timer.ttl_ms:
        if now_ms == silent_at_ms:
            model.alive[silent_member] = False
        if now_ms == partition_at_ms:
            model.alive = [False] * 3
        model.tick(now_ms)
        if 1_000 <= now_ms < partition_at_ms:
            assert timer.holds(), f"lease lost at {now_ms} ms with only member {silent_member} silent"
        if accepts_writes(LocalState(0, Role.MASTER, 1, holds_lease=timer.holds()), newest_epoch_seen=1):
            assert model.etcd_expires_ms is not None and now_ms < model.etcd_expires_ms, f"two writers at {now_ms}"
        clock.advance(1)
        now_ms += 1
    assert not timer.holds()
