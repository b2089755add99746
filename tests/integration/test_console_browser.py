"""The web console in a real headless Chromium against a real cluster (a name server and a broker serving the
console) with real traffic: each page shows what the CLI reports and updates itself without a reload; an offset
reset from the group page is followed by an online push consumer; a dead letter resent from its page is consumed
by that group only; with access control on, the login decides what a page shows and what it refuses.

One browser and one cluster serve the whole module (each takes seconds to start). With ``POCKETMQ_SCREENSHOTS=DIR``
(``make screenshots``: docs/img) every page is saved as a picture on the way."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.alert import Alert
from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select
from tests.integration.test_console import call, cli_json
from tests.integration.test_console_acl import BOB, BOB_SECRET, ROOT, ROOT_SECRET, basic
from tests.integration.test_console_acl import broker as console_acl_broker  # noqa: F401 (a fixture)

from pocketmq.client import ClientConfig, Message, Producer
from pocketmq.client.listener import ConsumeConcurrentlyStatus
from pocketmq.client.push_consumer import ConsumeFromWhere, PushConsumer, PushConsumerOptions
from pocketmq.testing.browser import SCREENSHOTS_ENV, browser_or_skip, headless_browser, screenshot, send_header
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import FAST_DELAY_LEVEL_ARGS, broker_process, namesrv_process, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PAGE_TIMEOUT_S = 20.0
# Every row of table `arguments[0]` as {"key": its data-key, field: text of the cell of that data-field}, read in
# one call: htmx swaps the live blocks every few seconds, so elements found earlier may be gone.
READ_TABLE_JS = """
const table = document.getElementById(arguments[0]);
if (!table) return null;
return Array.from(table.querySelectorAll("tbody tr")).map((tr) => Object.assign({key: tr.dataset.key},
  Object.fromEntries(Array.from(tr.querySelectorAll("td[data-field]")).map((td) => [td.dataset.field, td.textContent]))));
"""

# The status, challenge and text the console answers a request of the page that carries no login.
NO_LOGIN_FETCH_JS = """
const done = arguments[arguments.length - 1];
fetch(arguments[0], {credentials: "omit"}).then(async (r) =>
  done({status: r.status, challenge: r.headers.get("WWW-Authenticate") || "", text: await r.text()}));
"""

# Whether every chart of the page has a line (two samples or more), not a lone first point.
CHARTS_DRAWN_JS = """
return Array.from(document.querySelectorAll("figure.chart")).every((chart) => {
  const line = chart.querySelector("polyline");
  return line !== null && line.getAttribute("points").trim().split(" ").length >= 2;
});
"""


@pytest.fixture(scope="module")
def browser():
    browser_or_skip()
    with headless_browser() as driver:
        yield driver


@dataclass(frozen=True)
class Cluster:
    namesrv: str
    console: str  # the URL of the broker's console


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("console-browser")
    namesrv = namesrv_process(workdir / "namesrv").start()
    broker = broker_process(
        workdir / "broker",
        "broker-web",
        namesrv=namesrv.namesrv,
        extra_args=["--console-port", "0", *FAST_DELAY_LEVEL_ARGS],
    ).start()
    yield Cluster(namesrv.namesrv, broker.address("console"))
    assert broker.stop() == 0, broker.log_tail()
    assert namesrv.stop() == 0, namesrv.log_tail()


def cli(cluster: Cluster, *args: str) -> None:
    done = run_cli(*args, namesrv=cluster.namesrv)
    assert done.returncode == 0, done.stderr


def api(cluster: Cluster, path: str, method: str = "GET", body: object = None) -> object:
    """The answer of a console API request that succeeded (set-up and polls: cheaper than a CLI process)."""
    status, answer = call(cluster.console + path, method, body)
    assert status < 300, (path, status, answer)
    return answer


def create_topic(cluster: Cluster, topic: str, queues: int) -> None:
    api(cluster, "/api/topics", "POST", {"topic": topic, "queues": queues})


def client_config(cluster: Cluster, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=cluster.namesrv, instance_name=name)


def send(cluster: Cluster, topic: str, bodies: list[str], keys: str | None = None) -> list[str]:
    with Producer(client_config(cluster, f"web-p-{topic}")) as producer:
        return [producer.send(Message.create(topic, body, keys=keys)).msg_id for body in bodies]


class Recorder:
    """A push consumer's deliveries (body -> times seen); it fails them while ``failing`` is set."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.failing = threading.Event()

    def __call__(self, msgs, ctx):
        for msg in msgs:
            self.seen[msg.body.decode()] += 1
        failed = self.failing.is_set()
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if failed else ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def push_consumer(cluster: Cluster, group: str, topic: str, recorder: Recorder) -> PushConsumer:
    options = PushConsumerOptions(
        group, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, persist_interval_ms=200, long_poll_ms=500
    )
    consumer = PushConsumer(options, client_config(cluster, f"web-{group}"))
    consumer.subscribe(topic)
    consumer.register_listener(recorder)
    consumer.start()
    return consumer


def open_page(driver, cluster: Cluster, path: str) -> None:
    driver.get(cluster.console + path)


def table_rows(driver, table_id: str) -> dict[str, dict[str, str]]:
    """The rows of ``table_id`` by their key, once the table is on the page and has a row."""
    rows = wait_until(lambda: driver.execute_script(READ_TABLE_JS, table_id), PAGE_TIMEOUT_S, f"a row in #{table_id}")
    return {row["key"]: row for row in rows}


def attribute(driver, css: str, name: str) -> str:
    """Attribute ``name`` of the first element ``css`` selects, once there is one."""
    script = "const el = document.querySelector(arguments[0]); return el && el.getAttribute(arguments[1]);"
    return wait_until(lambda: driver.execute_script(script, css, name), PAGE_TIMEOUT_S, f"{css}[{name}]")


def submit(driver, form_id: str, fields: dict[str, str], *, confirm: bool) -> tuple[int, str]:
    """Fill and send form ``form_id`` (accepting its confirmation): the status and text of its result."""
    for name, value in fields.items():
        element = driver.find_element(By.ID, f"{form_id}-{name}")
        if element.tag_name == "select":
            Select(element).select_by_visible_text(value)
        else:
            element.clear()
            element.send_keys(value)
    driver.find_element(By.ID, f"{form_id}-submit").click()
    if confirm:
        wait_until(lambda: _alert(driver), PAGE_TIMEOUT_S, "the confirmation").accept()
    status = attribute(driver, f"#{form_id}-result", "data-status")
    return int(status), driver.find_element(By.ID, f"{form_id}-result").text


def picture(driver, name: str) -> None:
    """The page's picture for docs/ (only when ``POCKETMQ_SCREENSHOTS`` asks for them), once its charts have
    lines: the live blocks poll every 5 s, so a chart gets its second point a poll or two after the page opens."""
    if os.environ.get(SCREENSHOTS_ENV):
        wait_until(lambda: driver.execute_script(CHARTS_DRAWN_JS), 30, f"the charts of {name} drawn")
    screenshot(driver, name)


def _alert(driver) -> Alert | None:
    try:
        return driver.switch_to.alert  # raises while no dialog is open
    except NoAlertPresentException:
        return None


def test_cluster_page_matches_the_cli_and_updates_itself(cluster, browser):
    open_page(browser, cluster, "/cluster")
    [row] = table_rows(browser, "brokers").values()
    [status] = cli_json(cluster, "broker", "status")
    assert (row["broker"], row["address"], row["role"], row["version"]) == (
        status["broker"], status["address"], status["role"], status["version"]
    )  # fmt: skip
    put_before = int(row["put"])
    create_topic(cluster, "web_live", 2)
    send(cluster, "web_live", [f"live-{i}" for i in range(5)])
    # no reload: the next poll shows the new count and draws the rate from two samples
    wait_until(
        lambda: int(table_rows(browser, "brokers")[row["key"]]["put"]) >= put_before + 5,
        PAGE_TIMEOUT_S,
        "the put count updated in place",
    )
    assert float(attribute(browser, "#produce-rate .legend", "data-latest")) >= 0
    picture(browser, "console-cluster")


def test_topics_pages_match_the_cli_and_create_a_topic(cluster, browser):
    create_topic(cluster, "web_orders", 3)
    send(cluster, "web_orders", [f"order-{i}" for i in range(9)])
    open_page(browser, cluster, "/topics")
    listed = table_rows(browser, "topics")
    cli_topics = {r["topic"] for r in cli_json(cluster, "topic", "list")}
    assert set(listed) == cli_topics and int(attribute(browser, "#topic-count", "data-count")) == len(cli_topics)
    assert (listed["web_orders"]["queues"], listed["web_orders"]["brokers"]) == ("3", "broker-web")

    status, text = submit(browser, "topic-create", {"name": "web_created", "queues": "2"}, confirm=False)
    assert status == 201, text
    assert "web_created" in {r["topic"] for r in cli_json(cluster, "topic", "list")}
    wait_until(lambda: "web_created" in table_rows(browser, "topics"), PAGE_TIMEOUT_S, "the new topic listed")
    picture(browser, "console-topics")

    browser.find_element(By.LINK_TEXT, "web_orders").click()
    queues = table_rows(browser, "queues")
    described = cli_json(cluster, "topic", "describe", "web_orders")
    assert {(r["queue_id"], r["min_offset"], r["max_offset"]) for r in queues.values()} == {
        (str(r["queue_id"]), str(r["min_offset"]), str(r["max_offset"])) for r in described
    }
    assert int(attribute(browser, "#topic-summary", "data-messages")) == sum(r["max_offset"] for r in described) == 9
    picture(browser, "console-topic")


def test_group_page_matches_the_cli_and_a_reset_is_followed_by_the_consumer(cluster, browser):
    create_topic(cluster, "web_replay", 2)
    before_ms = int(time.time() * 1000)
    bodies = [f"replay-{i}" for i in range(6)]
    send(cluster, "web_replay", bodies)
    recorder = Recorder()
    consumer = push_consumer(cluster, "web-app", "web_replay", recorder)
    try:
        wait_until(lambda: all(recorder.seen[b] >= 1 for b in bodies), PAGE_TIMEOUT_S, "every message consumed")

        wait_until(
            lambda: api(cluster, "/api/groups/web-app?topic=web_replay")["totals"]["lag"] == 0,
            PAGE_TIMEOUT_S,
            "the offsets committed",
        )
        offsets = [r for r in cli_json(cluster, "group", "describe", "web-app") if "consumer_offset" in r]
        open_page(browser, cluster, "/groups")
        assert "web-app" in table_rows(browser, "groups")
        picture(browser, "console-groups")

        browser.find_element(By.LINK_TEXT, "web-app").click()
        [client] = table_rows(browser, "consumers").values()
        assert client["client_id"].endswith("@web-web-app") and "web_replay:*" in client["subscriptions"].split()
        shown = {(r["queue_id"], r["consumer_offset"], r["lag"]) for r in table_rows(browser, "offsets").values()}
        assert shown == {(str(r["queue_id"]), str(r["consumer_offset"]), "0") for r in offsets}
        assert attribute(browser, '#group-totals [data-total="consumers"]', "data-value") == "1"

        # back to before the first send: the online consumer is told and takes every message again
        status, text = submit(browser, "group-reset", {"topic": "web_replay", "time": str(before_ms)}, confirm=True)
        assert status == 200, text
        wait_until(lambda: all(recorder.seen[b] >= 2 for b in bodies), 30, "every message consumed again")
        picture(browser, "console-group")
    finally:
        consumer.shutdown()


def test_messages_page_finds_what_the_cli_finds_and_shows_a_body(cluster, browser):
    create_topic(cluster, "web_pay", 2)
    [msg_id] = send(cluster, "web_pay", ['{"amount": 42}'], keys="pay-42")
    open_page(browser, cluster, "/messages")
    submit_search = {"topic": "web_pay", "key": "pay-42"}
    for name, value in submit_search.items():
        browser.find_element(By.ID, f"message-search-{name}").send_keys(value)
    browser.find_element(By.ID, "message-search-submit").click()
    found = table_rows(browser, "messages")
    cli_found = cli_json(cluster, "message", "query", "web_pay", "--key", "pay-42")
    assert set(found) == {m["message_id"] for m in cli_found} == {msg_id}
    assert found[msg_id]["keys"] == "pay-42"
    picture(browser, "console-messages")

    browser.find_element(By.LINK_TEXT, msg_id).click()
    assert attribute(browser, "#message-body", "data-format") == "json"
    assert browser.find_element(By.ID, "message-body").text == '{\n  "amount": 42\n}'
    fields = browser.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('#message-fields td'))"
        ".map((td) => [td.dataset.field, td.textContent]));"
    )
    [shown] = cli_json(cluster, "message", "show", msg_id, "--topic", "web_pay")
    assert (fields["message_id"], fields["queue_id"], fields["queue_offset"]) == (
        shown["message_id"], str(shown["queue_id"]), str(shown["queue_offset"])
    )  # fmt: skip
    attribute(browser, "#trace", "id")  # the trace block loaded
    picture(browser, "console-message")


def test_a_dead_letter_resent_from_its_page_is_consumed_by_that_group_only(cluster, browser):
    create_topic(cluster, "web_jobs", 1)
    cli(cluster, "group", "create", "web-fail", "--retry-max-times", "1")
    failing, other = Recorder(), Recorder()
    failing.failing.set()  # retried once, then dead-lettered
    consumers = [
        push_consumer(cluster, "web-fail", "web_jobs", failing),
        push_consumer(cluster, "web-ok", "web_jobs", other),
    ]
    try:
        send(cluster, "web_jobs", ["job-1"])
        wait_until(lambda: api(cluster, "/api/dead-letters/web-fail")["messages"], 30, "the message dead-lettered")
        [dead] = cli_json(cluster, "dlq", "list", "web-fail")
        wait_until(lambda: other.seen["job-1"] == 1, PAGE_TIMEOUT_S, "web-ok consumed it")
        failing.failing.clear()
        seen_before = failing.seen["job-1"]

        open_page(browser, cluster, "/dead-letters")
        browser.find_element(By.ID, "dead-letters-group").send_keys("web-fail")
        browser.find_element(By.ID, "dead-letters-submit").click()
        rows = table_rows(browser, "dead-letters")
        assert set(rows) == {dead["message_id"]} and rows[dead["message_id"]]["origin_topic"] == "web_jobs"
        assert attribute(browser, "#dead-count", "data-count") == "1"
        picture(browser, "console-dead-letters")

        status, text = submit(browser, f"resend-{dead['message_id']}", {}, confirm=True)
        assert status == 200 and "%RETRY%web-fail" in text, text
        wait_until(lambda: failing.seen["job-1"] > seen_before, 30, "web-fail consumed the resent message")
        # web-ok reads web_jobs, not web-fail's retry topic: it got the message once, when it was first sent
        assert other.seen["job-1"] == 1
        [dead_after] = cli_json(cluster, "dlq", "list", "web-fail")  # the dead letter stays
        assert dead_after["message_id"] == dead["message_id"]
    finally:
        for consumer in consumers:
            consumer.shutdown()


def test_config_page_shows_and_changes_a_setting(cluster, browser):
    [before] = cli_json(cluster, "config", "get", "default_topic_queue_nums")
    open_page(browser, cluster, "/config")
    settings = config_settings(browser)
    assert settings[before["key"]] == before["value"]
    status, text = submit(browser, "config-set", {"key": "default_topic_queue_nums", "value": "6"}, confirm=True)
    assert status == 200, text
    [after] = cli_json(cluster, "config", "get", "default_topic_queue_nums")
    assert after["value"] == "6" != before["value"]
    open_page(browser, cluster, "/config")
    assert config_settings(browser)[before["key"]] == "6"
    picture(browser, "console-config")


def config_settings(driver) -> dict[str, str]:
    """The settings the config page shows for broker-web/0 (a key-value table: no head row)."""
    script = (
        "const t = document.getElementById('config-broker-web-0'); if (!t) return null;"
        "return Object.fromEntries(Array.from(t.querySelectorAll('tr')).map("
        "(tr) => [tr.dataset.key, tr.querySelector('td').textContent]));"
    )
    return wait_until(lambda: driver.execute_script(script), PAGE_TIMEOUT_S, "the settings of broker-web/0")


# -- access control -----------------------------------------------------------------------------------------------
@pytest.fixture
def acl_broker(console_acl_broker) -> Cluster:
    """test_console_acl's broker: access control on, root and bob (who may use acl_orders only)."""
    return Cluster(console_acl_broker.namesrv, console_acl_broker.address("console"))


def test_with_access_control_the_login_decides_what_a_page_shows_and_does(acl_broker, browser):
    try:
        # no login: the console answers the page's requests with a login challenge (a desktop browser shows its
        # login box; a headless one has none and leaves the request waiting on it, so the page asks without
        # credentials to see the answer; the messages page asks the brokers nothing until a search)
        open_page(browser, acl_broker, "/messages")
        answer = browser.execute_async_script(NO_LOGIN_FETCH_JS, "/fragments/cluster")
        assert answer["status"] == 401 and answer["challenge"].startswith("Basic"), answer
        assert "log in" in answer["text"]

        send_header(browser, "Authorization", basic(ROOT, ROOT_SECRET))
        open_page(browser, acl_broker, "/cluster")
        [root_row] = table_rows(browser, "brokers").values()
        assert root_row["key"] == "broker-cacl/0" and root_row["error"] == "-" and root_row["role"] == "ASYNC_MASTER"

        # bob may publish to and read acl_orders only: the broker's figures and the topic list are refused him,
        # acl_orders' page is shown, a change to it is refused
        send_header(browser, "Authorization", basic(BOB, BOB_SECRET))
        open_page(browser, acl_broker, "/cluster")
        assert "NO_PERMISSION" in table_rows(browser, "brokers")["broker-cacl/0"]["error"]
        open_page(browser, acl_broker, "/topics")
        assert attribute(browser, "#topics-live .refused", "data-status") == "403"
        picture(browser, "console-login-refused")
        open_page(browser, acl_broker, "/topics/acl_orders")
        assert int(attribute(browser, "#topic-summary", "data-queues")) == 2
        status, text = submit(browser, "topic-update", {"queues": "5"}, confirm=False)
        assert status == 403, text
        as_root = ("-n", acl_broker.namesrv, "--access-key", ROOT, "--secret-key", ROOT_SECRET)
        described = run_cli("topic", "describe", "acl_orders", "--json", *as_root)
        assert len(described.stdout.splitlines()) == 2, described.stderr  # still two queues
    finally:
        send_header(browser, "Authorization", None)
