"""``pocketmq group create|list|describe|consumers|reset-offset``: subscription (consumer) groups on every master
broker (``consumers`` and ``reset-offset``: cli/group_consumers.py).

- ``create GROUP [--retry-max-times N] [--retry-queue-nums Q] [--fifo] [--gray-clients GLOBS]
  [--gray-queue-ratio R] [--cluster C]``: create or update the group's config (``retryMaxTimes``,
  ``retryQueueNums``; ``--fifo`` sets ``consumeMessageOrderly``; the gray options set the attributes of
  cli/gray_view.py) on every master of the cluster.
- ``list``: the groups over every master, with their retry and FIFO settings.
- ``describe GROUP [--topic T]``: per queue, the group's committed offset, the broker's max offset and the lag,
  and its POP state: messages in flight, waiting to revive (invisible time passed, not handed back yet),
  retried, dead-lettered, CK rewrites (revive backing off after failed reads) and CK endings (reads that
  failed past the backoff table) (the last four counted since the broker started). A POP group's retried messages
  sit in its pop retry topic ``%RETRY%<group>_<topic>``, which has rows of its own. Then the live clients:
  which are gray and which queues each holds or may pop (cli/gray_view.py, docs/gray.md).
"""

from __future__ import annotations

from pocketmq.cli import group_consumers
from pocketmq.cli.existence import require_topic
from pocketmq.cli.gray_view import CLIENT_COLUMNS, client_rows, gray_attributes
from pocketmq.cli.output import (
    add_action,
    emit,
    json_line,
    print_rows,
    report,
    run_admin,
)
from pocketmq.client.admin import AsyncAdmin
from pocketmq.ops.consume_stats import group_row, offset_rows

GROUP_COLUMNS = ["group", "retry_max_times", "retry_queue_nums", "fifo", "consume_enable"]
OFFSET_COLUMNS = [
    "topic",
    "broker",
    "queue_id",
    "consumer_offset",
    "broker_offset",
    "lag",
    "in_flight",
    "waiting_to_revive",
    "retried",
    "dead_lettered",
    "ck_rewrites",
    "ck_endings",
]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "group", help="create, list and describe consumer groups", description=__doc__.split("\n\n")[0]
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = add_action(actions, "create", "create or update a group on every master broker", create, "group")
    p.add_argument(
        "--retry-max-times",
        type=int,
        default=16,
        help="retries of a message the group fails to consume before it goes to the group's dead-letter queue, "
        "%%DLQ%%GROUP (default 16; -1: RocketMQ's 16): N retries, so a message is delivered at most N+1 times "
        "(N=0: a failed message goes to the DLQ at once). POP consumers (RocketMQ 5 SimpleConsumer and "
        "PushConsumer, the SDK's SimpleConsumer) always use it; a remoting push consumer (the SDK's PushConsumer, "
        "RocketMQ 4.x clients) uses it unless it sets its own max reconsume times (RocketMQ 4.x Java clients "
        "always send one, 16 by default; an orderly listener retries locally, by default without limit)",
    )
    p.add_argument(
        "--retry-queue-nums",
        type=int,
        default=1,
        help="queues of the group's retry topic %%RETRY%%GROUP (default 1, at most 64): created with them, "
        "grown to them when it has fewer (never shrunk), spread over the group's consumers",
    )
    p.add_argument("--fifo", action="store_true", help="consume each message group in order")
    p.add_argument(
        "--gray-clients",
        help="comma-separated globs over client ids the broker treats as gray "
        "POP clients (group attribute gray.clients; docs/gray.md)",
    )
    p.add_argument("--gray-queue-ratio", help="the group's gray queue ratio (attribute gray.queue.ratio)")
    p.add_argument("--cluster", help="only the masters of this cluster")
    add_action(actions, "list", "list groups", list_groups)
    p = add_action(actions, "describe", "a group's offsets, lag and POP state per queue", describe, "group")
    p.add_argument("--topic", help="only this topic")
    group_consumers.add_actions(actions)


def create(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        brokers = await admin.create_group(
            args.group,
            cluster=args.cluster,
            retry_max_times=args.retry_max_times,
            retry_queue_nums=args.retry_queue_nums,
            consume_message_orderly=args.fifo,
            attributes=gray_attributes(args),
        )
        report(
            args,
            {
                "group": args.group,
                "brokers": brokers,
                "retry_max_times": args.retry_max_times,
                "retry_queue_nums": args.retry_queue_nums,
                "fifo": args.fifo,
            },
            f"group {args.group} created on {', '.join(brokers)}: retry max times {args.retry_max_times} "
            f"({args.retry_max_times + 1 if args.retry_max_times >= 0 else 17} deliveries at most), "
            f"retry queues {args.retry_queue_nums}{', FIFO' if args.fifo else ''}",
        )

    return run_admin(args, action)


def list_groups(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        groups = await admin.list_groups()
        print_rows(args, [group_row(g) for g in groups.values()], GROUP_COLUMNS)

    return run_admin(args, action)


def describe(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        config = await admin.describe_group(args.group)
        if args.topic is not None:
            await require_topic(admin, args.topic)
        rows = offset_rows(await admin.consume_stats(args.group, args.topic))
        clients = client_rows(await admin.gray_clients(args.group), as_json=args.json)
        if args.json:
            for row in rows + clients:
                emit(json_line({"group": args.group, **row}))
            return
        settings = group_row(config)
        emit(
            f"group {args.group}: retry max times {settings['retry_max_times']}, "
            f"{'FIFO' if settings['fifo'] else 'concurrent'}, total lag {sum(r['lag'] for r in rows)}, "
            f"in flight {sum(r['in_flight'] for r in rows)}"
        )
        print_rows(args, rows, OFFSET_COLUMNS)
        emit("clients (gray or not, and the queues each holds or may pop):")
        print_rows(args, clients, CLIENT_COLUMNS)

    return run_admin(args, action)
