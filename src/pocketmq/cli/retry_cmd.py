"""``pocketmq retry stats GROUP``: a consumer group's retries at a glance.

Per broker: messages ever sent to ``%RETRY%<group>`` (its max offset), how many are still to be consumed
(max - the group's committed offset; retries still waiting in the broker's timer are not counted until they
are due), and the dead messages in ``%DLQ%<group>``.
"""

from __future__ import annotations

from pocketmq.cli.output import add_action, print_rows, run_admin
from pocketmq.client.admin import AsyncAdmin
from pocketmq.common.topic import dlq_topic, retry_topic
from pocketmq.ops.dead_letters import group_topic_offsets, require_group

COLUMNS = ["broker", "retried", "retry_pending", "dead"]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "retry", help="a consumer group's retry and dead-letter counts", description=__doc__.split("\n\n")[0]
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_action(actions, "stats", "retried, pending and dead message counts per broker", stats, "group")


def stats_rows(retry_offsets, dlq_offsets) -> list[dict]:
    rows: dict[str, dict] = {}
    for o in retry_offsets:
        row = rows.setdefault(
            o.queue.broker_name, {"broker": o.queue.broker_name, "retried": 0, "retry_pending": 0, "dead": 0}
        )
        row["retried"] += o.max_offset
        row["retry_pending"] += max(0, o.max_offset - (o.committed or 0))
    for o in dlq_offsets:
        row = rows.setdefault(
            o.queue.broker_name, {"broker": o.queue.broker_name, "retried": 0, "retry_pending": 0, "dead": 0}
        )
        row["dead"] += o.max_offset - o.min_offset
    return [rows[name] for name in sorted(rows)]


def stats(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        await require_group(admin, args.group)
        rows = stats_rows(
            await group_topic_offsets(admin, retry_topic(args.group), args.group),
            await group_topic_offsets(admin, dlq_topic(args.group)),
        )
        print_rows(args, rows, COLUMNS)

    return run_admin(args, action)
