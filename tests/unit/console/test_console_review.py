"""Bugs found in review of the console: each test pins what the docs promise."""

from __future__ import annotations

from pocketmq.common.dead_letter_reference import DeadLetterReference
from pocketmq.common.message import MessageExt
from pocketmq.console import pages
from pocketmq.console.errors import status_of
from pocketmq.console.html import table
from pocketmq.ops.message_query import MessageNotFoundError


def test_a_message_that_does_not_exist_is_a_404():
    assert status_of(MessageNotFoundError("no message X of topic t")) == 404


def test_links_carry_the_value_url_quoted():
    html = table("t", ["topic"], [{"topic": "a%20b"}], row_key="topic", links={"topic": "/topics/{value}"})
    assert 'href="/topics/a%2520b"' in html


def test_a_row_renders_only_the_start_of_a_large_body(monkeypatch):
    seen: list[int] = []
    real = pages.body_text

    def spy(body: bytes) -> tuple[str, str]:
        seen.append(len(body))
        return real(body)

    monkeypatch.setattr(pages, "body_text", spy)
    assert pages.row_body(bytes(range(256)) * 16_384).startswith("00000000  00 01 02")
    assert pages.row_body(("x" + "é" * 3000).encode()) == "x" + "é" * (pages.ROW_BODY_CHARS - 1)  # a cut character
    assert pages.row_body(b'{"a": 1}') == '{\n  "a": 1\n}'
    assert max(seen) <= pages.ROW_BODY_BYTES


def test_dead_letter_rows_show_a_reference_as_one():
    ref = DeadLetterReference("orders", 1, 7, "broker-b", "g", "unreachable")
    entry = MessageExt(topic="%DLQ%g", body=ref.to_json(), properties=ref.properties())
    real = MessageExt(topic="%DLQ%g", body=b"hello", properties={"RETRY_TOPIC": "orders"})
    rows = pages.dead_letter_rows([("broker-a", entry), ("broker-a", real)])
    assert [(r["kind"], r["origin_topic"]) for r in rows] == [("reference", "orders"), ("message", "orders")]
    assert rows[0]["body"] == ref.describe()[: pages.ROW_BODY_CHARS] and rows[1]["body"] == "hello"


def test_a_message_view_renders_its_body_once(monkeypatch):
    from pocketmq.console import api_messages
    from pocketmq.ops import message_json

    dumped: list[int] = []
    real = message_json.hex_dump
    monkeypatch.setattr(message_json, "hex_dump", lambda data: dumped.append(len(data)) or real(data))
    view = api_messages.message_view(MessageExt(topic="t", body=bytes(range(256)) * 64), "broker-a")
    assert view["body_format"] == "hex" and view["body_view"].startswith("00000000  00 01 02")
    assert dumped == [256 * 64]
    assert message_json.body_text(b"ok\x7f") == ("hex", "00000000  6f 6b 7f" + " " * 39 + "  ok.")


async def test_each_login_signs_with_its_own_client_instance_after_the_oldest_is_dropped(monkeypatch):
    from pocketmq.client.config import ClientConfig
    from pocketmq.console import admins

    async def any_login(admin, user):
        return None

    monkeypatch.setattr(admins, "MAX_ADMINS", 2)
    monkeypatch.setattr(admins, "_check_login", any_login)
    pool = admins.AdminPool(ClientConfig(namesrv_addr="127.0.0.1:1", instance_name="console"))
    try:
        for user in ("alice", "bob", "carol"):  # carol's login drops alice's client
            admin = await pool.admin((user, f"{user}-secret"))
            assert admin.instance.config.access_key == user
        assert (await pool.admin(("bob", "bob-secret"))).instance.config.access_key == "bob"
    finally:
        await pool.close()


def test_a_key_file_without_a_certificate_is_refused_rather_than_serving_plain_http():
    import pytest

    from pocketmq.cli.console_cmd import https_context
    from pocketmq.common.errors import ConfigError

    assert https_context(None, None) is None
    with pytest.raises(ConfigError, match="--https-cert-file"):
        https_context(None, "console-key.pem")


def test_a_broker_that_refuses_its_settings_is_said_in_its_place_on_the_config_page():
    from pocketmq.client.admin import BrokerAddress
    from pocketmq.common.errors import AccessDeniedError, RemotingTimeoutError

    up = pages.broker_settings_html(BrokerAddress("b", 0, "h:1"), {"flushDiskType": "<ASYNC>"})
    assert '<table id="config-b-0">' in up and "&lt;ASYNC&gt;" in up
    down = pages.broker_settings_html(BrokerAddress("b", 1, "h:2"), RemotingTimeoutError("slave <b> slow"))
    assert '<p class="refused" data-status="502">' in down and "slave &lt;b&gt; slow" in down
    refused = pages.broker_settings_html(BrokerAddress("b", 0, "h:1"), AccessDeniedError("no matched policies"))
    assert 'data-status="403"' in refused


async def test_one_dead_letter_is_found_without_holding_the_whole_dead_letter_queue(monkeypatch):
    from types import SimpleNamespace

    from pocketmq.client.pull_consumer import PullResult, PullStatus
    from pocketmq.common.message import MessageQueue
    from pocketmq.console import api_dead_letters
    from pocketmq.ops import dead_letters

    stored = 5_000
    pulled: list[int] = []

    class Reader:
        def __init__(self, *args, **kwargs):
            pass

        async def start(self):
            pass

        async def shutdown(self):
            pass

        async def pull(self, queue, offset, max_nums):
            if queue.topic != "%DLQ%g":
                return PullResult(PullStatus.NO_NEW_MSG, offset, 0, 0)
            batch = [
                MessageExt(topic=queue.topic, body=b"x" * 1000, queue_offset=o, properties={"UNIQ_KEY": f"id-{o}"})
                for o in range(offset, min(offset + max_nums, stored))
            ]
            pulled.append(len(batch))
            return PullResult(PullStatus.FOUND, offset + len(batch), 0, stored, batch)

    async def offsets(admin, topic, group=None):
        return [dead_letters.QueueOffsets(MessageQueue(topic, "b", 0), 0, stored, None)]

    monkeypatch.setattr(dead_letters, "AsyncPullConsumer", Reader)
    monkeypatch.setattr(dead_letters, "group_topic_offsets", offsets)
    admin = SimpleNamespace(config=None, instance=None, namespace=SimpleNamespace(wrap=lambda name: name))

    async def admin_of(request):
        return admin

    monkeypatch.setattr(api_dead_letters, "admin_of", admin_of)
    request = SimpleNamespace(match_info={"group": "g", "msg_id": "id-100"})
    broker, msg = await api_dead_letters._dead_letter(request)
    assert (broker, msg.queue_offset) == ("b", 100)
    assert sum(pulled) <= 200  # read up to the match, not the whole queue


def test_a_login_is_read_in_the_utf8_the_console_asks_browsers_for():
    import base64

    from aiohttp import web
    from aiohttp.test_utils import make_mocked_request

    from pocketmq.console.errors import REALM_HEADER
    from pocketmq.console.login import LOGIN_REQUIRED_KEY, credentials

    assert 'charset="UTF-8"' in REALM_HEADER["WWW-Authenticate"]
    app = web.Application()
    app[LOGIN_REQUIRED_KEY] = True
    token = base64.b64encode("bob:pässwörd".encode()).decode()
    request = make_mocked_request("GET", "/api/cluster", headers={"Authorization": f"Basic {token}"}, app=app)
    assert credentials(request) == ("bob", "pässwörd")
