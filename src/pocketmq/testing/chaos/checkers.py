"""The verdict of a chaos run: pure functions over what the clients saw (history.py), the dead letters read
back at the end, metric samples taken during the run and the health of each process.

- ``lost``: a send that returned OK whose message a group never acked and never dead-lettered (an ack a SYNC
  master stored without a slave's confirmation counts as acked: the message ended there; an ack that got no
  answer may have been stored, so its message not coming back is no loss);
- ``pop_unended``: a delivered message (of any send) neither acked (or its ack in doubt) nor dead-lettered by its
  group;
- ``dead_letter_without_reason``: a DLQ entry without ``PMQ_DLQ_REASON``;
- ``duplicate_after_ack``: a delivery whose receive began after an ack of the same message by the same group
  returned OK (beyond at-least-once: counted per group and sender), unless the cluster stored that message more
  than once (``stored_more_than_once``: each copy is delivered at least once, an ack ends only its own);
- ``loop``: a broker whose failed revive writes were retried faster than the backoff table allows, or a CK
  rewritten more often than the table has steps;
- ``not_serving``: a process that should be up and does not answer;
- ``not_replicating``: a slave whose log did not reach where its master's ended (once traffic stopped) within
  a deadline: a group left without a replica (a slave refused as diverged, say) loses no message yet, but the
  next failure of its master would;
- ``corrupt_record_served``: a client failed to decode what a broker delivered.

Messages in records the harness itself overwrote (the corrupt-tail fault: the message, or a group's retry copy of
it) are excused from ``lost`` for the groups they were for.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from pocketmq.common.topic import pop_retry_topic

MAX_IDS_SHOWN = 10
CORRUPT_SIGNS = ("UnicodeDecodeError", "RecordFormatError", "corrupt", "checksum")
# An ack a SYNC master stored without a slave's ack answers these statuses (remoting codes 11 / 12; on gRPC
# HA_NOT_AVAILABLE / SLAVE_PERSISTENCE_TIMEOUT, whose message names them too): it ended the message on the master,
# but it is not an OK ack (a delivery after it is no duplicate).
UNCONFIRMED_ACK_SIGNS = ("SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT")
# The counts of ``duplicates_after_ack`` that are no finding: after an ACK the harness destroyed, of a message
# stored more than once.
EXCUSED_DUPLICATES = ("excused", "stored_twice")


@dataclass(frozen=True)
class Finding:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass(frozen=True)
class DeadLetter:
    group: str
    msg_id: str | None  # None: a reference whose message could not be read back
    reason: str | None
    broker: str = ""


@dataclass(frozen=True)
class StoredMessage:
    """A message the cluster holds at the end of a run, read back from a topic of one broker group."""

    topic: str  # the business topic or a group's pop retry topic
    msg_id: str
    reconsume_times: int  # 0 for a message as sent, k for the retry copy made after its k-th delivery


@dataclass(frozen=True)
class MetricSample:
    t: float
    broker: str
    pid: int
    revive_passes: float  # revive passes so far that closed nothing (idle, blocked): each waits the pass interval
    max_rewrite_attempt: int


def _ids(ids) -> str:
    shown = sorted(ids, key=lambda i: (len(i), i))[:MAX_IDS_SHOWN]
    return ", ".join(shown) + (" ..." if len(ids) > MAX_IDS_SHOWN else "")


def _acked(events: list[dict], group: str) -> set[str]:
    """Messages a group acked: OK, or stored on a SYNC master that no slave confirmed (it holds there; a failover
    may bring the message back, at least once)."""
    return {
        e["id"]
        for e in events
        if e["e"] == "ack"
        and e["group"] == group
        and (e["ok"] or any(sign in e.get("error", "") for sign in UNCONFIRMED_ACK_SIGNS))
    }


def _ack_in_doubt(events: list[dict], group: str) -> set[str]:
    """Messages whose ack got no answer: sent by a client that died before it heard one (an ``ack_sent``
    without its ``ack``), or failed without the broker's answer (``no_answer``: the connection closed as the
    broker was killed, a timeout). The broker may have stored it, so such a message not coming back is no loss."""
    sent = {(e["id"], e["attempt"]) for e in events if e["e"] == "ack_sent" and e["group"] == group}
    answered = {(e["id"], e["attempt"]) for e in events if e["e"] == "ack" and e["group"] == group}
    no_answer = {e["id"] for e in events if e["e"] == "ack" and e["group"] == group and e.get("no_answer")}
    return {msg_id for msg_id, _ in sent - answered} | no_answer


def _dead(dead_letters: list[DeadLetter], group: str) -> set[str]:
    return {d.msg_id for d in dead_letters if d.group == group and d.msg_id is not None}


def ended(events: list[dict], dead_letters: list[DeadLetter], group: str) -> set[str]:
    """Messages a group ended: acked (also without a slave's confirmation), acked in doubt, or dead-lettered."""
    return _acked(events, group) | _ack_in_doubt(events, group) | _dead(dead_letters, group)


def lost(
    events: list[dict],
    dead_letters: list[DeadLetter],
    groups: tuple[str, ...],
    excused: dict[str, set[str]] | None = None,
    cks_destroyed_at: dict[str, float] | None = None,
) -> list[Finding]:
    """``excused``: group -> ids whose records the harness overwrote (the message, or that group's retry copy).
    ``cks_destroyed_at``: group -> when the harness overwrote one of its CK records; a message of that group last
    delivered before then and never ended may have been held by that CK (nothing is left to revive it), so it is
    excused too, coarsely by time as duplicates are after a destroyed ACK."""
    excused = excused or {}
    cks_destroyed_at = cks_destroyed_at or {}
    all_sent_ok = {e["id"] for e in events if e["e"] == "send" and e["ok"]}
    delivered = defaultdict(set)
    for e in events:
        if e["e"] == "deliver":
            delivered[e["group"]].add(e["id"])
    findings = []
    for group in groups:
        sent_ok = all_sent_ok - excused.get(group, set())
        missing = _not_held_by_a_destroyed_ck(
            sent_ok - ended(events, dead_letters, group), events, group, cks_destroyed_at.get(group)
        )
        if missing:
            never = missing - delivered[group]
            findings.append(
                Finding(
                    "lost",
                    f"{group}: {len(missing)} of {len(sent_ok)} messages sent OK never acked "
                    f"nor dead-lettered ({len(never)} never delivered: {_ids(never)}; delivered but "
                    f"not ended: {_ids(missing - never)})",
                )
            )
    return findings


def _not_held_by_a_destroyed_ck(ids: set[str], events: list[dict], group: str, ck_destroyed_at: float | None):
    """``ids`` less those ``group`` last received before the harness overwrote one of its CK records (at
    ``ck_destroyed_at``): that CK may have held them, and nothing is left to revive them."""
    if ck_destroyed_at is None:
        return ids
    last_delivery: dict[str, float] = {}
    for e in events:
        if e["e"] == "deliver" and e["group"] == group:
            last_delivery[e["id"]] = max(last_delivery.get(e["id"], 0.0), e.get("t0", e["t"]))
    return {i for i in ids if last_delivery.get(i, float("inf")) >= ck_destroyed_at}


def pop_unended(
    events: list[dict],
    dead_letters: list[DeadLetter],
    groups: tuple[str, ...],
    excused: dict[str, set[str]] | None = None,
    cks_destroyed_at: dict[str, float] | None = None,
) -> list[Finding]:
    """Deliveries of messages whose send did not return OK (those are covered by ``lost``) that never ended;
    ``excused`` and ``cks_destroyed_at`` as for ``lost`` (a message whose records the harness overwrote cannot
    end)."""
    excused = excused or {}
    cks_destroyed_at = cks_destroyed_at or {}
    sent_ok = {e["id"] for e in events if e["e"] == "send" and e["ok"]}
    findings = []
    for group in groups:
        delivered = {e["id"] for e in events if e["e"] == "deliver" and e["group"] == group}
        open_ids = _not_held_by_a_destroyed_ck(
            delivered - sent_ok - ended(events, dead_letters, group) - excused.get(group, set()),
            events,
            group,
            cks_destroyed_at.get(group),
        )
        if open_ids:
            findings.append(
                Finding(
                    "pop_unended",
                    f"{group}: {len(open_ids)} delivered messages never acked nor dead-lettered: {_ids(open_ids)}",
                )
            )
    return findings


def dead_letters_without_reason(dead_letters: list[DeadLetter]) -> list[Finding]:
    bad = [d for d in dead_letters if not d.reason]
    if not bad:
        return []
    return [
        Finding(
            "dead_letter_without_reason",
            f"{len(bad)} DLQ entries without PMQ_DLQ_REASON: {_ids([f'{d.group}/{d.msg_id}' for d in bad])}",
        )
    ]


def stored_more_than_once(
    stored: list[StoredMessage], business_topic: str, groups: tuple[str, ...]
) -> dict[str, set[str]]:
    """group -> ids the cluster holds more than one copy of at one delivery level: two messages as sent (in the
    business topic of any broker group), or two retry copies with the same reconsume times (in the group's pop
    retry topic). One message handed out, revived and handed out again makes one copy per level; a second copy
    at a level is a second message of the same id, which the broker hands out at least once on its own. Each
    comes from a documented at-least-once path: a send the official client retried after the broker had stored
    it (a SYNC master without its slave answers HA_NOT_AVAILABLE), a delay message whose master delivered it and
    died before its slave had the delivery (the acting slave delivers it again), a CK revived on a master and
    again by its acting slave, or popped again after a ``kill -9`` (docs/ha.md, docs/pop.md)."""
    found: dict[str, set[str]] = {}
    for group in groups:
        topics = (business_topic, pop_retry_topic(group, business_topic))
        levels = Counter((m.msg_id, m.topic == business_topic, m.reconsume_times) for m in stored if m.topic in topics)
        found[group] = {msg_id for (msg_id, _, _), n in levels.items() if n > 1}
    return found


def duplicates_after_ack(
    events: list[dict],
    acks_destroyed_at: dict[str, float] | None = None,
    stored_twice: dict[str, set[str]] | None = None,
) -> tuple[list[Finding], dict[str, int]]:
    """Deliveries that began after an OK ack of the same message by the same group; counts per group/sender
    (``s`` ids come from the SDK producer without client retries, ``o`` ids from the official client).
    ``acks_destroyed_at``: group -> when the harness last overwrote one of its ACK records; an ack requested
    before that may have been the one destroyed (its answer may come after: a delayed link), so its message
    coming back is counted under ``excused`` instead (at least once). ``stored_twice``: group -> ids stored more
    than once (``stored_more_than_once``); the events name the message, not the copy, and an ack ends only the
    copy it was for, so such a message coming back is counted under ``stored_twice`` instead."""
    acks_destroyed_at = acks_destroyed_at or {}
    stored_twice = stored_twice or {}
    first_ack: dict[tuple[str, str], tuple[float, float]] = {}  # -> (answered, requested) of the first OK ack
    for e in events:
        if e["e"] == "ack" and e["ok"]:
            key = (e["group"], e["id"])
            first_ack[key] = min(first_ack.get(key, (e["t"], e.get("t0", e["t"]))), (e["t"], e.get("t0", e["t"])))
    dups: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if e["e"] == "deliver":
            first = first_ack.get((e["group"], e["id"]))
            if first is not None and e["t0"] > first[0]:
                ack_requested_at = first[1]
                if ack_requested_at < acks_destroyed_at.get(e["group"], float("-inf")):
                    dups["excused"].append(e["id"])
                    continue
                if e["id"] in stored_twice.get(e["group"], ()):
                    dups["stored_twice"].append(e["id"])
                    continue
                dups[f"{e['group']}/{'sdk' if e['id'].startswith('s') else 'official'}-sent"].append(
                    f"{e['id']}@{e.get('broker', '')}"
                )
    counts = {key: len(v) for key, v in sorted(dups.items())}
    findings = [
        Finding("duplicate_after_ack", f"{key}: {len(v)} deliveries after an OK ack: {_ids(v)}")
        for key, v in sorted(dups.items())
        if key not in EXCUSED_DUPLICATES
    ]
    return findings, counts


def loops(samples: list[MetricSample], pass_interval_ms: int, max_rewrites: int, jitter: float = 0.0) -> list[Finding]:
    """Revive runs a pass that closes nothing at most once a pass interval (less up to ``jitter`` of it: a
    periodic task spreads its rounds), longer after one whose writes all failed, and a CK whose write failed
    waits its backoff step (tested in virtual time in the unit tests); it wakes in between only for a CK that
    is due and open, and closes it. So a process whose passes that closed nothing (``revive_passes``) grew
    beyond ``2 + life / shortest wait`` over its sampled life runs them without waiting (a spin: thousands a
    second). A CK rewrite attempt above the backoff table's length is an endless rewrite."""
    shortest_wait_ms = pass_interval_ms * (1 - jitter)
    findings = []
    by_process: dict[tuple[str, int], list[MetricSample]] = defaultdict(list)
    for sample in sorted(samples, key=lambda s: s.t):
        by_process[(sample.broker, sample.pid)].append(sample)
    for (broker, pid), series in sorted(by_process.items()):
        life_s = series[-1].t - series[0].t
        grown = series[-1].revive_passes - series[0].revive_passes
        allowed = 2 + life_s * 1000 / shortest_wait_ms
        if grown > allowed:
            findings.append(
                Finding(
                    "loop",
                    f"{broker} (pid {pid}): {grown:g} revive passes in {life_s:.1f} s "
                    f"(a pass interval of {pass_interval_ms} ms, less {jitter:.0%} jitter, allows {allowed:.0f})",
                )
            )
        worst = max(s.max_rewrite_attempt for s in series)
        if worst > max_rewrites:
            findings.append(
                Finding(
                    "loop",
                    f"{broker} (pid {pid}): a CK rewritten {worst} times, the backoff table has {max_rewrites} steps",
                )
            )
    return findings


def not_serving(health: dict[str, str | None]) -> list[Finding]:
    return [Finding("not_serving", f"{name}: {why}") for name, why in sorted(health.items()) if why]


def not_replicating(behind: dict[str, str]) -> list[Finding]:
    return [Finding("not_replicating", f"{slave}: {why}") for slave, why in sorted(behind.items())]


def corrupt_records_served(events: list[dict]) -> list[Finding]:
    bad = [e for e in events if e["e"] == "error" and any(sign in e.get("error", "") for sign in CORRUPT_SIGNS)]
    if not bad:
        return []
    return [
        Finding(
            "corrupt_record_served",
            f"{len(bad)} client errors decoding deliveries, first: "
            f"{bad[0]['who']} {bad[0]['op']}: {bad[0]['error'][:200]}",
        )
    ]
