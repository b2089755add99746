"""Checkers: each reads the trace of a run (``History``) and the disks left at its end, never the nodes'
state, and returns what it found wrong. They are the properties of issue 7:

- ``check_sync_sends``: no acknowledged SYNC send lost. A SEND_OK means the message was durable on the
  master *and* on a slave when the answer went out (so losing any one disk cannot lose it), and at the end it
  is in the log of the broker its group's readers use, at the queue offset the send answered.
- ``check_pop_outcomes``: every message sent OK is in the end acked or dead-lettered with a reason (a message
  redelivered is judged by its later deliveries; one whose pop answer was lost may be dead-lettered without
  ever reaching a consumer); a dead letter for MAX_ATTEMPTS carries exactly ``retry_max_times`` reconsumes.
  Nothing is dropped or gone.
- ``check_rewrite_bound``: no CK is rewritten more often than the backoff table allows before its ending.
- ``check_breaker_bound``: while a reader's breaker for a group is open it sends that group nothing; half-open,
  one probe (at most one read per broker of the group) per virtual second.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from pocketmq.broker.pop import copies
from pocketmq.testing.sim.config import TOPIC, SimConfig

BROKERS_PER_GROUP = 2


@dataclass(frozen=True, slots=True)
class Violation:
    checker: str
    detail: str

    def __str__(self) -> str:
        return f"{self.checker}: {self.detail}"


def check_sync_sends(
    history, final_logs: dict[str, dict], final_readers: dict[str, str], config: SimConfig
) -> list[Violation]:
    durable: dict[str, dict[str, int]] = defaultdict(dict)  # origin -> broker -> first time durable
    found = []
    for t, kind, f in history.events:
        if kind == "durable":
            durable[f["origin"]].setdefault(f["broker"], t)
        elif kind == "send_ok":
            brokers = {b for b, at in durable[f["origin"]].items() if at <= t and b.startswith(f["group"] + "-")}
            master = f"{f['group']}-0"
            if master not in brokers or len(brokers) < 2:
                found.append(
                    Violation(
                        "sync_sends",
                        f"{f['origin']} answered SEND_OK at {t} ms while durable only "
                        f"on {sorted(brokers) or 'no broker'}",
                    )
                )
            reader = final_readers.get(f["group"])
            at = (TOPIC, f["queue_id"], f["queue_offset"])
            held = final_logs[reader].get(at) if reader is not None else None
            if held != f["origin"]:
                found.append(
                    Violation(
                        "sync_sends",
                        f"{f['origin']} (SEND_OK, {f['group']} queue {f['queue_id']} "
                        f"offset {f['queue_offset']}) is not what {reader} holds there "
                        f"at the end: {held}",
                    )
                )
    return found


def check_pop_outcomes(history, config: SimConfig) -> list[Violation]:
    sent_ok: set[str] = set()
    delivered: set[str] = set()
    acked: set[str] = set()
    dead: set[str] = set()
    # Which message sits at a (group, topic, queue, offset): what the producer was told for a send, what the
    # store took for a retry copy. A dead-letter reference names only the location (its read failed), and a
    # message can be dead-lettered without ever reaching a consumer (its pop's answer was lost).
    by_location: dict[tuple, str] = {}
    found = []
    for t, kind, f in history.events:
        if kind == "send_ok":
            sent_ok.add(f["origin"])
            by_location[(f["group"], TOPIC, f["queue_id"], f["queue_offset"])] = f["origin"]
        elif kind == "copy_stored":
            by_location[f["location"]] = f["origin"]
        elif kind == "delivered":
            delivered.add(f["origin"])
            by_location[f["location"]] = f["origin"]
        elif kind == "ack_stored":  # the broker's fact; a consumer may never have seen the reply
            origin = by_location.get(f["location"])
            if origin is not None:
                acked.add(origin)
        elif kind == "dead_letter":
            origin = f["origin"] or by_location.get(f["location"])
            if not f["reason"]:
                found.append(Violation("pop_outcomes", f"dead letter of {origin} at {t} ms has no reason"))
            if f["reason"] == copies.REASON_MAX_ATTEMPTS and f["reconsume_times"] != config.retry_max_times:
                found.append(
                    Violation(
                        "pop_outcomes",
                        f"{origin} dead-lettered after {f['reconsume_times']} "
                        f"reconsumes, not retry_max_times={config.retry_max_times}",
                    )
                )
            if origin is not None:
                dead.add(origin)
        elif kind in ("dropped", "gone"):
            origin = by_location.get(f["location"])
            if origin in sent_ok:
                found.append(
                    Violation("pop_outcomes", f"{origin} {kind} at {t} ms: {f.get('reason') or f.get('cause')}")
                )
    for origin in sorted(sent_ok - delivered - dead):
        found.append(Violation("pop_outcomes", f"{origin} was sent OK and never delivered nor dead-lettered"))
    for origin in sorted((delivered & sent_ok) - acked - dead):
        found.append(Violation("pop_outcomes", f"{origin} was delivered but never acked nor dead-lettered"))
    return found


def check_rewrite_bound(history, config: SimConfig) -> list[Violation]:
    limit = len(config.ck_rewrite_backoff_ms)
    return [
        Violation(
            "rewrite_bound",
            f"CK of {f['location']} rewritten {f['rewrite_count']} times at {t} ms (the ending allows {limit})",
        )
        for t, kind, f in history.events
        if kind == "ck_rewritten" and f["rewrite_count"] > limit
    ]


def check_breaker_bound(history, config: SimConfig) -> list[Violation]:
    """While OPEN a reader sends nothing to that group; HALF_OPEN lets one probe out, which may try each broker
    of the group once: at most ``BROKERS_PER_GROUP`` reads per virtual second."""
    state: dict[tuple[str, str], str] = {}
    probe_reads: Counter[tuple[str, str, int]] = Counter()
    found = []
    for t, kind, f in history.events:
        key = (f.get("reader"), f.get("target"))
        if kind == "breaker":
            state[key] = f["state"]
        elif kind == "broker_started":  # a new process starts with every breaker closed
            state = {k: v for k, v in state.items() if k[0] != f["broker"]}
        elif kind == "remote_read":
            current = state.get(key, "CLOSED")
            if current == "OPEN":
                found.append(
                    Violation("breaker_bound", f"{key[0]} read from {key[1]} at {t} ms while its breaker was open")
                )
            elif current == "HALF_OPEN":
                probe_reads[(*key, t // 1000)] += 1
    found += [
        Violation(
            "breaker_bound",
            f"{reader} sent {n} reads to {target} in second {second} while its breaker "
            f"was half-open (at most {BROKERS_PER_GROUP})",
        )
        for (reader, target, second), n in sorted(probe_reads.items())
        if n > BROKERS_PER_GROUP
    ]
    return found


def run_checkers(history, final_logs, final_readers, config: SimConfig) -> list[Violation]:
    return (
        check_sync_sends(history, final_logs, final_readers, config)
        + check_pop_outcomes(history, config)
        + check_rewrite_bound(history, config)
        + check_breaker_bound(history, config)
    )
