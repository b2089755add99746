"""Where the retry limit and the retry queues come from, against a real ``pocketmq serve`` (100 ms delay steps):

- ``pocketmq group create --retry-max-times N --retry-queue-nums Q``: an SDK push consumer that sets no max of
  its own gets N retries (N+1 deliveries) before the DLQ, and ``%RETRY%<group>`` has Q queues;
- the client's own send to ``%RETRY%<group>`` when CONSUMER_SEND_MSG_BACK fails: the retry comes back through
  the broker with its reconsume times counted, and the group's limit sends it to the DLQ at the same count.
"""

from __future__ import annotations

import pytest
from tests.integration.test_push_retry import LEVELS, Recorder

from pocketmq.cli.main import main
from pocketmq.client import Admin, ClientConfig, Message, Producer, PullConsumer
from pocketmq.client.push_consumer import PushConsumer, PushConsumerOptions
from pocketmq.common import properties as props
from pocketmq.common.errors import PocketMQError
from pocketmq.common.message import MessageExt, MessageQueue
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]
BROKER = "broker-limits"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(
        tmp_path_factory.mktemp("limits"), BROKER, extra_args=["--set", f"message_delay_level={LEVELS}"]
    ).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def start_consumer(config: ClientConfig, topic: str, group: str, recorder: Recorder) -> PushConsumer:
    with Admin(config) as admin:
        admin.create_topic(topic, queues=2)
    options = PushConsumerOptions(group, rebalance_interval_ms=500, persist_interval_ms=200, long_poll_ms=1000)
    consumer = PushConsumer(options, config)  # no max_reconsume_times: the group's applies
    consumer.subscribe(topic)
    consumer.register_listener(recorder)
    return consumer.start()


def dead_letters(config: ClientConfig, group: str) -> list[MessageExt]:
    """The group's DLQ once it holds a message."""
    queue = MessageQueue(f"%DLQ%{group}", BROKER, 0)
    with PullConsumer(f"{group}_dlq_reader", config) as reader:

        def stored() -> int:
            try:
                return reader.max_offset(queue)
            except PocketMQError:  # the DLQ topic does not exist yet
                return 0

        wait_until(lambda: stored() >= 1, timeout_s=30, message=f"a message in %DLQ%{group}")
        return reader.pull(queue, 0, 10).messages


def test_the_groups_retry_limit_and_queues_apply_to_an_sdk_push_consumer(broker):
    config = ClientConfig(namesrv_addr=broker.namesrv, instance_name="limits")
    created = main(
        ["group", "create", "g_limit", "--retry-max-times", "2", "--retry-queue-nums", "3", "-n", broker.namesrv]
    )
    assert created == 0
    recorder = Recorder(fail_times=10**6)
    consumer = start_consumer(config, "limit_topic", "g_limit", recorder)
    try:
        with Producer(config) as producer:
            producer.send(Message.create("limit_topic", "doomed"))
        [dead] = dead_letters(config, "g_limit")
        assert (dead.body, dead.reconsume_times) == (b"doomed", 3)
        assert [rt for rt, _ in recorder.of("doomed")] == [0, 1, 2]  # N = 2 retries: N + 1 deliveries
        with PullConsumer("g_limit_reader", config) as reader:
            assert len(reader.fetch_queues("%RETRY%g_limit")) == 3
    finally:
        consumer.shutdown()


def test_the_clients_own_retry_send_when_send_back_fails(broker):
    config = ClientConfig(namesrv_addr=broker.namesrv, instance_name="limits-fallback")
    assert main(["group", "create", "g_fallback", "--retry-max-times", "1", "-n", broker.namesrv]) == 0
    recorder = Recorder(fail_times=10**6)
    consumer = start_consumer(config, "fallback_topic", "g_fallback", recorder)
    instance = consumer.core.instance
    invoke_broker, refused = instance.invoke_broker, []

    async def refusing_send_back(broker_name, request, timeout_s=None):
        if request.code == RequestCode.CONSUMER_SEND_MSG_BACK:
            refused.append(request)
            return request.response(ResponseCode.SYSTEM_ERROR, remark="send-back refused by the test")
        return await invoke_broker(broker_name, request, timeout_s)

    instance.invoke_broker = refusing_send_back
    try:
        with Producer(config) as producer:
            sent = producer.send(Message.create("fallback_topic", "by-hand", properties={"who": "me"}))
        [dead] = dead_letters(config, "g_fallback")
        assert [rt for rt, _ in recorder.of("by-hand")] == [0, 1]  # the group's 1 retry, sent by the client
        assert len(refused) == 2 and all("maxReconsumeTimes" not in r.ext_fields for r in refused)
        assert (dead.body, dead.reconsume_times, dead.properties["who"]) == (b"by-hand", 2, "me")
        assert dead.properties[props.RETRY_TOPIC] == "fallback_topic" and props.DELAY_TIME_LEVEL not in dead.properties
        assert dead.properties[props.ORIGIN_MESSAGE_ID] == sent.msg_id
        service = consumer.core._consume_service
        assert (service.sent_back_total, service.local_retries_total) == (2, 0)  # no local retry was needed
    finally:
        instance.invoke_broker = invoke_broker
        consumer.shutdown()
