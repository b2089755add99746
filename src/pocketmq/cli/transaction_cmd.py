"""``pocketmq transaction list|resume``: transactional messages the brokers put aside, and putting them back.

- ``list [--max N] [--cluster C]``: the half messages pending per topic on every master, then the messages put
  aside in ``TRANS_CHECK_MAX_TIME_TOPIC`` (checked ``transaction_check_max`` times without an answer, or older
  than the store's retention): broker, id (what ``resume`` takes), topic, transaction id, producer group,
  reason, checks, age.
- ``resume (--id ID | --all) [--topic T] [--cluster C]``: put them back to be checked again (RocketMQ's
  RESUME_CHECK_HALF_MESSAGE): each becomes a half message again with its checks at 0, so a producer of its
  group is asked about it and its answer ends it. ``ID`` is the listed id or the transaction id; a message put
  back once is refused the second time (two copies could both be committed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pocketmq.cli.existence import require_topic
from pocketmq.cli.output import add_action, emit, print_rows, report, run_admin
from pocketmq.client.admin import AsyncAdmin
from pocketmq.common.errors import PocketMQError

LIST_COLUMNS = ["broker", "id", "topic", "transaction_id", "producer_group", "reason", "checks", "age_s"]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "transaction",
        help="list and put back transactional messages the brokers gave up checking",
        description=__doc__.split("\n\n")[0],
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = add_action(actions, "list", "pending half messages per topic and the messages put aside", list_discarded)
    p.add_argument("--max", type=int, default=1000, help="list at most this many put-aside messages per broker")
    p.add_argument("--cluster", help="only the masters of this cluster")
    p = add_action(actions, "resume", "check messages put aside again", resume)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", help="the listed id (or the transaction id) of the message to put back")
    which.add_argument("--all", action="store_true", help="every message put aside (of --topic, when given)")
    p.add_argument("--topic", help="only messages of this topic")
    p.add_argument("--cluster", help="only the masters of this cluster")


@dataclass
class PendingHalfMessages:
    """A topic's pending half messages over the brokers: (broker, queue id) -> count, and the oldest born time."""

    counts: dict[tuple[str, int], int] = field(default_factory=dict)
    oldest_born_ms: int | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        if not self.total:
            return ""
        age = (
            ""
            if self.oldest_born_ms is None
            else f", the oldest {max(0, _now_ms() - self.oldest_born_ms) // 1000} s old"
        )
        return f"; {self.total} half message(s) waiting for their transaction's ending{age}"


async def pending_half_messages(admin: AsyncAdmin, topic: str) -> PendingHalfMessages:
    """What every master says of ``topic``'s pending half messages (nothing from one that cannot say)."""
    found = PendingHalfMessages()
    try:
        statuses = await admin.transaction_status()
    except PocketMQError:  # a broker without transactions (an older PocketMQ): the queues alone are shown
        return found
    for broker, status in statuses.items():
        entry = status.get("pending", {}).get(topic)
        if not entry:
            continue
        for queue_id, count in entry.get("queues", {}).items():
            found.counts[(broker, int(queue_id))] = int(count)
        born = entry.get("oldestBornMs")
        if born is not None and (found.oldest_born_ms is None or born < found.oldest_born_ms):
            found.oldest_born_ms = born
    return found


async def discarded_messages(admin: AsyncAdmin, limit: int, cluster: str | None) -> tuple[dict, list[dict]]:
    """(broker -> pending per topic, the put-aside messages as rows) of every master."""
    statuses = await admin.transaction_status(max_discarded=limit, cluster=cluster)
    now_ms = _now_ms()
    rows = [
        {
            "broker": broker,
            "id": entry["offsetMsgId"],
            "topic": entry["topic"],
            "transaction_id": entry["transactionId"],
            "producer_group": entry["producerGroup"],
            "reason": entry["reason"],
            "checks": entry["checks"],
            "age_s": max(0, now_ms - entry["bornTimestamp"]) // 1000,
            "born_timestamp_ms": entry["bornTimestamp"],
            "store_timestamp_ms": entry["storeTimestamp"],
        }
        for broker, status in sorted(statuses.items())
        for entry in status.get("discarded", [])
    ]
    return {broker: status.get("pending", {}) for broker, status in statuses.items()}, rows


def list_discarded(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        pending, rows = await discarded_messages(admin, args.max, args.cluster)
        if not args.json:
            for broker, topics in sorted(pending.items()):
                for topic, entry in sorted(topics.items()):
                    emit(f"{broker}: {entry['pending']} half message(s) of {topic} pending")
            emit(f"{len(rows)} transactional message(s) put aside")
        print_rows(args, rows, LIST_COLUMNS)

    return run_admin(args, action)


def resume(args) -> int:
    async def action(admin: AsyncAdmin) -> int:
        _, rows = await discarded_messages(admin, 100_000, args.cluster)
        chosen = [
            r
            for r in rows
            if (args.all or args.id in (r["id"], r["transaction_id"])) and args.topic in (None, r["topic"])
        ]
        if not chosen:
            if args.topic is not None:  # a mistyped topic is an error; a deleted one's messages can be resumed
                await require_topic(admin, args.topic)
            report(args, {"resumed": 0}, "no message put aside matches")
            return 0 if args.all else 1
        failed = 0
        for row in chosen:
            try:
                answer = await admin.resume_half_message(row["broker"], row["id"])
            except PocketMQError as exc:
                failed += 1
                report(args, {"id": row["id"], "resumed": False, "error": str(exc)}, f"{row['id']}: {exc}")
                continue
            report(
                args,
                {"id": row["id"], "resumed": True, "broker": row["broker"], "topic": row["topic"], **answer},
                f"{row['id']}: {row['topic']} transaction {row['transaction_id']} on {row['broker']} is checked again",
            )
        return 1 if failed else 0

    return run_admin(args, action)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
