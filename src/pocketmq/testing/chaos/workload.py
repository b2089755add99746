"""The steady traffic of a chaos run: an SDK producer and POP consumer (threads of the harness, client name
``sdk``) and the official client in its own process (``official``, official_client.py).

The SDK producer sends ``s<k>`` to the chaos topic with no client-side retry (one id, at most one stored copy,
so a second delivery after an ack is the broker's doing), a tenth of them delayed by a level or to an exact
time; the consumers do what ``policy.disposition`` says and record everything in the ``History``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pocketmq.client import ClientConfig, Message, Producer, ProducerOptions, SendStatus, SimpleConsumer
from pocketmq.common.errors import PocketMQError, RemotingError
from pocketmq.testing.chaos.history import History
from pocketmq.testing.chaos.policy import INVISIBLE_MS, NACK_INVISIBLE_MS, SDK_GROUP, TOPIC, act

SEND_INTERVAL_S = 0.05
ROUTE_REFRESH_MS = 2_000
RETRY_TOPIC_PROPERTY = "RETRY_TOPIC"


class SdkClients:
    """The SDK producer and consumer threads; ``kill`` abandons them (the schedule's kill of ``sdk``), ``start``
    begins a new incarnation with fresh clients."""

    def __init__(self, namesrv_addr: str, seed: int, history: History, settling: threading.Event):
        # Routes refreshed every 2 s, as the cluster's other timings are shrunk (registration every 500 ms, expiry
        # 2 s): with the default 30 s a route fetched while a master was re-registering outlives the settle time.
        self.config = ClientConfig(
            namesrv_addr=namesrv_addr, request_timeout_s=3.0, poll_name_server_interval_ms=ROUTE_REFRESH_MS
        )
        self.seed = seed
        self.history = history
        self.settling = settling
        self._sent = 0
        self._stop: threading.Event | None = None
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, args=(self._stop,), name="chaos-sdk-producer", daemon=True),
            threading.Thread(target=self._consume, args=(self._stop,), name="chaos-sdk-consumer", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def kill(self) -> None:
        if self._stop is not None:
            self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _record_error(self, op: str, exc: BaseException) -> None:
        self.history.add("error", who="sdk", op=op, error=repr(exc)[:300])

    def _started(self, factory, what: str, stop: threading.Event):
        """A started client, retrying while the cluster cannot answer (the name server restarting, a partition);
        None when stopped first."""
        while not stop.is_set():
            client = factory()
            try:
                client.start()
                return client
            except (PocketMQError, OSError, TimeoutError) as exc:
                self._record_error(f"start_{what}", exc)
                client.shutdown()
                stop.wait(0.5)
        return None

    def _produce(self, stop: threading.Event) -> None:
        options = ProducerOptions(retry_times_when_send_failed=0, send_timeout_s=3.0)
        producer = self._started(lambda: Producer(self.config, options), "producer", stop)
        if producer is None:
            return
        try:
            while not stop.is_set() and not self.settling.is_set():
                msg_id = f"s{self._sent}"
                self._sent += 1
                kind = self._sent % 20
                delay = (
                    {"delay_level": 1 + kind % 3}
                    if kind == 0
                    else {"deliver_at_ms": int(time.time() * 1000) + 1500}
                    if kind == 10
                    else {}
                )
                try:
                    result = producer.send(Message.create(TOPIC, msg_id, keys=msg_id), **delay)
                    self.history.add(
                        "send",
                        who="sdk",
                        id=msg_id,
                        ok=result.status is SendStatus.SEND_OK,
                        status=result.status.value,
                        broker=result.message_queue.broker_name,
                        queue=result.queue_id,
                        queue_offset=result.queue_offset,
                        delay=delay,
                    )
                except (PocketMQError, OSError, TimeoutError) as exc:
                    self.history.add("send", who="sdk", id=msg_id, ok=False, status=repr(exc)[:300])
                stop.wait(SEND_INTERVAL_S)
        finally:
            producer.shutdown()

    def _consume(self, stop: threading.Event) -> None:
        consumer = self._started(
            lambda: SimpleConsumer(SDK_GROUP, {TOPIC: "*"}, self.config, await_duration_ms=1000), "consumer", stop
        )
        if consumer is None:
            return
        try:
            while not stop.is_set():
                t0 = time.time()
                try:
                    received = consumer.receive(16, INVISIBLE_MS)
                except Exception as exc:  # a corrupt record surfaces as a decode error: record every kind
                    self._record_error("receive", exc)
                    stop.wait(0.2)
                    continue
                for msg in received:
                    self._handle(consumer, msg, t0)
        finally:
            consumer.shutdown()

    def _handle(self, consumer: SimpleConsumer, msg, t0: float) -> None:
        msg_id = msg.body.decode(errors="replace")
        attempt = msg.reconsume_times + 1
        self.history.add(
            "deliver",
            group=SDK_GROUP,
            id=msg_id,
            attempt=attempt,
            broker=msg.properties.get("PMQ_BROKER_NAME", ""),
            topic=msg.properties.get(RETRY_TOPIC_PROPERTY, msg.topic),
            t0=t0,
        )
        act(
            self.history.add,
            SDK_GROUP,
            self.seed,
            msg_id,
            attempt,
            self.settling.is_set(),
            ack=lambda: consumer.ack(msg),
            nack=lambda: consumer.change_invisible_duration(msg, NACK_INVISIBLE_MS),
            errors=(PocketMQError, OSError, TimeoutError),
            unanswered=lambda exc: isinstance(exc, (RemotingError, OSError, TimeoutError)),
        )


class OfficialClientProcess:
    """official_client.py as a managed process (kill -9, SIGSTOP/SIGCONT, restart as a new incarnation)."""

    def __init__(self, workdir: Path, endpoints: str, seed: int):
        self.workdir = workdir
        self.endpoints = endpoints
        self.seed = seed
        self.events_path = workdir / "official-events.jsonl"
        self.settle_file = workdir / "settle"
        self.stop_file = workdir / "stop"
        self.incarnation = 0
        self.proc: subprocess.Popen | None = None
        self.paused = False
        workdir.mkdir(parents=True, exist_ok=True)

    def _running(self) -> subprocess.Popen | None:
        """The process while it runs (paused counts), else None."""
        proc = self.proc
        return proc if proc is not None and proc.poll() is None else None

    @property
    def pid(self) -> int | None:
        running = self._running()
        return running.pid if running is not None else None

    def start(self) -> None:
        spec = {
            "endpoints": self.endpoints,
            "seed": self.seed,
            "incarnation": self.incarnation,
            "events": str(self.events_path),
            "settle_file": str(self.settle_file),
            "stop_file": str(self.stop_file),
        }
        self.incarnation += 1
        log = open(self.workdir / "official.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pocketmq.testing.chaos.official_client", json.dumps(spec)],
            cwd=self.workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HOME": str(self.workdir)},
        )
        log.close()

    def kill(self) -> None:
        if self.paused:
            self.resume()
        if (running := self._running()) is not None:
            running.send_signal(signal.SIGKILL)
            running.wait(timeout=10)

    def pause(self) -> None:
        if (running := self._running()) is not None:
            running.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.proc is not None and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def settle(self) -> None:
        self.settle_file.touch()

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """Ask it to finish (stop file), kill it if it does not; its exit status (None: it was not running)."""
        self.resume()
        self.stop_file.touch()
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def serving(self) -> str | None:
        if self.proc is None or self.proc.poll() is not None:
            return f"exited with {self.proc.returncode if self.proc else None}"
        return None
