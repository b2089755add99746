"""Recall of delayed messages through real ``pocketmq serve`` processes: the official RocketMQ 5 Python client
(``Producer.recall_message``) over gRPC, the SDK and the CLI over remoting.

A message recalled before it is due is never delivered, also after a broker restart between the recall and the
due time; a recall after the due time is refused as too late (ILLEGAL_DELIVERY_TIME on v2, ILLEGAL_OPERATION on
remoting); a forged or edited handle is refused (BAD_REQUEST); a second recall of a recalled message succeeds.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from grpc_support import client_env, read_topic

from pocketmq.client import ClientConfig, Producer
from pocketmq.common.message import Message
from pocketmq.protocol.codes import ResponseCode, V2StatusCode
from pocketmq.protocol.error_codes import RemoteServerError
from pocketmq.runtime.clock import SystemClock
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process, run_cli

pytestmark = pytest.mark.slow
RECALL_CLIENT = Path(__file__).with_name("recall_official_client.py")


def run_recall_client(spec: dict, home: Path) -> tuple[list[dict], list[dict]]:
    """(sends, recalls) the official client reported."""
    out = subprocess.run(
        [sys.executable, str(RECALL_CLIENT), json.dumps(spec)],
        env=client_env(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return [x for x in lines if "send" in x], [x for x in lines if "recall" in x]


def edited(handle: str) -> str:
    """``handle`` naming a due time one second earlier, its signature unchanged."""
    fields = base64.urlsafe_b64decode(handle).decode().split(" ")
    fields[3] = str(int(fields[3]) - 1000)
    return base64.urlsafe_b64encode(" ".join(fields).encode()).decode()


def bodies(namesrv: str, topic: str) -> set[bytes]:
    return {m.body for messages in read_topic(namesrv, topic).values() for m in messages}


@pytest.mark.timeout(120)
def test_official_client_recall_before_due_survives_restart_and_after_due_is_too_late(tmp_path):
    broker = broker_process(tmp_path / "b").start()
    try:
        # Recalls before the due time, the last one repeated: all in the sending process, since the messages are
        # due 5 s after they were sent and a second client process can take longer than that to start.
        spec = {"endpoint": broker.grpc, "topic": "recall_grpc", "count": 6, "delay_s": 5, "recall": [0, 2, 4, 4]}
        sends, recalls = run_recall_client(spec, tmp_path / "c1")
        assert len(sends) == 6 and all(s["recall_handle"] for s in sends)
        assert recalls == [
            {"recall": i, "ok": True, "message_id": sends[k]["message_id"]} for i, k in enumerate((0, 2, 4, 4))
        ]

        # Forged and edited handles are refused whenever they come (a new client process: handles outlive clients).
        garbage = base64.urlsafe_b64encode(b"v1 recall_grpc broker-a 1 x 0.AAAA").decode()
        spec = {
            "endpoint": broker.grpc,
            "topic": "recall_grpc",
            "handles": [garbage, edited(sends[1]["recall_handle"])],
        }
        _, recalls = run_recall_client(spec, tmp_path / "c2")
        assert [r.get("code") for r in recalls] == [V2StatusCode.BAD_REQUEST, V2StatusCode.BAD_REQUEST], recalls

        assert broker.stop() == 0, broker.log_tail()
        broker.start()
        expected = {f"recall-{i}".encode() for i in (1, 3, 5)}
        wait_until(lambda: bodies(broker.namesrv, "recall_grpc") >= expected, timeout_s=30)
        assert bodies(broker.namesrv, "recall_grpc") == expected  # all six were due at the same second

        spec = {"endpoint": broker.grpc, "topic": "recall_grpc", "handles": [sends[1]["recall_handle"]], "async": True}
        _, recalls = run_recall_client(spec, tmp_path / "c3")
        assert recalls[0]["code"] == V2StatusCode.ILLEGAL_DELIVERY_TIME and "too late" in recalls[0]["error"], recalls
    finally:
        broker.stop()


def pocketmq(*args: str, namesrv: str) -> subprocess.CompletedProcess:
    return run_cli(*args, "-n", namesrv)


@pytest.mark.timeout(90)
def test_sdk_and_cli_recall_over_remoting(tmp_path):
    broker = broker_process(tmp_path / "b").start()
    try:
        sent = pocketmq("send", "recall_cli", "--body", "cli", "--delay-ms", "60000", "--json", namesrv=broker.namesrv)
        assert sent.returncode == 0, sent.stderr
        receipt = json.loads(sent.stdout)
        for _ in range(2):  # a second recall of the same message answers the same
            recalled = pocketmq("message", "recall", receipt["recall_handle"], "--json", namesrv=broker.namesrv)
            assert recalled.returncode == 0, recalled.stderr
            assert json.loads(recalled.stdout) == {
                "message_id": receipt["message_id"],
                "topic": "recall_cli",
                "broker": "broker-a",
                "recalled": True,
            }

        with Producer(ClientConfig(namesrv_addr=broker.namesrv)) as producer:
            due_ms = SystemClock().now_ms() + 1500
            keep = producer.send(Message.create("recall_cli", b"keep"), deliver_at_ms=due_ms)
            gone = producer.send(Message.create("recall_cli", b"gone"), deliver_at_ms=due_ms)
            assert keep.recall_handle and gone.recall_handle
            assert producer.recall_message("recall_cli", gone.recall_handle) == gone.msg_id
            wait_until(lambda: b"keep" in bodies(broker.namesrv, "recall_cli"), timeout_s=20)
            with pytest.raises(RemoteServerError) as too_late:
                producer.recall_message("recall_cli", keep.recall_handle)
            assert too_late.value.response_code == ResponseCode.ILLEGAL_OPERATION
            assert "too late" in str(too_late.value)
            producer.send(Message.create("recall_other", b"x"))
            with pytest.raises(RemoteServerError) as other_topic:  # a handle is good for its own topic only
                producer.recall_message("recall_other", keep.recall_handle)
            assert other_topic.value.response_code == ResponseCode.ILLEGAL_OPERATION
        assert bodies(broker.namesrv, "recall_cli") == {b"keep"}

        late = pocketmq("message", "recall", keep.recall_handle, namesrv=broker.namesrv)
        assert late.returncode == 1 and "too late" in late.stderr
    finally:
        broker.stop()
