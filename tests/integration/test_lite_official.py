"""Lite topics with the unmodified official RocketMQ 5 Python client (gRPC) against ``pocketmq serve``.

A LITE parent topic is created with the SDK; the client's Producer sends to three lite topics of it
(``message.lite_topic``), its LiteSimpleConsumer / LitePushConsumer subscribes two of them: it gets every
message of those two in order per lite topic and none of the third; a subscription beyond the broker's quota
is refused with the client's quota exception (the quota came in the Settings reply); a message the simple
consumer does not ack comes back with delivery attempt 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.integration.grpc_support import run_official_client

from pocketmq.client import Admin, ClientConfig
from pocketmq.common.topic import MessageType
from pocketmq.testing.processes import broker_process

SCRIPT = Path(__file__).with_name("lite_official_client.py")
LITES = ["session-a", "session-b"]
PER_LITE = 5


@pytest.mark.timeout(120)
@pytest.mark.parametrize("consumer", ["simple", "push"])
def test_official_lite_producer_and_consumer(tmp_path, consumer):
    proc = broker_process(tmp_path, "broker-lite", extra_args=["--set", f"lite_subscription_quota={len(LITES)}"])
    proc.start()
    try:
        with Admin(ClientConfig(namesrv_addr=proc.namesrv)) as admin:
            admin.create_topic("lite_parent", queues=4, message_type=MessageType.LITE)
        spec = {
            "endpoint": proc.grpc,
            "topic": "lite_parent",
            "group": f"lite_{consumer}",
            "consumer": consumer,
            "lites": LITES,
            "unsubscribed": "session-x",
            "per_lite": PER_LITE,
            "deadline_s": 40,
        }
        result = run_official_client(spec, tmp_path / "home", timeout_s=90, script=SCRIPT)[-1]
        assert result["over_quota"] == "LiteSubscriptionQuotaExceededException"
        assert result["sent"] == 3 * PER_LITE
        got = result["got"]
        assert set(got) == set(LITES)  # nothing of the lite topic it did not subscribe
        for lite in LITES:
            first_time = [body for body, attempt in got[lite] if attempt == 1]
            assert first_time == [f"{lite}-{i}" for i in range(PER_LITE)]  # in order
        if consumer == "simple":
            dropped = result["dropped"]
            assert [dropped, 2] in got[dropped.rsplit("-", 1)[0]]
    finally:
        assert proc.stop() == 0, proc.log_tail()
