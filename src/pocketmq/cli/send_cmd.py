"""``pocketmq send TOPIC [--body TEXT|- | --file PATH] [--tag T] [--keys K] [--property K=V ...]
[--message-group G | --priority N | --lite-topic L] [--count N] [--delay-ms N] [--json]``.

Sends one message, or with ``--count N`` N messages whose bodies are ``TEXT-0`` .. ``TEXT-(N-1)`` (a body
read from a file or stdin is sent as it is, N times), one at a time, each through the SDK's producer (queue
chosen round robin over every broker of the route, or by ``--message-group``; a ``--priority N`` message goes
to the queue of its level on the broker; ``--lite-topic`` sends to that lite topic of a LITE topic,
docs/lite.md). Each acknowledged message prints one line as soon as its reply arrives; with ``--json`` an
object with ``message_id`` (the producer's UNIQ_KEY), ``topic``, ``broker``, ``queue_id``, ``queue_offset``,
``status`` and ``offset_msg_id`` (the broker's id); a message delayed by ``--delay-ms`` also prints its
``recall_handle`` (``pocketmq message recall``). A failed send stops the command with one error line and exit
status 1; the lines already printed are the messages stored. A topic that did not exist is created by the
broker (``auto_create_topic_enable``), and a note on stderr says so.
"""

from __future__ import annotations

import asyncio
import sys

from pocketmq.cli.output import add_client_options, client_config, emit, json_line, parse_key_values
from pocketmq.cli.terminal import ProgressBar, print_note
from pocketmq.client.producer import AsyncProducer, SendResult
from pocketmq.common.errors import BadRequestError, IllegalTopicError, TopicNotExistError
from pocketmq.common.message import Message
from pocketmq.common.properties import SYSTEM_PROPERTY_NAMES
from pocketmq.common.topic import topic_name_problem
from pocketmq.runtime.clock import SystemClock

DEFAULT_BODY = "hello from pocketmq"


def register(subparsers) -> None:
    parser = subparsers.add_parser("send", help="send messages to a topic", description=__doc__.split("\n\n")[0])
    parser.add_argument("topic")
    body = parser.add_mutually_exclusive_group()
    body.add_argument(
        "--body", default=DEFAULT_BODY, help=f"message body text, '-' reads it from stdin (default {DEFAULT_BODY!r})"
    )
    body.add_argument("--file", metavar="PATH", help="the message body is this file's bytes")
    parser.add_argument("--tag", help="the message's tag")
    parser.add_argument("--keys", help="the message's keys, space-separated")
    parser.add_argument(
        "--property", dest="properties", action="append", default=[], metavar="K=V", help="a user property; repeatable"
    )
    parser.add_argument("--message-group", help="send every message to this message group's queue")
    parser.add_argument(
        "--priority",
        type=int,
        help="send priority messages of this level (0 or more, higher first; the topic's queue N holds level N)",
    )
    parser.add_argument("--lite-topic", help="send every message to this lite topic of the (LITE) topic")
    parser.add_argument("--count", type=int, help="send N messages numbered into the body")
    parser.add_argument(
        "--delay-ms", type=int, help="deliver each message this many ms after it is sent (prints its recall handle)"
    )
    add_client_options(parser)
    parser.set_defaults(func=run)


def body_of(args) -> str | bytes:
    """The text of ``--body``, or the bytes of ``--file`` or of stdin (``--body -``)."""
    if args.file is not None:
        try:
            with open(args.file, "rb") as f:
                return f.read()
        except OSError as exc:
            raise BadRequestError(f"--file {args.file}: {exc.strerror}") from None
    return sys.stdin.buffer.read() if args.body == "-" else args.body


def messages_of(args) -> list[Message]:
    """The messages the arguments describe; BadRequestError for a bad topic, count or property."""
    problem = topic_name_problem(args.topic)
    if problem:
        raise IllegalTopicError(problem)
    if args.lite_topic is not None and (
        args.message_group is not None or args.priority is not None or args.delay_ms is not None
    ):
        raise BadRequestError("--lite-topic excludes --message-group, --priority and --delay-ms")
    if args.count is not None and args.count < 1:
        raise BadRequestError(f"--count must be at least 1, got {args.count}")
    if args.priority is not None and args.priority < 0:
        raise BadRequestError(f"--priority must be 0 or more, got {args.priority}")
    if args.delay_ms is not None and args.delay_ms < 1:
        raise BadRequestError(f"--delay-ms must be at least 1, got {args.delay_ms}")
    try:
        properties = parse_key_values(args.properties, "--property")
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    reserved = sorted(set(properties) & SYSTEM_PROPERTY_NAMES)
    if reserved:
        raise BadRequestError(f"--property {reserved[0]} is a system property name; use --tag/--keys")
    body = body_of(args)
    count = 1 if args.count is None else args.count
    bodies = [body] * count if isinstance(body, bytes) or args.count is None else [f"{body}-{i}" for i in range(count)]
    return [
        Message.create(
            args.topic,
            body,
            tags=args.tag,
            keys=args.keys.split() if args.keys else None,
            properties=properties,
            message_group=args.message_group,
            priority=args.priority,
            lite_topic=args.lite_topic,
        )
        for body in bodies
    ]


def result_to_json(result: SendResult) -> dict:
    mq = result.message_queue
    return {
        "message_id": result.msg_id,
        "topic": mq.topic,
        "broker": mq.broker_name,
        "queue_id": mq.queue_id,
        "queue_offset": result.queue_offset,
        "status": result.status.value,
        "offset_msg_id": result.offset_msg_id,
        **({"recall_handle": result.recall_handle} if result.recall_handle else {}),
    }


def result_to_text(result: SendResult) -> str:
    mq = result.message_queue
    recall = f" recall handle {result.recall_handle}" if result.recall_handle else ""
    return (
        f"{result.status.value} {result.msg_id} -> {mq.topic}@{mq.broker_name}/{mq.queue_id} "
        f"offset {result.queue_offset}{recall}"
    )


async def topic_exists(producer: AsyncProducer, topic: str) -> bool:
    try:
        await producer.instance.fetch_route_data(producer.namespace.wrap(topic), auto_create=False)
    except TopicNotExistError:
        return False
    return True


def run(args) -> int:
    messages = messages_of(args)

    async def send_all(progress: ProgressBar) -> None:
        async with AsyncProducer(client_config(args)) as producer:
            new_topic = not await topic_exists(producer, args.topic)
            for message in messages:
                delay_ms = args.delay_ms
                deliver_at_ms = None if delay_ms is None else SystemClock().now_ms() + delay_ms
                result = await producer.send(message, deliver_at_ms=deliver_at_ms)
                emit(json_line(result_to_json(result)) if args.json else result_to_text(result))
                if new_topic:  # said before the progress bar is drawn, on a line of its own
                    new_topic = False
                    print_note(
                        "send",
                        f"topic {args.topic} did not exist and was created with the broker's defaults "
                        f"(auto_create_topic_enable); `pocketmq topic create` chooses queues and type",
                    )
                progress.advance()

    with ProgressBar(args, f"sending to {args.topic}", len(messages), lines=True) as progress:
        asyncio.run(send_all(progress))
    return 0
