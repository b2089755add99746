"""``pocketmq topic create|update|delete|list|describe|route``: topics on every master broker of a cluster
(``route``: cli/topic_route.py).

- ``create TOPIC [--queues N] [--type normal|fifo|delay|transaction|priority|lite|mixed] [--gray-queue-ratio R] [--cluster C]
  [--update [--force]]``: on every master of the cluster (every cluster when not given); returns once the name
  server's route shows the queues. A topic a master already has is refused there ("already exists") and left
  as it is, unless ``--update`` (RocketMQ's create-or-update).
- ``update TOPIC (--queues N | --type T | --gray-queue-ratio R)... [--cluster C] [--force]``: at least one of
  the three is required (a usage error otherwise); changes only the options given on every master that has the
  topic (one that does not refuses; a topic without a route is an error). Fewer queues than a topic has
  are refused while the queues dropped still store messages, which would be hidden, unless ``--force``.
- ``delete TOPIC [--cluster C]``: from every master, then from the name server; a topic the name server does
  not know is an error.
- ``list [--all]``: the topics the name server knows; system topics, and the cluster and broker names that
  brokers register as topics (RocketMQ does the same), only with ``--all``.
- ``describe TOPIC``: per queue, its broker, min and max queue offsets and the messages still stored; for a
  topic with transactional messages waiting for their ending, also the half messages pending per queue
  (column ``HALF_PENDING``, JSON ``half_pending``) and the age of the oldest (docs/transactions.md).
"""

from __future__ import annotations

from pocketmq.cli import topic_route
from pocketmq.cli.existence import require_topic
from pocketmq.cli.output import add_action, emit, print_rows, report, run_admin
from pocketmq.cli.terminal import ProgressBar
from pocketmq.cli.transaction_cmd import pending_half_messages
from pocketmq.client.admin import AsyncAdmin
from pocketmq.common.topic import MessageType, is_system_topic

TYPE_CHOICES = [t.value.lower() for t in MessageType]
# What ``topic update`` can change: it needs at least one
UPDATE_OPTIONS = ("--queues", "--type", "--gray-queue-ratio")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "topic", help="create, update, delete, list and describe topics", description=__doc__.split("\n\n")[0]
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = add_action(actions, "create", "create a topic on every master broker", create, "topic")
    p.add_argument("--queues", type=int, default=8, help="read and write queues per broker (default 8)")
    p.add_argument(
        "--type",
        dest="message_type",
        choices=TYPE_CHOICES,
        default="mixed",
        help="message type the topic accepts (default mixed: every type)",
    )
    _gray_option(p)
    p.add_argument("--cluster", help="only the masters of this cluster")
    p.add_argument("--update", action="store_true", help="a topic that exists takes this definition")
    p.add_argument(
        "--force",
        action="store_true",
        help="with --update: allow fewer queues although the queues "
        "dropped still store messages (they are hidden from consumers)",
    )
    p = add_action(actions, "update", "change the options given of a topic on every master broker", update, "topic")
    changes = p.add_argument_group(f"changes (at least one of {', '.join(UPDATE_OPTIONS)} is required)")
    changes.add_argument("--queues", type=int, help="read and write queues per broker")
    changes.add_argument("--type", dest="message_type", choices=TYPE_CHOICES, help="message type the topic accepts")
    _gray_option(changes)
    p.add_argument("--cluster", help="only the masters of this cluster")
    p.add_argument(
        "--force",
        action="store_true",
        help="allow fewer queues although the queues dropped still store messages (they are hidden from consumers)",
    )
    p = add_action(actions, "delete", "delete a topic from every master broker and the name server", delete, "topic")
    p.add_argument("--cluster", help="only from the masters of this cluster")
    p = add_action(actions, "list", "list topics", list_topics)
    p.add_argument("--all", action="store_true", help="include system topics and cluster/broker name topics")
    add_action(actions, "describe", "queues of a topic with their offsets", describe, "topic")
    topic_route.add_actions(actions)


def _gray_option(parser) -> None:
    parser.add_argument(
        "--gray-queue-ratio",
        type=float,
        help="gray queues are the last ceil(n * R) of each broker's (topic attribute gray.queue.ratio, R in "
        "[0, 1]; SDK clients follow it through the route; a ratio making every queue gray is refused, 0 ends a "
        "rollout; docs/gray.md)",
    )


def create(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        with ProgressBar(args, f"creating {args.topic} (brokers routed)") as progress:
            brokers = await admin.create_topic(
                args.topic,
                queues=args.queues,
                message_type=MessageType.parse(args.message_type),
                cluster=args.cluster,
                gray_queue_ratio=args.gray_queue_ratio,
                update=args.update,
                force=args.force,
                progress=progress.update,
            )
        verb = "created or updated" if args.update else "created"
        gray = "" if args.gray_queue_ratio is None else f", gray queue ratio {args.gray_queue_ratio:g}"
        report(
            args,
            {
                "topic": args.topic,
                "brokers": brokers,
                "queues": args.queues,
                "type": args.message_type.upper(),
                "gray_queue_ratio": args.gray_queue_ratio,
            },
            f"topic {args.topic} {verb} on {', '.join(brokers)}: {args.queues} queues each, "
            f"type {args.message_type.upper()}{gray}",
        )

    return run_admin(args, action)


def update(args) -> int:
    if args.queues is None and args.message_type is None and args.gray_queue_ratio is None:
        args.usage_parser.error(f"nothing to update: name at least one of {', '.join(UPDATE_OPTIONS)}")
    message_type = None if args.message_type is None else MessageType.parse(args.message_type)

    async def action(admin: AsyncAdmin) -> None:
        await require_topic(admin, args.topic)
        with ProgressBar(args, f"updating {args.topic} (brokers routed)") as progress:
            brokers = await admin.update_topic(
                args.topic,
                queues=args.queues,
                message_type=message_type,
                gray_queue_ratio=args.gray_queue_ratio,
                cluster=args.cluster,
                force=args.force,
                progress=progress.update,
            )
        changed = {
            "queues": args.queues,
            "type": message_type and message_type.value,
            "gray_queue_ratio": args.gray_queue_ratio,
        }
        changed = {name: value for name, value in changed.items() if value is not None}
        said = (
            ([f"{args.queues} queues each"] if args.queues is not None else [])
            + ([f"type {message_type.value}"] if message_type is not None else [])
            + ([f"gray queue ratio {args.gray_queue_ratio:g}"] if args.gray_queue_ratio is not None else [])
        )
        report(
            args,
            {"topic": args.topic, "brokers": brokers, **changed},
            f"topic {args.topic} updated on {', '.join(brokers)}: {', '.join(said)}",
        )

    return run_admin(args, action)


def delete(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        await require_topic(admin, args.topic)
        brokers = await admin.delete_topic(args.topic, cluster=args.cluster)
        report(
            args,
            {"topic": args.topic, "brokers": brokers, "deleted": True},
            f"topic {args.topic} deleted from {', '.join(brokers)} and the name server",
        )

    return run_admin(args, action)


def list_topics(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        topics = await admin.list_topics()
        if not args.all:
            info = await admin.cluster_info()
            hidden = set(info.cluster_addr_table) | set(info.broker_addr_table)
            topics = [t for t in topics if t not in hidden and not is_system_topic(t)]
        print_rows(args, [{"topic": t} for t in topics], ["topic"])

    return run_admin(args, action)


def describe(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        status = await admin.describe_topic(args.topic)
        pending = await pending_half_messages(admin, args.topic)  # (broker, queue id) -> count, oldest born ms
        rows = [
            {
                "topic": args.topic,
                "broker": q.queue.broker_name,
                "queue_id": q.queue.queue_id,
                "min_offset": q.min_offset,
                "max_offset": q.max_offset,
                "messages": q.max_offset - q.min_offset,
                "half_pending": pending.counts.get((q.queue.broker_name, q.queue.queue_id), 0),
            }
            for q in status.queues
        ]
        columns = ["broker", "queue_id", "min_offset", "max_offset", "messages"]
        print_rows(args, rows, columns + ["half_pending"] if pending.total else columns)
        if not args.json:
            emit(
                f"{args.topic}: {len(rows)} queues on {len({r['broker'] for r in rows})} broker(s), "
                f"{status.message_count} messages stored" + pending.summary()
            )

    return run_admin(args, action)
