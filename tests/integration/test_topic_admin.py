"""``pocketmq topic create|update`` never redefines a topic by accident (real processes, docs/cli.md "topic"):
create refuses a topic that exists unless ``--update``, update changes only the options it names and refuses a
topic that does not exist, and fewer queues that would hide stored messages are refused unless ``--force``.
Every refusal is one error line, exit 1, and leaves the topic as it was."""

from __future__ import annotations

import asyncio
import json

import pytest
from tests.integration.remoting_calls import call
from tests.integration.test_cli import json_lines, pocketmq

from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("topic-admin"), "broker-t").start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


def topic_config(broker, topic: str) -> dict:
    """The topic as the broker has it (GET_ALL_TOPIC_CONFIG), RocketMQ's JSON fields."""

    async def fetch() -> dict:
        client = RemotingClient()
        try:
            reply = await call(client, broker.remoting, RequestCode.GET_ALL_TOPIC_CONFIG)
        finally:
            await client.close()
        return json.loads(reply.body)["topicConfigTable"][topic]

    return asyncio.run(fetch())


def queue_messages(broker, topic: str) -> dict[int, int]:
    described = pocketmq("topic", "describe", topic, "--json", "-n", broker.namesrv)
    assert described.returncode == 0, described.stderr
    return {row["queue_id"]: row["messages"] for row in json_lines(described.stdout)}


def refused(result, *phrases: str) -> bool:
    lines = result.stderr.strip().splitlines()
    return result.returncode == 1 and len(lines) == 1 and all(p in lines[0] for p in phrases)


def test_create_of_an_existing_topic_is_refused_and_hides_nothing(broker):
    ns = broker.namesrv
    assert pocketmq("topic", "create", "shrink", "--queues", "8", "-n", ns).returncode == 0
    assert pocketmq("send", "shrink", "--body", "m", "--count", "16", "-n", ns).returncode == 0
    assert queue_messages(broker, "shrink") == {q: 2 for q in range(8)}

    again = pocketmq("topic", "create", "shrink", "--queues", "2", "-n", ns)
    assert refused(again, "'shrink' already exists on broker broker-t"), again
    assert "created" not in again.stdout
    assert queue_messages(broker, "shrink") == {q: 2 for q in range(8)}

    fewer = pocketmq("topic", "update", "shrink", "--queues", "2", "-n", ns)
    assert refused(fewer, "8 -> 2 read queues would hide 12 messages", "queues 2, 3, 4, 5, 6, 7"), fewer
    also_via_create = pocketmq("topic", "create", "shrink", "--queues", "2", "--update", "-n", ns)
    assert refused(also_via_create, "would hide 12 messages"), also_via_create
    assert queue_messages(broker, "shrink") == {q: 2 for q in range(8)}

    forced = pocketmq("topic", "update", "shrink", "--queues", "2", "--force", "-n", ns)
    assert forced.returncode == 0, forced.stderr
    assert queue_messages(broker, "shrink") == {0: 2, 1: 2}


def test_update_changes_only_the_options_given(broker):
    ns = broker.namesrv
    created = pocketmq("topic", "create", "t4", "--queues", "4", "--gray-queue-ratio", "0.25", "-n", ns)
    assert created.returncode == 0, created.stderr
    updated = pocketmq("topic", "update", "t4", "--type", "fifo", "-n", ns)
    assert updated.returncode == 0, updated.stderr
    assert updated.stdout.strip() == "topic t4 updated on broker-t: type FIFO"
    config = topic_config(broker, "t4")
    assert (config["readQueueNums"], config["writeQueueNums"]) == (4, 4)
    assert config["attributes"] == {"message.type": "FIFO", "gray.queue.ratio": "0.25"}

    more = pocketmq("topic", "update", "t4", "--queues", "6", "--json", "-n", ns)
    assert json_lines(more.stdout) == [{"topic": "t4", "brokers": ["broker-t"], "queues": 6}]
    config = topic_config(broker, "t4")
    assert (config["readQueueNums"], config["attributes"]["message.type"]) == (6, "FIFO")

    redefined = pocketmq("topic", "create", "t4", "--queues", "6", "--update", "-n", ns)
    assert redefined.returncode == 0 and "created or updated" in redefined.stdout, redefined
    assert topic_config(broker, "t4")["attributes"]["message.type"] == "MIXED"  # create's full definition


def test_update_of_an_unknown_topic_or_with_nothing_to_change_is_refused(broker):
    ns = broker.namesrv
    missing = pocketmq("topic", "update", "never_made", "--type", "fifo", "-n", ns)
    assert refused(missing, "topic 'never_made' does not exist"), missing
    listed = {row["topic"] for row in json_lines(pocketmq("topic", "list", "--json", "-n", ns).stdout)}
    assert "never_made" not in listed
    nothing = pocketmq("topic", "update", "shrink", "-n", ns)
    assert nothing.returncode == 2 and "error: nothing to update" in nothing.stderr.splitlines()[-1], nothing
    assert refused(pocketmq("topic", "create", "other", "--force", "-n", ns), "use it with update")
