"""Explicit topic creates and updates (UPDATE_AND_CREATE_TOPIC): what an update leaves out stays as it was,
create-only refuses an existing topic, update-only an unknown one, and fewer read queues that would hide stored
messages are refused unless forced (``topics.topic_change_refusal``, ``remoting_admin.topic_config_from_header``)."""

from __future__ import annotations

import pytest

from pocketmq.broker.topics import TopicManager, topic_change_refusal
from pocketmq.common.errors import BadRequestError, TopicNotExistError
from pocketmq.common.topic import PERM_READ, MessageType, TopicConfig
from pocketmq.protocol.remoting_headers import HeaderFields
from pocketmq.server.remoting_admin import topic_config_from_header

EIGHT = TopicConfig("t", 8, 8, message_type=MessageType.FIFO, gray_queue_ratio=0.25)


def refusal(current, requested, *, stored=None, create_only=False, update_only=False, force=False):
    stored = stored or {}
    return topic_change_refusal(
        current,
        requested,
        create_only=create_only,
        update_only=update_only,
        force=force,
        stored_messages=lambda queue_id: stored.get(queue_id, 0),
        broker_name="broker-a",
    )


def test_an_update_changes_only_the_fields_it_names():
    def update(**fields):
        return topic_config_from_header(HeaderFields({"topic": "t", **fields}), current=EIGHT, default_queue_nums=4)

    assert update(messageType="NORMAL") == TopicConfig(
        "t", 8, 8, message_type=MessageType.NORMAL, gray_queue_ratio=0.25
    )
    assert update(readQueueNums="16", writeQueueNums="16") == TopicConfig(
        "t", 16, 16, message_type=MessageType.FIFO, gray_queue_ratio=0.25
    )
    assert update(writeQueueNums="2") == TopicConfig("t", 8, 2, message_type=MessageType.FIFO, gray_queue_ratio=0.25)
    assert update(perm=str(PERM_READ)).perm == PERM_READ
    assert update(attributes="+gray.queue.ratio=0") == TopicConfig(
        "t", 8, 8, message_type=MessageType.FIFO, gray_queue_ratio=0.0
    )
    new = topic_config_from_header(
        HeaderFields({"topic": "n", "readQueueNums": "3"}), current=None, default_queue_nums=4
    )
    assert new == TopicConfig("n", 3, 3)  # a new topic: defaults, write queues as many as read queues


def test_create_only_refuses_an_existing_topic_and_update_only_an_unknown_one():
    exists = refusal(EIGHT, TopicConfig("t", 2, 2), create_only=True)
    assert isinstance(exists, BadRequestError) and "'t' already exists on broker broker-a" in str(exists)
    assert refusal(None, TopicConfig("t", 2, 2), create_only=True) is None
    missing = refusal(None, TopicConfig("t", 2, 2), update_only=True)
    assert isinstance(missing, TopicNotExistError) and "does not exist on broker broker-a" in str(missing)
    assert refusal(EIGHT, TopicConfig("t", 16, 16), update_only=True) is None
    assert isinstance(refusal(EIGHT, EIGHT, create_only=True, update_only=True), BadRequestError)


@pytest.mark.parametrize("stored, refused", [({}, False), ({0: 5, 1: 5}, False), ({5: 1}, True), ({2: 3, 7: 4}, True)])
def test_fewer_read_queues_are_refused_only_when_the_dropped_ones_store_messages(stored, refused):
    shrink = TopicConfig("t", 2, 2)
    problem = refusal(EIGHT, shrink, stored=stored)
    assert (problem is not None) == refused
    if refused:
        assert isinstance(problem, BadRequestError)
        assert f"8 -> 2 read queues would hide {sum(stored.values())} messages" in str(problem)
        assert refusal(EIGHT, shrink, stored=stored, force=True) is None
    # fewer write queues hide nothing: RocketMQ's way to drain queues before dropping them
    assert refusal(EIGHT, TopicConfig("t", 8, 2), stored={5: 9}) is None


def test_a_refused_change_leaves_the_table_as_it_was(tmp_path):
    topics = TopicManager(tmp_path / "topics.json", auto_create_enabled=False, default_queue_nums=8)
    topics.create_or_update(EIGHT)
    version = topics.data_version

    def refuse(current):
        raise BadRequestError("no")

    with pytest.raises(BadRequestError):
        topics.change("t", refuse)
    assert topics.get("t") == EIGHT and topics.data_version == version


def test_the_table_file_reads_back_after_creates_updates_and_deletes_and_tells_which_topic_changed(tmp_path):
    path = tmp_path / "topics.json"
    topics = TopicManager(path, auto_create_enabled=False, default_queue_nums=8)
    told = []
    topics.add_listener(told.append)
    topics.create_or_update(EIGHT)
    topics.create_or_update(TopicConfig("q%u|oted", 2, 2))
    topics.create_or_update(TopicConfig("gone", 1, 1))
    topics.change("t", lambda current: TopicConfig("t", 4, 4, perm=PERM_READ))  # its piece of the file re-made
    topics.delete("gone")

    reloaded = TopicManager(path, auto_create_enabled=False, default_queue_nums=8)
    reloaded.load()
    assert reloaded.all() == topics.all()
    assert reloaded.get("t") == TopicConfig("t", 4, 4, perm=PERM_READ) and reloaded.get("gone") is None
    assert reloaded.data_version == topics.data_version == 5
    assert told == ["t", "q%u|oted", "gone", "t", "gone"]
