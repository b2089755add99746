"""An operator's requests about a consumer group's online consumers (``pocketmq group consumers|reset-offset``,
``pocketmq message consume-directly``; docs/cli.md), sent through an ``AsyncAdmin``.

- ``connections``: GET_CONSUMER_CONNECTION_LIST of every master (a client heart-beats to each broker it reads).
- ``reset_offset``: INVOKE_BROKER_TO_RESET_OFFSET on every broker of the topic's route; each stores the group's
  new offsets and tells the group's online push consumers (server/remoting_consumer_admin.py).
- ``running_info``, ``consume_directly``: asked of a broker the client is connected to, which passes the request
  on; the client answers (client/consumer_requests.py).
"""

from __future__ import annotations

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.replies import json_body
from pocketmq.common.errors import ClientError
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.consumer_admin_headers import (
    ClientRequestHeader,
    ConsumeMessageDirectlyRequestHeader,
    ResetOffsetRequestHeader,
)
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.protocol.queue_tables import loads, queue_entries
from pocketmq.protocol.replies import expect_success
from pocketmq.protocol.request_headers import GroupRequestHeader

# Above the broker's own wait for the client (CLIENT_CALL_TIMEOUT_S), so its answer, even a timeout, arrives.
CLIENT_CALL_WAIT_S = 12.0


class ConsumerAdmin:
    def __init__(self, admin: AsyncAdmin):
        self._admin = admin
        self._namespace = admin.namespace

    async def connections(self, group: str) -> dict[str, dict]:
        """Broker name -> its ConsumerConnection JSON, of the masters the group has consumers on (empty: none
        online)."""
        fields = GroupRequestHeader.ext_fields(consumer_group=self._namespace.wrap(group))
        responses = await self._admin._on_masters(
            lambda: RemotingCommand.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, fields), None
        )
        result = {}
        for name, response in sorted(responses.items()):
            if response.code == ResponseCode.CONSUMER_NOT_ONLINE:
                continue
            expect_success(response)
            result[name] = json_body(response)
        return result

    async def reset_offset(self, group: str, topic: str, timestamp_ms: int, *, force: bool = True) -> dict[str, dict]:
        """Broker name -> ``{"offsetTable": [{topic, brokerName, queueId, offset}], "consumersNotified": n}``."""
        fields = ResetOffsetRequestHeader.ext_fields(
            topic=self._namespace.wrap(topic),
            group=self._namespace.wrap(group),
            timestamp_ms=timestamp_ms,
            is_force=force,
        )
        responses = await self._admin.on_topic_brokers(topic, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
        result = {}
        for name, response in responses.items():
            expect_success(response)
            body = _queue_table_body(response, "offsetTable", "offset")
            for entry in body["offsetTable"]:
                entry["topic"] = self._namespace.unwrap(entry["topic"])
            result[name] = body
        return result

    async def running_info(self, group: str, client_id: str) -> dict:
        """The client's ConsumerRunningInfo JSON (``client/consumer_requests.running_info``), its ``mqTable`` as
        a list of ``{topic, brokerName, queueId, commitOffset, cachedMsgCount, ...}``."""
        fields = ClientRequestHeader.ext_fields(consumer_group=self._namespace.wrap(group), client_id=client_id)
        response = await self._ask_client(RequestCode.GET_CONSUMER_RUNNING_INFO, fields, group, client_id)
        info = _queue_table_body(response, "mqTable", "value")
        for entry in info["mqTable"]:
            entry["topic"] = self._namespace.unwrap(entry["topic"])
        return info

    async def consume_directly(self, group: str, client_id: str, broker_name: str, offset_msg_id: str) -> dict:
        """The client's ConsumeMessageDirectlyResult JSON for the message ``offset_msg_id`` of ``broker_name``."""
        masters = await self._admin.master_addrs()
        if broker_name not in masters:
            raise ClientError(f"broker {broker_name!r} has no master registered with the name server")
        fields = ConsumeMessageDirectlyRequestHeader.ext_fields(
            consumer_group=self._namespace.wrap(group),
            client_id=client_id,
            msg_id=offset_msg_id,
            broker_name=broker_name,
        )
        return json_body(
            await self._ask_client(
                RequestCode.CONSUME_MESSAGE_DIRECTLY, fields, group, client_id, [masters[broker_name]]
            )
        )

    async def _ask_client(
        self, code: int, fields: dict[str, str], group: str, client_id: str, addrs: list[str] | None = None
    ) -> RemotingCommand:
        """``code`` through the first broker of ``addrs`` (default: every master) the client is connected to: its
        answer."""
        if addrs is None:
            masters = await self._admin.master_addrs()
            addrs = [masters[name] for name in sorted(masters)]
        for addr in addrs:
            response = await self._admin.instance.remoting.invoke(
                addr, RemotingCommand.request(code, fields), CLIENT_CALL_WAIT_S
            )
            if response.code == ResponseCode.CONSUMER_NOT_ONLINE:
                continue
            expect_success(response)
            return response
        raise ClientError(f"client {client_id} of group {group} is not online")


def _queue_table_body(response: RemotingCommand, table_name: str, value_name: str) -> dict:
    """The reply's JSON body with its queue-keyed ``table_name`` as a list (``protocol.queue_tables``)."""
    try:
        body = loads(response.body or b"{}")
        if not isinstance(body, dict):
            raise ValueError("not a JSON object")
        body[table_name] = queue_entries(body.get(table_name) or [], value_name)
    except (ValueError, KeyError, TypeError) as exc:
        raise RemoteServerError(ResponseCode.SYSTEM_ERROR, f"reply body is not a {table_name} table: {exc}") from None
    return body
