"""The official RocketMQ 5 Python client against ``pocketmq serve`` and against a do-nothing gRPC server (same
service, answering at once: the ceiling of Python gRPC on this machine), in one run.

Workloads (``--workload``):

- ``send``: the client's ``Producer``, MESSAGES sync sends of SIZE-byte bodies from THREADS threads sharing one
  producer (issue 4: ``ratio`` >= 0.8).
- ``receive_ack``: the client's ``SimpleConsumer``, THREADS threads sharing one consumer, each looping
  ``receive(32)`` then ``ack`` of every message (the client acks one message per RPC) until MESSAGES were acked.
  ``pocketmq serve`` gets the messages first from the PocketMQ SDK (not timed); the do-nothing server hands
  out the same 32 canned messages every time (issue 5: the official client's rate beside the ceiling).

Each target gets its own fresh client process (HOME in a temp dir: the client logs under ~/logs); each client
warms up, then is timed. The two targets alternate ROUNDS times and the best round of each counts. Prints one
JSON line.

    python bench/produce_grpc.py [--workload send|receive_ack] [--messages 5000] [--size 1024] [--threads 1,4]
                                 [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WARMUP_SENDS = 200
WARMUP_ACKS = 200
RECEIVE_BATCH = 32
TOPIC = "bench_grpc"
GROUP = "bench_grpc_group"


# -- the do-nothing server (run with --null-server READY_FILE) ---------------------------------------------------
def run_null_server(ready_file: str) -> None:
    import grpc

    from pocketmq.common.message import MessageExt
    from pocketmq.common.topic import MessageType
    from pocketmq.protocol import grpc_codec as codec
    from pocketmq.protocol import grpc_pop_codec as codec_pop
    from pocketmq.protocol.codes import V2StatusCode
    from pocketmq.protocol.grpc_service import add_messaging_service
    from pocketmq.server.grpc_server import MAX_GRPC_MESSAGE_BYTES

    now_ms = int(time.time() * 1000)
    canned = [
        codec.encode_delivered_message(
            MessageExt(
                topic=TOPIC,
                body=b"x" * 1024,
                properties={"UNIQ_KEY": f"NULL{i:028X}"},
                queue_offset=i,
                born_timestamp_ms=now_ms,
                store_timestamp_ms=now_ms,
            ),
            receipt_handle=f"null-handle-{i}",
            invisible_duration_ms=60_000,
        )
        for i in range(RECEIVE_BATCH)
    ]

    class NullServicer:
        """Answers what a producer or a simple consumer needs, at once, storing nothing."""

        async def QueryRoute(self, request, context):
            topic, dialled, domain = codec.decode_route_request(request)
            return codec.route_response(
                [
                    codec.RouteQueue(
                        topic, i, "null", tuple(dialled), domain_name=domain, message_type=MessageType.MIXED
                    )
                    for i in range(8)
                ]
            )

        async def Heartbeat(self, request, context):
            return codec.heartbeat_response()

        async def NotifyClientTermination(self, request, context):
            return codec.termination_response()

        async def SendMessage(self, request, context):
            return codec.send_response(
                [codec.SendEntry(V2StatusCode.OK, message_id=m.system_properties.message_id) for m in request.messages]
            )

        async def QueryAssignment(self, request, context):
            topic, _, dialled = codec_pop.decode_assignment_request(request)
            return codec_pop.assignment_response(topic, "null", [-1], dialled)

        async def ReceiveMessage(self, request, context):
            yield codec_pop.receive_status()
            for message in canned[: max(request.batch_size, 1)]:
                yield codec_pop.receive_message(message)
            yield codec_pop.receive_delivery_timestamp(int(time.time() * 1000))

        async def AckMessage(self, request, context):
            _, _, entries = codec_pop.decode_ack_request(request)
            return codec_pop.ack_response([(entry, V2StatusCode.OK, "OK") for entry in entries])

        async def Telemetry(self, request_iterator, context):
            async for command in request_iterator:
                if codec.telemetry_kind(command) == "settings":
                    yield codec.settings_reply(command, max_body_bytes=4 * 1024 * 1024)

    async def serve() -> None:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES)])
        add_messaging_service(NullServicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        Path(ready_file).write_text(json.dumps({"grpc": f"127.0.0.1:{port}"}))
        await server.wait_for_termination()

    asyncio.run(serve())


# -- the client (run with --client JSON) -------------------------------------------------------------------------
def run_client(spec: dict) -> None:
    if spec["workload"] == "receive_ack":
        return run_simple_consumer(spec)
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    producer = Producer(ClientConfiguration(spec["endpoint"], Credentials()), [spec["topic"]])
    producer.startup()
    body = os.urandom(spec["size"])

    def send(count: int) -> None:
        for _ in range(count):
            msg = Message()
            msg.topic = spec["topic"]
            msg.body = body
            msg.tag = "bench"
            producer.send(msg)

    try:
        send(WARMUP_SENDS)
        rate = timed_threads(send, spec["messages"], spec["threads"])
    finally:
        producer.shutdown()
    print(json.dumps({"msgs_per_s": rate}), flush=True)


def timed_threads(work, messages: int, threads: int) -> float:
    """Messages per second of ``threads`` threads each running ``work(messages // threads)`` at once."""
    per_thread = messages // threads
    workers = [threading.Thread(target=work, args=(per_thread,)) for _ in range(threads)]
    started = time.perf_counter()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return per_thread * threads / (time.perf_counter() - started)


def run_simple_consumer(spec: dict) -> None:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(
        ClientConfiguration(spec["endpoint"], Credentials()),
        GROUP,
        {spec["topic"]: FilterExpression("*")},
        await_duration=2,
    )
    consumer.startup()

    def receive_and_ack(count: int) -> None:
        acked = 0
        while acked < count:
            for msg in consumer.receive(RECEIVE_BATCH, 60):
                consumer.ack(msg)
                acked += 1

    try:
        receive_and_ack(WARMUP_ACKS)
        rate = timed_threads(receive_and_ack, spec["messages"], spec["threads"])
    finally:
        consumer.shutdown()
    print(json.dumps({"msgs_per_s": rate}), flush=True)


def fill_topic(namesrv: str, messages: int, size: int) -> None:
    """Enough messages on ``pocketmq serve`` for every receive_ack round (PocketMQ SDK, batches of 32)."""
    from pocketmq.client import Admin, ClientConfig, Message, Producer

    config = ClientConfig(namesrv_addr=namesrv)
    with Admin(config) as admin:
        admin.create_topic(TOPIC, queues=8)
    with Producer(config) as producer:
        for start in range(0, messages, RECEIVE_BATCH):
            producer.send_batch([Message(TOPIC, b"x" * size) for _ in range(min(RECEIVE_BATCH, messages - start))])


# -- the driver ----------------------------------------------------------------------------------------------------
def measure(endpoint: str, home: Path, *, workload: str, messages: int, size: int, threads: int) -> float:
    spec = {
        "endpoint": endpoint,
        "topic": TOPIC,
        "workload": workload,
        "messages": messages,
        "size": size,
        "threads": threads,
    }
    env = dict(os.environ, HOME=str(home))
    out = subprocess.run(
        [sys.executable, __file__, "--client", json.dumps(spec)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["msgs_per_s"]


def wait_ready(ready: Path, proc: subprocess.Popen, timeout_s: float = 30) -> dict:
    deadline = time.monotonic() + timeout_s
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("do-nothing server did not start")
        time.sleep(0.05)
    return json.loads(ready.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("send", "receive_ack"), default="send")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--threads", default="1,4", help="comma-separated client thread counts")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--null-server", metavar="READY_FILE", help=argparse.SUPPRESS)
    parser.add_argument("--client", metavar="JSON", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.null_server:
        return run_null_server(args.null_server)
    if args.client:
        return run_client(json.loads(args.client))

    from pocketmq.testing.processes import broker_process

    with tempfile.TemporaryDirectory(prefix="pmq-bench-grpc-") as tmp:
        tmp_path = Path(tmp)
        ready = tmp_path / "null.ready.json"
        null = subprocess.Popen(
            [sys.executable, __file__, "--null-server", str(ready)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        broker = broker_process(tmp_path / "broker", "broker-a").start()
        try:
            null_endpoint = wait_ready(ready, null)["grpc"]
            thread_counts = [int(t) for t in args.threads.split(",")]
            if args.workload == "receive_ack":
                fill_topic(
                    broker.namesrv,
                    (args.messages + WARMUP_ACKS + RECEIVE_BATCH * max(thread_counts))
                    * args.rounds
                    * len(thread_counts),
                    args.size,
                )
            client = {"send": "Producer, sync send", "receive_ack": "SimpleConsumer, receive(32) + ack each"}
            result = {
                "bench": "produce_grpc",
                "workload": args.workload,
                "client": f"rocketmq-python-client (official, {client[args.workload]})",
                "messages": args.messages,
                "body_bytes": args.size,
                "runs": [],
            }
            for threads in thread_counts:
                best = {"null": 0.0, "pocketmq": 0.0}
                for _ in range(args.rounds):
                    for name, endpoint in (("null", null_endpoint), ("pocketmq", broker.grpc)):
                        rate = measure(
                            endpoint,
                            tmp_path,
                            workload=args.workload,
                            messages=args.messages,
                            size=args.size,
                            threads=threads,
                        )
                        best[name] = max(best[name], rate)
                result["runs"].append(
                    {
                        "threads": threads,
                        "ceiling_msgs_per_s": round(best["null"]),
                        "pocketmq_msgs_per_s": round(best["pocketmq"]),
                        "ratio": round(best["pocketmq"] / best["null"], 3),
                    }
                )
            print(json.dumps(result))
        finally:
            broker.stop()
            null.terminate()
            null.wait(timeout=10)


if __name__ == "__main__":
    main()
