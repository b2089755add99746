"""``pocketmq dlq list|resend``: a consumer group's dead-letter queue (``%DLQ%<group>``).

- ``list GROUP [--max N]``: the dead messages over every broker: id, original topic, reconsume times, body;
  then the group's dead-letter *references* (POP revive could not read the message from its broker:
  common/dead_letter_reference.py), kept apart in the reference topic, with where the message is and why it
  could not be read: ``reference`` while the broker still tries to read it (once it can, the real message is
  in ``%DLQ%<group>`` and the reference is no longer listed), ``reference gone`` / ``reference refused`` when
  it closed without a dead letter (the message no longer exists, the dead letter can never be written).
- ``resend GROUP (--id ID | --all) [--to-topic]``: send dead messages back to that group only, through the
  retry topic its consumers read (``%RETRY%<group>`` for push consumers, ``%RETRY%<group>_<topic>`` for POP
  ones: cli/dlq_target.py), so the other groups of the topic do not get them again; ``--to-topic`` sends them
  to their original topic instead, where every subscribed group gets them. They keep body, tag, keys, message
  id and user properties and start afresh (no reconsume count). ``ID`` matches the message id, the
  broker-side id or the original message id. A reference is resolved first: the real message is read from its
  broker group (a PULL of that one offset through the name server's broker table, ``cluster.remote_reader``);
  when it cannot be read (the broker is still unreachable, the message is gone) one line says why and the
  command exits 1. The DLQ entries stay where they are (RocketMQ never deletes from a DLQ either).
"""

from __future__ import annotations

from pocketmq.cli.output import add_action, emit, json_line, print_rows, report, run_admin
from pocketmq.cli.terminal import ProgressBar
from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.producer import AsyncProducer
from pocketmq.common.message import MessageExt
from pocketmq.ops.dead_letters import ReferenceResolver, dead_row, known_group_dead_messages, matches, reference_of
from pocketmq.ops.dlq_target import redelivery

LIST_COLUMNS = ["message_id", "kind", "origin_topic", "reconsume_times", "broker", "queue_offset", "body"]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "dlq", help="list and resend a group's dead-letter messages", description=__doc__.split("\n\n")[0]
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = add_action(actions, "list", "the dead messages of a group", list_dead, "group")
    p.add_argument("--max", type=int, default=1000, help="list at most this many (default 1000)")
    p = add_action(
        actions, "resend", "send dead messages back to the group (its retry topic) or their topic", resend, "group"
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", help="the message to resend")
    which.add_argument("--all", action="store_true", help="resend every dead message of the group")
    p.add_argument(
        "--to-topic",
        action="store_true",
        help="send to the original topic, where every group subscribed to it gets the message again "
        "(default: only GROUP gets it, through its retry topic)",
    )


def list_dead(args) -> int:
    async def action(admin: AsyncAdmin) -> None:
        rows = [dead_row(broker, m) for broker, m in await known_group_dead_messages(admin, args.group, args.max)]
        if not args.json:
            emit(f"group {args.group}: {len(rows)} dead message(s)")
        print_rows(args, rows, LIST_COLUMNS)

    return run_admin(args, action)


def resend(args) -> int:
    async def action(admin: AsyncAdmin) -> int:
        if args.all:
            chosen = [m for _, m in await known_group_dead_messages(admin, args.group, 1_000_000)]
        else:  # read up to the one wanted, not the whole dead-letter queue
            wanted = await known_group_dead_messages(admin, args.group, 1, keep=lambda m: matches(m, args.id))
            chosen = [m for _, m in wanted]
        if not chosen:
            report(
                args,
                {"group": args.group, "resent": 0},
                f"no dead message of group {args.group} {'' if args.all else f'with id {args.id}'}".rstrip(),
            )
            return 0 if args.all else 1
        async with (
            AsyncProducer(admin.config, instance=admin.instance) as producer,
            ReferenceResolver(
                admin.config.namesrv_addrs, admin.config.ssl_context(), admin.config.credentials
            ) as resolver,
        ):
            with ProgressBar(args, f"resending {args.group}'s dead messages", len(chosen)) as progress:
                unresolved = await resend_each(chosen, args, producer, resolver, progress)
        if not args.json:
            emit(
                f"resent {len(chosen) - unresolved} message(s) of group {args.group} "
                + ("to their original topics" if args.to_topic else "to the group (its retry topic)")
                + (f"; {unresolved} reference(s) not resolved" if unresolved else "")
            )
        return 1 if unresolved else 0

    return run_admin(args, action)


async def resend_each(
    chosen: list[MessageExt], args, producer: AsyncProducer, resolver: ReferenceResolver, progress: ProgressBar
) -> int:
    """Resends each of ``chosen`` (a reference: the message it points at); the number of references whose
    message could not be read, each said on a line of its own."""
    unresolved = 0
    for msg in chosen:
        ref = reference_of(msg)
        copy = (
            redelivery(msg, args.group, to_topic=args.to_topic)
            if ref is None
            else await resolver.resolve(ref, to_topic=args.to_topic)
        )
        if isinstance(copy, dict):
            unresolved += 1
            progress.pause()
            report(args, {"message_id": msg.msg_id, **copy}, unresolved_text(msg.msg_id, copy))
            progress.advance()
            continue
        result = await producer.send(copy)
        progress.advance()
        if args.json:
            emit(
                json_line(
                    {
                        "message_id": msg.msg_id,
                        "topic": copy.topic,
                        "queue_id": result.queue_id,
                        "queue_offset": result.queue_offset,
                    }
                )
            )
    return unresolved


def unresolved_text(msg_id: str, failure: dict) -> str:
    where = f"{failure['topic']}/{failure['queue_id']}@{failure['queue_offset']} on {failure['broker']}"
    again = " (try again later)" if failure["need_retry"] else " (gone for good)"
    return f"reference {msg_id}: {where} not read: {failure['reason']}{again}: {failure['description']}"
