"""Each checker on hand-written histories: it finds what it must, and nothing in a clean history."""

from __future__ import annotations

from pocketmq.testing.chaos import checkers
from pocketmq.testing.chaos.checkers import DeadLetter, MetricSample, StoredMessage

G1, G2 = "g1", "g2"


def send(i, ok=True, t=0.0):
    return {"e": "send", "who": "sdk", "id": i, "ok": ok, "status": "SEND_OK" if ok else "timeout", "t": t}


def deliver(group, i, t0, attempt=1, broker="group-a"):
    return {
        "e": "deliver",
        "group": group,
        "id": i,
        "attempt": attempt,
        "broker": broker,
        "topic": "chaos",
        "t0": t0,
        "t": t0 + 0.01,
    }


def ack(group, i, t, ok=True):
    return {"e": "ack", "group": group, "id": i, "attempt": 1, "ok": ok, "t": t}


def test_a_clean_history_passes_every_checker():
    events = [
        send("s1"),
        send("s2"),
        send("s3", ok=False),
        deliver(G1, "s1", 1),
        ack(G1, "s1", 1.1),
        deliver(G2, "s1", 1),
        ack(G2, "s1", 1.2),
        deliver(G1, "s2", 1),
        deliver(G1, "s2", 4, attempt=2),
        ack(G1, "s2", 4.1),
        deliver(G2, "s3", 2),
        ack(G2, "s3", 2.1),
    ]
    dead = [DeadLetter(G2, "s2", "MAX_ATTEMPTS")]
    assert checkers.lost(events, dead, (G1, G2)) == []
    assert checkers.pop_unended(events, dead, (G1, G2)) == []
    assert checkers.dead_letters_without_reason(dead) == []
    assert checkers.duplicates_after_ack(events) == ([], {})
    assert checkers.corrupt_records_served(events) == []


def test_lost_names_the_group_and_whether_it_was_ever_delivered():
    events = [
        send("s1"),
        send("s2"),
        send("s9"),
        deliver(G1, "s2", 1),
        ack(G1, "s1", 1),
        ack(G2, "s1", 1),
        ack(G2, "s2", 1),
    ]
    [finding] = checkers.lost(events, [DeadLetter(G2, "s9", "MAX_ATTEMPTS")], (G1, G2))
    assert finding.kind == "lost" and finding.detail.startswith("g1: 2 of 3")
    assert "never delivered: s9" in finding.detail and "not ended: s2" in finding.detail
    assert (
        checkers.lost(events, [DeadLetter(G2, "s9", "x"), DeadLetter(G1, "s9", "x")], (G1, G2), excused={G1: {"s2"}})
        == []
    )
    [only_g1] = checkers.lost(events, [DeadLetter(G2, "s9", "x")], (G1, G2), excused={G2: {"s2"}})
    assert only_g1.detail.startswith("g1:")


def test_an_ack_stored_on_the_master_without_a_slave_ends_a_message_but_is_no_ok_ack():
    unconfirmed = {
        **ack(G1, "s1", 1, ok=False),
        "error": "RemoteServerError('SLAVE_NOT_AVAILABLE: stored on the "
        "master, but SLAVE_NOT_AVAILABLE: no slave acknowledged it')",
    }
    refused = {**ack(G1, "s2", 1, ok=False), "error": "RemotingError('connection closed')"}
    events = [
        send("s1"),
        send("s2"),
        deliver(G1, "s1", 0.5),
        deliver(G1, "s2", 0.5),
        unconfirmed,
        refused,
        deliver(G1, "s1", 3, attempt=2),
    ]
    [finding] = checkers.lost(events, [], (G1,))
    assert "1 of 2" in finding.detail and "not ended: s2" in finding.detail
    assert checkers.duplicates_after_ack(events) == ([], {})  # after a failover it may come back


def test_a_dead_letter_of_another_group_does_not_end_a_message():
    events = [send("s1"), ack(G2, "s1", 1)]
    assert [f.kind for f in checkers.lost(events, [DeadLetter(G2, "s1", "MAX_ATTEMPTS")], (G1, G2))] == ["lost"]


def test_unended_deliveries_of_failed_sends_are_found():
    events = [send("s1", ok=False), deliver(G1, "s1", 1)]
    [finding] = checkers.pop_unended(events, [], (G1, G2))
    assert finding.kind == "pop_unended" and "s1" in finding.detail
    assert checkers.pop_unended(events, [], (G1, G2), excused={G1: {"s1"}}) == []  # the harness overwrote it
    # the harness overwrote a CK of G1 after that delivery: the CK may have held it (fault-harness seed 311)
    assert checkers.pop_unended(events, [], (G1, G2), cks_destroyed_at={G1: 2.0}) == []
    assert [f.kind for f in checkers.pop_unended(events, [], (G1, G2), cks_destroyed_at={G1: 0.5})] == ["pop_unended"]


def test_dead_letters_need_a_reason_and_unresolved_references_count_only_as_such():
    findings = checkers.dead_letters_without_reason([DeadLetter(G1, "s1", None), DeadLetter(G1, None, "READ")])
    assert [f.kind for f in findings] == ["dead_letter_without_reason"] and "g1/s1" in findings[0].detail


def test_a_delivery_started_after_an_ok_ack_is_a_duplicate_and_one_started_before_is_not():
    events = [
        ack(G1, "s1", 5.0),
        deliver(G1, "s1", 4.9),  # in flight when the ack returned: not beyond
        deliver(G1, "s1", 5.5, broker="group-b"),
        ack(G1, "s2", 3.0, ok=False),
        deliver(G1, "s2", 4.0),
        ack(G2, "o1-3", 1.0),
        deliver(G2, "o1-3", 2.0),
        deliver(G1, "o1-3", 2.0),
    ]
    findings, counts = checkers.duplicates_after_ack(events)
    assert counts == {"g1/sdk-sent": 1, "g2/official-sent": 1}
    assert "s1@group-b" in findings[0].detail


def test_loops_hold_revive_passes_to_their_interval_per_process():
    paced = [MetricSample(t, "a0", 10, 5 * t, 0) for t in range(60)]  # a pass every 200 ms
    assert checkers.loops(paced, 200, 17) == []
    spinning = [MetricSample(t, "a1", 11, 400.0 * t, 0) for t in range(6)]  # a pass every 2.5 ms
    [finding] = checkers.loops(spinning, 200, 17)
    assert finding.kind == "loop" and "a1 (pid 11): 2000 revive passes in 5.0 s" in finding.detail
    assert [f.kind for f in checkers.loops(spinning, 200, 17, jitter=0.1)] == ["loop"]  # a spin all the same
    restarted = [MetricSample(0, "b0", 12, 300, 0), MetricSample(1, "b0", 13, 0, 0), MetricSample(2, "b0", 13, 3, 0)]
    assert checkers.loops(restarted, 200, 17) == []  # a new process starts its counters at 0
    jittered = [MetricSample(t, "a0", 10, t * 1000 / 185, 0) for t in range(60)]  # each wait shortened 7.5 %
    assert checkers.loops(jittered, 200, 17, jitter=0.1) == []
    [too_often] = checkers.loops(jittered, 200, 17)
    assert "less 0% jitter" in too_often.detail
    [endless] = checkers.loops([MetricSample(0, "b1", 14, 0, 18)], 200, 17)
    assert "rewritten 18 times" in endless.detail


def test_not_serving_and_corrupt_deliveries():
    assert [str(f) for f in checkers.not_serving({"a0": None, "b1": "exited with -7"})] == [
        "not_serving: b1: exited with -7"
    ]
    assert [str(f) for f in checkers.not_replicating({"a1": "at 10 of a0's 20", "b1": "at 0"})] == [
        "not_replicating: a1: at 10 of a0's 20",
        "not_replicating: b1: at 0",
    ]
    events = [
        {"e": "error", "who": "sdk", "op": "receive", "error": "UnicodeDecodeError('utf-8', ...)", "t": 1},
        {"e": "error", "who": "sdk", "op": "receive", "error": "TimeoutError()", "t": 2},
    ]
    [finding] = checkers.corrupt_records_served(events)
    assert finding.kind == "corrupt_record_served" and "1 client errors" in finding.detail


def test_a_duplicate_of_an_ack_the_harness_may_have_destroyed_is_excused_and_counted():
    events = [ack(G1, "s1", 1.0), deliver(G1, "s1", 2.0), ack(G1, "s2", 5.0), deliver(G1, "s2", 6.0)]
    findings, counts = checkers.duplicates_after_ack(events, {G1: 3.0})
    assert counts == {"excused": 1, "g1/sdk-sent": 1}
    assert [f.detail.split(":")[0] for f in findings] == ["g1/sdk-sent"] and "s2" in findings[0].detail


def test_messages_stored_twice_at_one_delivery_level_are_found_per_group():
    stored = [
        # s1: handed out, revived twice, handed out again: one copy per level
        StoredMessage("chaos", "s1", 0),
        StoredMessage("%RETRY%g1_chaos", "s1", 1),
        StoredMessage("%RETRY%g1_chaos", "s1", 2),
        StoredMessage("%RETRY%g2_chaos", "s1", 1),
        # s2: a delay message delivered by its master and again by the acting slave (two broker groups)
        StoredMessage("chaos", "s2", 0),
        StoredMessage("chaos", "s2", 0),
        # s3: one CK revived by a master and again by its acting slave (g1's copies only)
        StoredMessage("chaos", "s3", 0),
        StoredMessage("%RETRY%g1_chaos", "s3", 1),
        StoredMessage("%RETRY%g1_chaos", "s3", 1),
        StoredMessage("%RETRY%g2_chaos", "s3", 1),
        StoredMessage("%DLQ%g2", "s1", 2),  # not a topic the consumers receive from
    ]
    assert checkers.stored_more_than_once(stored, "chaos", (G1, G2)) == {G1: {"s2", "s3"}, G2: {"s2"}}


def test_a_message_stored_twice_coming_back_after_an_ok_ack_is_counted_not_a_finding():
    """The events name a message by its id, not by its copy: an ack ends the copy it was for, and the other copy
    is handed out at least once on its own (here: a delay message that group-a's master delivered just before
    its kill -9 and its acting slave delivered again into group-b)."""
    events = [
        deliver(G1, "s69", 1.0),
        ack(G1, "s69", 1.1),
        deliver(G1, "s69", 2.0, broker="group-b"),  # the other copy
        deliver(G1, "s70", 1.0),
        ack(G1, "s70", 1.1),
        deliver(G1, "s70", 2.0),
    ]
    findings, counts = checkers.duplicates_after_ack(events, stored_twice={G1: {"s69"}, G2: {"s70"}})
    assert counts == {"stored_twice": 1, "g1/sdk-sent": 1}
    assert [f.detail for f in findings] == ["g1/sdk-sent: 1 deliveries after an OK ack: s70@group-a"]


def test_an_ack_requested_before_the_harness_destroyed_acks_is_excused_even_if_answered_after():
    """A delayed link: the broker stored the ACK (then destroyed by the harness at 3.0) before the client got
    its answer (at 3.5); one requested after 3.0 was not among the destroyed ones."""
    events = [
        {**ack(G1, "s1", 3.5), "t0": 2.5},
        deliver(G1, "s1", 4.0),
        {**ack(G1, "s2", 3.6), "t0": 3.1},
        deliver(G1, "s2", 4.0),
    ]
    findings, counts = checkers.duplicates_after_ack(events, {G1: 3.0})
    assert counts == {"excused": 1, "g1/sdk-sent": 1} and "s2" in findings[0].detail


def test_a_message_last_delivered_before_the_harness_destroyed_a_ck_of_its_group_is_excused():
    events = [send("s1"), send("s2"), deliver(G1, "s1", 1), deliver(G1, "s2", 1), deliver(G1, "s2", 6, attempt=2)]
    [finding] = checkers.lost(events, [], (G1,), cks_destroyed_at={G1: 5.0})  # s1's CK may be the one destroyed
    assert "1 of 2" in finding.detail and "not ended: s2" in finding.detail  # s2 was popped again after it
    assert len(checkers.lost(events, [], (G1,), cks_destroyed_at={G2: 5.0})) == 1  # another group's CK: no excuse


def test_an_ack_that_failed_without_the_brokers_answer_may_have_ended_the_message():
    """The broker stored the ACK and was killed before its reply: the client saw the connection close."""
    events = [
        send("s81"),
        send("s82"),
        deliver(G1, "s81", 1),
        {**ack(G1, "s81", 1.2, ok=False), "error": "RemotingError('connection closed')", "no_answer": True},
        deliver(G1, "s82", 1),
        {**ack(G1, "s82", 1.2, ok=False), "error": "RemoteServerError('SYSTEM_ERROR: disk full')"},
    ]
    [finding] = checkers.lost(events, [], (G1,))
    assert "1 of 2" in finding.detail and "not ended: s82" in finding.detail
    failed_sends = [{**e, "ok": False} if e["e"] == "send" else e for e in events]
    [unended] = checkers.pop_unended(failed_sends, [], (G1,))
    assert unended.detail == "g1: 1 delivered messages never acked nor dead-lettered: s82"


def test_an_ack_sent_by_a_client_that_died_before_its_answer_may_have_ended_the_message():
    sent = {"e": "ack_sent", "group": G1, "id": "s1", "attempt": 1, "t0": 1.1, "t": 1.1}
    events = [
        send("s1"),
        send("s2"),
        deliver(G1, "s1", 1),
        sent,
        deliver(G1, "s2", 1),
        {**sent, "id": "s2"},
        ack(G1, "s2", 1.2, ok=False),
    ]  # s2's answer came: a refused ack, no doubt
    [finding] = checkers.lost(events, [], (G1,))
    assert "1 of 2" in finding.detail and "not ended: s2" in finding.detail
