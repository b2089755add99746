"""A FIFO POP ack that answered holds over a ``kill -9`` and a quick restart of the broker (real process;
docs/pop.md "Restarts and crashes").

The periodic save of the FIFO POP state is set to once in ten minutes, so only what the ack itself wrote can
carry it over. FIFO messages a0, b0, a1 (message groups a and b): pop a0 and b0, ack a0, ``kill -9`` as soon as
the ack returns, restart. Then a1 comes (a0 is done), and b0 once its invisible time passed, attempt 2; a0 never again. Before, the restarted broker had its last periodic save (here:
none) and handed out a0 and b0 again at once.
"""

from __future__ import annotations

import time

import pytest
from tests.integration.test_ha_acting_master import ack, pop, send

from pocketmq.client.admin import AsyncAdmin
from pocketmq.client.config import ClientConfig
from pocketmq.common import properties as props
from pocketmq.protocol.codes import ResponseCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.processes import broker_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]
BROKER = "broker-fifo-kill"
TOPIC = "fifo-kill"
GROUP = "fifo-kill-readers"
INVISIBLE_MS = 2000


async def test_an_acked_fifo_message_never_comes_back_after_kill_9(tmp_path):
    proc = broker_process(tmp_path, BROKER, extra_args=["--set", "pop_state_persist_interval_ms=600000"]).start()
    client = RemotingClient()
    try:
        async with AsyncAdmin(ClientConfig(namesrv_addr=proc.namesrv)) as admin:
            await admin.create_topic(TOPIC, queues=1)
        for body, message_group in ((b"a0", "a"), (b"b0", "b"), (b"a1", "a")):
            sent = await send(client, proc.remoting, TOPIC, body, {props.SHARDING_KEY: message_group})
            assert sent.code == ResponseCode.SUCCESS, sent.remark
        first = await _pop(client, proc.remoting)
        assert [m.body for m in first] == [b"a0", b"b0"]
        await ack(client, proc.remoting, first[0], GROUP)
        proc.kill()
        proc.restart()

        delivered: list = []
        deadline = time.monotonic() + 20
        while b"b0" not in [m.body for m in delivered] and time.monotonic() < deadline:
            for msg in await _pop(client, proc.remoting, poll_ms=500):
                delivered.append(msg)
                await ack(client, proc.remoting, msg, GROUP)
        # a0 was acked: never again; b0 was in flight: once more after its invisible time, attempt 2
        assert sorted((m.body, m.reconsume_times) for m in delivered) == [(b"a1", 0), (b"b0", 1)]
    finally:
        await client.close()
        proc.kill()


async def _pop(client: RemotingClient, addr: str, poll_ms: int = 0) -> list:
    return await pop(client, addr, BROKER, TOPIC, INVISIBLE_MS, group=GROUP, fifo=True, poll_ms=poll_ms)
