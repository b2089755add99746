"""Option validation: client config, producer options, pull arguments and the CLI's arguments, each refused
with a message that names the problem."""

from __future__ import annotations

import pytest

from pocketmq.cli.main import build_parser
from pocketmq.cli.send_cmd import messages_of
from pocketmq.cli.tail_cmd import check_args
from pocketmq.client.config import ClientConfig
from pocketmq.client.producer import ProducerOptions
from pocketmq.client.pull_consumer import AsyncPullConsumer
from pocketmq.client.push_consumer import AsyncPushConsumer, PushConsumerOptions
from pocketmq.common.errors import BadRequestError, ClientError, ConfigError, IllegalTopicError


def test_client_config_reports_every_problem_at_once():
    with pytest.raises(ConfigError) as info:
        ClientConfig(
            namesrv_addr="nohost;1.2.3.4:99999", instance_name="a@b", request_timeout_s=0, sync_reply_busy_poll_us=-1
        )
    text = str(info.value)
    for part in ("'nohost'", "'1.2.3.4:99999'", "instance_name", "request_timeout_s", "sync_reply_busy_poll_us"):
        assert part in text


def test_client_config_takes_several_name_servers_and_the_environment(monkeypatch):
    assert ClientConfig(namesrv_addr="a:1; b:2").namesrv_addrs == ["a:1", "b:2"]
    monkeypatch.setenv("POCKETMQ_NAMESRV", "10.0.0.9:9876")
    assert ClientConfig().namesrv_addr == "10.0.0.9:9876"


def test_producer_options_refuse_bad_groups_and_retries():
    with pytest.raises(ClientError, match="group"):
        ProducerOptions(group="bad group")
    with pytest.raises(ClientError):
        ProducerOptions(retry_times_when_send_failed=-1)
    for bad_batch in (
        {"auto_batch_max_messages": 0},
        {"auto_batch_max_bytes": 0},
        {"auto_batch_max_bytes": 3 * 1024 * 1024},
    ):  # over half of the 4 MiB message limit
        with pytest.raises(ClientError, match="auto_batch"):
            ProducerOptions(auto_batch=True, **bad_batch)


def test_pull_consumer_refuses_a_bad_group():
    with pytest.raises(ClientError, match="consumer group"):
        AsyncPullConsumer("no spaces allowed", ClientConfig(namesrv_addr="127.0.0.1:1"))


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_send_arguments_become_messages():
    args = parse(
        "send",
        "orders",
        "--body",
        "hi",
        "--tag",
        "t",
        "--keys",
        "k1 k2",
        "--property",
        "a=b=c",
        "--property",
        "x=",
        "--count",
        "3",
    )
    msgs = messages_of(args)
    assert [m.body for m in msgs] == [b"hi-0", b"hi-1", b"hi-2"]
    assert all(m.tags == "t" and m.keys == ["k1", "k2"] and m.user_properties() == {"a": "b=c", "x": ""} for m in msgs)
    assert [m.body for m in messages_of(parse("send", "orders", "--body", "one"))] == [b"one"]


@pytest.mark.parametrize(
    "argv, error, text",
    [
        (["send", "bad topic"], IllegalTopicError, "characters"),
        (["send", "t", "--count", "0"], BadRequestError, "--count"),
        (["send", "t", "--property", "novalue"], BadRequestError, "KEY=VALUE"),
        (["send", "t", "--property", "UNIQ_KEY=x"], BadRequestError, "system property"),
    ],
)
def test_bad_send_arguments_are_refused(argv, error, text):
    with pytest.raises(error, match=text):
        messages_of(parse(*argv))


@pytest.mark.parametrize("argv", [["tail", "t", "--max", "0"], ["tail", "t", "--timeout", "-1"]])
def test_bad_tail_arguments_are_refused(argv):
    with pytest.raises(BadRequestError):
        check_args(parse(*argv))


def test_every_client_command_takes_the_namesrv_option():
    for argv in (
        ["send", "t"],
        ["tail", "t"],
        ["cluster"],
        ["topic", "list"],
        ["topic", "create", "t"],
        ["topic", "describe", "t"],
        ["topic", "delete", "t"],
        ["group", "list"],
        ["group", "create", "g"],
        ["group", "describe", "g"],
    ):
        assert parse(*argv, "-n", "10.0.0.1:9876").namesrv == "10.0.0.1:9876"


def test_topic_type_is_one_of_the_message_types():
    assert parse("topic", "create", "t", "--type", "fifo").message_type == "fifo"
    with pytest.raises(SystemExit):
        parse("topic", "create", "t", "--type", "weird")


async def test_a_push_consumer_not_started_says_so():
    consumer = AsyncPushConsumer(PushConsumerOptions("orders-group"))
    consumer.subscribe("orders")
    with pytest.raises(ClientError, match="not started"):
        await consumer.rebalance()  # was an AttributeError on its heartbeat entry
    for read in (lambda: consumer.offset_store, lambda: consumer.consume_service, lambda: consumer.instance):
        with pytest.raises(ClientError, match="not started"):
            read()
