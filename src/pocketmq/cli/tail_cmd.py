"""``pocketmq tail TOPIC [--from-beginning] [--json] [--max N] [--timeout SECONDS] [--tag EXPR | --sql EXPR]``.

Reads every readable queue of the topic on every broker of its route, from the newest message (or, with
``--from-beginning``, from each queue's min offset), printing each message as it arrives: per queue in
queue-offset order; queues interleave. It stops after ``--max`` messages, or once ``--timeout`` seconds pass
without a new one (default: follow until interrupted). Nothing is committed and nothing is created: tail is a
reader under RocketMQ's admin tools' group, which brokers keep no trace of, and a topic that does not exist is
an error. ``--tag`` or ``--sql`` (an SQL92 expression over the properties, docs/filter.md) makes the brokers send
only the messages that match. JSON lines are ``pocketmq.cli.output.message_to_json``.

One task per queue long-polls its broker and hands messages to the printer through a bounded queue, so a
slow terminal slows the pulls rather than growing memory.
"""

from __future__ import annotations

import asyncio

from pocketmq.cli.output import add_client_options, client_config, emit, json_line, message_to_text
from pocketmq.client.pull_consumer import AsyncPullConsumer, PullStatus
from pocketmq.client.selector import MessageSelector
from pocketmq.common.errors import BadRequestError
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.common.topic import TOOLS_CONSUMER_GROUP
from pocketmq.ops.message_json import message_to_json

PULL_BATCH = 256
LONG_POLL_MS = 2_000
PRINT_BUFFER_MESSAGES = 4096


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "tail", help="print a topic's messages as they arrive", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("topic")
    parser.add_argument("--from-beginning", action="store_true", help="start at the oldest stored message")
    parser.add_argument("--max", dest="max_messages", type=int, help="stop after N messages")
    parser.add_argument(
        "--timeout", dest="idle_timeout_s", type=float, help="stop after SECONDS without a new message (default: never)"
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--tag", dest="tag_expression", default="*", help="tag filter, e.g. 'a || b' (default *)")
    only.add_argument("--sql", help="SQL92 property filter, e.g. \"region = 'eu' AND amount > 100\"")
    add_client_options(parser)
    parser.set_defaults(func=run)


def check_args(args) -> MessageSelector:
    """The arguments' selector; raises on a bad argument (an SQL92 expression: with the position of its fault)."""
    if args.max_messages is not None and args.max_messages < 1:
        raise BadRequestError(f"--max must be at least 1, got {args.max_messages}")
    if args.idle_timeout_s is not None and args.idle_timeout_s <= 0:
        raise BadRequestError(f"--timeout must be positive, got {args.idle_timeout_s}")
    return MessageSelector.by_sql(args.sql) if args.sql is not None else MessageSelector.by_tag(args.tag_expression)


async def _follow(
    consumer: AsyncPullConsumer, queue: MessageQueue, queue_offset: int, selector: MessageSelector, out: asyncio.Queue
) -> None:
    """Pull ``queue`` from ``queue_offset`` forever, putting its messages (or the error that stops it) on ``out``."""
    try:
        while True:
            result = await consumer.pull(
                queue, queue_offset, PULL_BATCH, tag_expression=selector, long_poll_ms=LONG_POLL_MS
            )
            for msg in result.messages:
                await out.put((queue, msg))
            if result.status is PullStatus.OFFSET_ILLEGAL and result.next_begin_offset == queue_offset:
                await asyncio.sleep(LONG_POLL_MS / 1000)  # the broker cannot say where to go on: do not spin
            queue_offset = result.next_begin_offset
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        await out.put((queue, exc))


async def tail(args, selector: MessageSelector) -> int:
    async with AsyncPullConsumer(TOOLS_CONSUMER_GROUP, client_config(args)) as consumer:
        queues = await consumer.fetch_queues(args.topic)
        start = consumer.min_offset if args.from_beginning else consumer.max_offset
        offsets = await asyncio.gather(*(start(q) for q in queues))
        out: asyncio.Queue = asyncio.Queue(PRINT_BUFFER_MESSAGES)
        tasks = [asyncio.create_task(_follow(consumer, q, offset, selector, out)) for q, offset in zip(queues, offsets)]
        printed = 0
        try:
            while args.max_messages is None or printed < args.max_messages:
                try:
                    async with asyncio.timeout(args.idle_timeout_s):
                        queue, item = await out.get()
                except TimeoutError:
                    break
                if isinstance(item, Exception):
                    raise item
                _print_message(args, item, queue.broker_name)
                printed += 1
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return 0


def _print_message(args, msg: MessageExt, broker_name: str) -> None:
    emit(json_line(message_to_json(msg, broker_name)) if args.json else message_to_text(msg, broker_name))


def run(args) -> int:
    selector = check_args(args)
    return asyncio.run(tail(args, selector))
