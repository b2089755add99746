"""The v2 consumer RPCs of the proxy over the brokers' remoting POP: ReceiveMessage (POP_MESSAGE), AckMessage
(ACK_MESSAGE), ChangeInvisibleDuration (CHANGE_MESSAGE_INVISIBLETIME) and QueryAssignment.

Requests are checked as on the embedded front end (server/grpc_consumer.py ``checked_receive``). A receive pops
the broker of the queue the client named (its route lists every broker's queues on the proxy's endpoint), or
the topic's brokers in turn when it named none; a broker group whose master is gone is popped through its
lowest-id slave (the SDK route's reachable member, docs/ha.md). Only a FIFO group's push consumer pops one queue
(its assignments are per queue), as on the embedded front end.

Receipt handles are the embedded front end's (broker/pop/receipt.py): the topic, RocketMQ's extraInfo (which
names the broker the message was popped from) and the commit log offset, so an ack goes to the broker that
holds its checkpoint whichever worker serves it. A handle a broker refuses is INVALID_RECEIPT_HANDLE.

A receive ends when its client says goodbye (NotifyClientTermination), as on the embedded front end; the POP it
had open at the broker cannot be ended, so what it pops after that is made visible again at once.

A push consumer's messages are kept invisible while its session lives (server/auto_renew.py, as on the embedded
front end): the worker that delivered a message renews it through the broker, and an ack or change of its first
handle reaches that worker (the client acks on the connection it received on).

Not done here: ForwardMessageToDeadLetterQueue.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Coroutine
from typing import Any, NamedTuple

from pocketmq.broker.pop.receipt import ReceiptHandle
from pocketmq.broker.pop.renewal import RenewalTable
from pocketmq.client.instance import ClientInstance
from pocketmq.client.simple_consumer import BROKER_NAME_PROPERTY, messages_of_pop_reply
from pocketmq.common import properties as props
from pocketmq.common.errors import (
    InvalidReceiptHandleError,
    NoPermissionError,
    PocketMQError,
    RemotingError,
)
from pocketmq.common.message import MessageExt
from pocketmq.protocol import grpc_pop_codec as codec
from pocketmq.protocol.codes import RequestCode, ResponseCode, V2StatusCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError, v2_code_of
from pocketmq.protocol.grpc_codec import encode_delivered_message
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from pocketmq.proxy.groups import GroupSettings
from pocketmq.server.auto_renew import AutoRenewer, decode_handle
from pocketmq.server.grpc_calls import client_id_of
from pocketmq.server.grpc_consumer import (
    check_change_invisible,
    check_group,
    checked_ack_request,
    checked_receive,
)
from pocketmq.server.grpc_validation import check_topic
from pocketmq.server.sessions import SessionRegistry

log = logging.getLogger(__name__)

_NOTHING = (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.NO_MESSAGE)


class _Popped(NamedTuple):
    response: RemotingCommand
    broker_name: str


def receipt_handle_of(msg: MessageExt) -> str:
    """The v2 receipt handle of a message popped through remoting (its POP_CK and broker name taken out)."""
    extra = msg.properties.pop(props.POP_CK)
    msg.properties.pop(BROKER_NAME_PROPERTY, None)
    return f"{msg.topic} {extra} {msg.phys_offset}"


def handle_request(code: int, header, group: str, handle: ReceiptHandle, **fields) -> RemotingCommand:
    """A remoting request about the message ``handle`` names (ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME)."""
    return RemotingCommand.request(
        code,
        header.ext_fields(
            consumer_group=group,
            topic=handle.topic,
            queue_id=handle.queue_id,
            extra_info=handle.extra_info,
            offset=handle.queue_offset,
            **fields,
        ),
    )


def change_invisible_request(group: str, handle: ReceiptHandle, invisible_ms: int) -> RemotingCommand:
    return handle_request(
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        ChangeInvisibleTimeRequestHeader,
        group,
        handle,
        invisible_time_ms=invisible_ms,
    )


class ProxyConsumerRpcs:
    def __init__(
        self,
        instance: ClientInstance,
        groups: GroupSettings,
        sessions: SessionRegistry,
        request_timeout_s: float,
        renewals: RenewalTable | None = None,
    ):
        self._instance = instance
        self._sessions = sessions
        self.renewer = AutoRenewer(
            renewals if renewals is not None else RenewalTable(),
            self._change_invisible,
            sessions,
            clock=instance.clock,
        )
        self._handing_back: set[asyncio.Future] = set()  # hand-backs under way (a task needs a reference)
        self._groups = groups
        self._timeout_s = request_timeout_s
        self._turn = itertools.count()

    # -- receive ----------------------------------------------------------------------------------------------------
    async def receive(self, request, context):
        """The ReceiveMessage stream (an async generator of responses)."""
        clock = self._instance.clock
        client_id = client_id_of(context)
        with self._sessions.receiving(client_id) as client_gone:
            try:
                req = codec.decode_receive_request(request)
                batch, invisible_ms, poll_ms = checked_receive(req, context, self.renewer.renewals.invisible_ms)
                per_queue = req.auto_renew and await self._groups.is_fifo(req.group)
                pop = RemotingCommand.request(
                    RequestCode.POP_MESSAGE,
                    PopMessageRequestHeader.ext_fields(
                        consumer_group=req.group,
                        topic=req.topic,
                        queue_id=req.queue_id if per_queue else -1,
                        max_msg_nums=batch,
                        invisible_time_ms=invisible_ms,
                        poll_time_ms=poll_ms,
                        born_time_ms=clock.now_ms(),
                        init_mode=0,
                        exp_type="SQL92" if req.filter_type == "SQL" else "TAG",  # the broker filters (docs/filter.md)
                        exp=req.filter_expression,
                        order=False,  # the group's consumeMessageOrderly decides on the broker
                    ),
                )
                popped = await self._pop_unless_gone(
                    self._pop(req.topic, req.broker_name, pop, poll_ms), req.group, client_gone
                )
                if popped is None or popped.response.code in _NOTHING:
                    messages = []
                else:
                    messages = messages_of_pop_reply(expect_success(popped.response), popped.broker_name)
            except PocketMQError as exc:
                yield codec.receive_status(v2_code_of(exc), str(exc))
                return
            # answered inside the session's receive: a goodbye waits for these replies (server/sessions.py)
            if not messages:
                yield codec.receive_status(V2StatusCode.MESSAGE_NOT_FOUND, "no new message")
            else:
                invisible_reply_ms = int(popped.response.ext_fields.get("invisibleTime", invisible_ms))
                renew = req.auto_renew and req.invisible_ms is None  # a push consumer's: kept invisible while it lives
                unsent_from = 0  # the messages from here on never reached the client if the stream ends now
                try:
                    yield codec.receive_status()
                    for index, msg in enumerate(messages):
                        text = receipt_handle_of(msg)
                        if renew:
                            self.renewer.track(text, client_id, req.group, decode_handle(text))
                        unsent_from = index + 1  # this one may reach the client even if its yield is cut
                        yield codec.receive_message(
                            encode_delivered_message(
                                msg,
                                receipt_handle=text,
                                delivery_attempt=msg.reconsume_times + 1,
                                invisible_duration_ms=invisible_reply_ms,
                            )
                        )
                finally:
                    if unsent_from < len(messages):  # the stream ended mid-way (the client cancelled it)
                        self._hand_back_soon(req.group, messages[unsent_from:])
            yield codec.receive_delivery_timestamp(clock.now_ms())

    async def _pop(self, topic: str, named_broker: str, pop: RemotingCommand, poll_ms: int) -> _Popped:
        broker_name = await self._broker_to_pop(topic, named_broker)
        timeout_s = poll_ms / 1000 + self._timeout_s
        try:
            return _Popped(await self._instance.invoke_broker(broker_name, pop, timeout_s), broker_name)
        except RemotingError as exc:
            # The broker is gone or unreachable: ask the name server now rather than at the next periodic
            # refresh, and pop once more where the route now says (a group whose master died: its slave).
            log.info("event=proxy_pop_failed broker=%s error=%s", broker_name, exc)
            await self._instance.route(topic, refresh=True)
            broker_name = await self._broker_to_pop(topic, broker_name)
            return _Popped(await self._instance.invoke_broker(broker_name, pop, timeout_s), broker_name)

    async def _pop_unless_gone(
        self, pop: Coroutine[Any, Any, _Popped], group: str, client_gone: asyncio.Future | None
    ) -> _Popped | None:
        """The POP's reply, or None when the client ended its session first (or cancelled its receive). A broker
        cannot be told to end a long poll, so the POP keeps waiting there; whatever it pops after the client
        left is handed back at once rather than staying invisible for the receive's whole invisible time."""
        popping = asyncio.ensure_future(pop)
        try:
            if client_gone is None:  # shielded: a cancelled receive leaves the POP to its hand-back
                return await asyncio.shield(popping)
            await asyncio.wait((popping, client_gone), return_when=asyncio.FIRST_COMPLETED)
            return popping.result() if popping.done() else None
        finally:
            if not popping.done():
                popping.add_done_callback(lambda task: self._hand_back_when_popped(task, group))

    def _hand_back_when_popped(self, popping: asyncio.Future, group: str) -> None:
        if popping.cancelled() or popping.exception() is not None:
            return
        popped = popping.result()
        if popped.response.code != ResponseCode.SUCCESS:  # nothing popped, or refused
            return
        self._hand_back_soon(group, messages_of_pop_reply(popped.response, popped.broker_name))

    def _hand_back_soon(self, group: str, messages: list[MessageExt]) -> None:
        handing = asyncio.ensure_future(self._hand_back(group, messages))
        self._handing_back.add(handing)
        handing.add_done_callback(self._handing_back.discard)

    async def _hand_back(self, group: str, messages: list) -> None:
        """Make messages nobody will receive visible again (the broker's shortest invisible time)."""
        for msg in messages:
            try:
                handle = decode_handle(receipt_handle_of(msg))
                await self._invoke_with_handle(handle, change_invisible_request(group, handle, 0))
            except PocketMQError as exc:
                # It comes back after its invisible time instead: later, not lost.
                log.info("event=proxy_hand_back_failed topic=%s error=%s", msg.topic, exc)
        log.info("event=proxy_popped_after_client_left group=%s handed_back=%d", group, len(messages))

    async def _broker_to_pop(self, topic: str, named: str) -> str:
        """The broker the client named when the topic has readable queues there, else the next in turn."""
        route = await self._instance.route(topic)
        readable = sorted({q.broker_name for q in route.read_queues if q.broker_name in route.broker_addrs})
        if not readable:
            raise NoPermissionError(f"topic {topic!r} has no readable queue")
        if named in readable:
            return named
        return readable[next(self._turn) % len(readable)]

    # -- ack --------------------------------------------------------------------------------------------------------
    async def ack(self, request, context):
        try:
            group, topic, entries = checked_ack_request(request)
        except PocketMQError as exc:
            return codec.ack_error_response(v2_code_of(exc), str(exc))
        outcomes = await asyncio.gather(
            *(self._ack_one(group, topic, entry.receipt_handle) for entry in entries), return_exceptions=True
        )
        results = []
        for entry, outcome in zip(entries, outcomes):
            if isinstance(outcome, PocketMQError):
                results.append((entry, v2_code_of(outcome), str(outcome)))
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                results.append((entry, V2StatusCode.OK, "OK"))
        return codec.ack_response(results)

    async def _ack_one(self, group: str, topic: str, text: str) -> None:
        handle = await self.renewer.current_handle(text, group, topic)
        await self._invoke_with_handle(
            handle, handle_request(RequestCode.ACK_MESSAGE, AckMessageRequestHeader, group, handle)
        )

    # -- change invisible duration ----------------------------------------------------------------------------------
    async def change_invisible(self, request, context):
        group, topic, text, invisible_ms, _ = codec.decode_change_invisible_request(request)
        try:
            check_change_invisible(group, topic, invisible_ms)
            new = await self._change_invisible(
                group, await self.renewer.current_handle(text, group, topic), invisible_ms
            )
        except PocketMQError as exc:
            return codec.change_invisible_response(v2_code_of(exc), str(exc), text)
        return codec.change_invisible_response(V2StatusCode.OK, "OK", new.encode())

    async def _change_invisible(self, group: str, handle: ReceiptHandle, invisible_ms: int) -> ReceiptHandle:
        """CHANGE_MESSAGE_INVISIBLETIME to the broker the handle names; the message's new handle."""
        reply = await self._invoke_with_handle(handle, change_invisible_request(group, handle, invisible_ms))
        h = reply.ext_fields
        try:
            return ReceiptHandle(
                handle.topic,
                handle.queue_offset,  # a changed message is its own checkpoint
                int(h["popTime"]),
                int(h["invisibleTime"]),
                int(h["reviveQid"]),
                handle.retry_flag,
                handle.broker_name,
                handle.queue_id,
                handle.queue_offset,
                handle.phys_offset,
            )
        except (KeyError, ValueError):
            raise PocketMQError(f"unreadable broker reply to a change of invisible time: {h}") from None

    async def _invoke_with_handle(self, handle: ReceiptHandle, request: RemotingCommand) -> RemotingCommand:
        """Send an ack or change to the broker the handle names; a handle it refuses is INVALID_RECEIPT_HANDLE."""
        try:
            return expect_success(await self._instance.invoke_broker(handle.broker_name, request, self._timeout_s))
        except RemoteServerError as exc:
            if exc.response_code == ResponseCode.INVALID_PARAMETER:
                raise InvalidReceiptHandleError(exc.remark or str(exc)) from None
            raise

    # -- assignment -------------------------------------------------------------------------------------------------
    async def query_assignment(self, request, context):
        try:
            topic, group, endpoints = codec.decode_assignment_request(request)
            check_group(group)
            check_topic(topic)
            route = await self._instance.route(topic)
            fifo = await self._groups.is_fifo(group)
            queue_ids: dict[str, list[int]] = {}
            for queue in route.read_queues:
                if queue.broker_name in route.broker_addrs:
                    queue_ids.setdefault(queue.broker_name, []).append(queue.queue_id)
            if not queue_ids:
                raise NoPermissionError(f"topic {topic!r} has no readable queue")
            if not fifo:
                queue_ids = {name: [-1] for name in queue_ids}
        except PocketMQError as exc:
            return codec.assignment_error_response(v2_code_of(exc), str(exc))
        return codec.assignments_response(topic, queue_ids, endpoints)
