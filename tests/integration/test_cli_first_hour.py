"""The first hour of a new user, from real processes: errors that say what is wrong and which flag changes it
(one line on stderr, exit status 1), reads that create nothing, and the shell around the commands."""

from __future__ import annotations

import base64
import json
import os
import pty
import signal
import socket
import subprocess
import sys
import time

import pytest

import pocketmq
import pocketmq.cli.topic_cmd  # imported ahead: a timed command does not pay for it
from pocketmq.cli.main import main as pocketmq_main
from pocketmq.cli.output import CLI_CONNECT_TIMEOUT_S
from pocketmq.client import ClientConfig, Message, Producer
from pocketmq.common import properties as props
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process, run_cli

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(tmp_path_factory.mktemp("cli-errors"), "broker-e", extra_args=["--metrics-port", "0"])
    proc.start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


@pytest.fixture
def taken_port():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def error_line(result) -> str:
    """The error a server command ended with (its log lines come before it), never a traceback."""
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("flag, what", [("--port", "gRPC"), ("--remoting-port", "remoting")])
def test_a_port_in_use_is_one_line_naming_its_flag(tmp_path, taken_port, flag, what):
    ports = {"--remoting-port": "0", "--port": "0", "--namesrv-port": "0", flag: str(taken_port)}
    argv = ["serve", "--data-dir", str(tmp_path / "data"), *(x for item in ports.items() for x in item)]
    line = error_line(run_cli(*argv))
    assert line == (
        f"pocketmq serve: error: cannot listen on 127.0.0.1:{taken_port} for {what}: address already in use "
        f"(stop what listens there or choose another port with {flag})"
    )


def test_a_name_server_port_in_use_names_port(taken_port):
    line = error_line(run_cli("namesrv", "--port", str(taken_port)))
    assert f"127.0.0.1:{taken_port} for the name server: address already in use" in line
    assert line.endswith("choose another port with --port)")


def test_pointing_n_at_a_brokers_remoting_port_names_its_name_server(broker):
    result = run_cli("topic", "list", "-n", broker.remoting)
    assert result.stderr == (
        f"pocketmq topic: error: {broker.remoting} is a broker's remoting port, not a name server; "
        f"its name server is {broker.namesrv} (-n {broker.namesrv})\n"
    )


@pytest.mark.parametrize("kind, says", [("grpc", "speaks HTTP/2"), ("metrics", "is an HTTP server")])
def test_pointing_n_at_a_grpc_or_http_port_says_what_it_is(broker, kind, says):
    addr = broker.address(kind)
    result = run_cli("cluster", "-n", addr)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"pocketmq cluster: error: {addr} {says}"), result.stderr
    assert "not a name server" in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_set_error_names_the_setting_and_no_python_message(tmp_path):
    result = run_cli("serve", "--data-dir", str(tmp_path / "data"), "--set", "foo=1", "--set", "remoting_port=ten")
    assert result.stderr == (
        "pocketmq serve: error: invalid configuration: --set foo: unknown setting 'foo'; "
        "--set remoting_port: remoting_port='ten': expected an integer\n"
    )


def topics(broker) -> set[str]:
    listed = run_cli("topic", "list", "--all", "--json", "-n", broker.namesrv)
    assert listed.returncode == 0, listed.stderr
    return {json.loads(line)["topic"] for line in listed.stdout.splitlines()}


def test_reads_never_create_and_tail_leaves_no_trace(broker):
    missing = run_cli("tail", "errors_never_made", "--timeout", "1", "-n", broker.namesrv)
    assert missing.stderr == (
        "pocketmq tail: error: topic 'errors_never_made' does not exist (no route on the name server)\n"
    )
    assert run_cli("topic", "create", "errors_tailed", "--queues", "1", "-n", broker.namesrv).returncode == 0
    assert run_cli("send", "errors_tailed", "--body", "b", "-n", broker.namesrv).returncode == 0
    tailed = run_cli("tail", "errors_tailed", "--from-beginning", "--max", "1", "--json", "-n", broker.namesrv)
    assert tailed.returncode == 0 and json.loads(tailed.stdout)["body"] == "b", tailed.stderr
    names = topics(broker)
    assert "errors_tailed" in names and "errors_never_made" not in names
    assert not {name for name in names if name.startswith(("%RETRY%", "%DLQ%"))}, names
    groups = run_cli("group", "list", "--json", "-n", broker.namesrv).stdout
    assert "TOOLS_CONSUMER" not in groups


def test_a_send_that_creates_its_topic_says_so_once(broker):
    sent = run_cli("send", "errors_auto", "--count", "2", "--json", "-n", broker.namesrv)
    assert sent.returncode == 0 and len(sent.stdout.splitlines()) == 2
    assert sent.stderr == (
        "pocketmq send: note: topic errors_auto did not exist and was created with the broker's defaults "
        "(auto_create_topic_enable); `pocketmq topic create` chooses queues and type\n"
    )
    again = run_cli("send", "errors_auto", "-n", broker.namesrv)
    assert again.returncode == 0 and again.stderr == ""


@pytest.fixture(scope="module")
def named(broker):
    """A topic and a group that exist, for the commands that name one of each."""
    assert run_cli("topic", "create", "first_named", "--queues", "1", "-n", broker.namesrv).returncode == 0
    assert run_cli("group", "create", "first-named", "-n", broker.namesrv).returncode == 0


TOPIC_ABSENT = "topic 'errors_absent' does not exist"
GROUP_ABSENT = "subscription group 'errors-absent' does not exist"


@pytest.mark.parametrize(
    "argv, error",
    [
        (["topic", "delete", "errors_absent"], TOPIC_ABSENT),
        (["topic", "update", "errors_absent", "--queues", "2"], TOPIC_ABSENT),
        (["topic", "describe", "errors_absent"], TOPIC_ABSENT),
        (["topic", "route", "errors_absent"], TOPIC_ABSENT),
        (["tail", "errors_absent", "--timeout", "1"], TOPIC_ABSENT),
        (["message", "query", "errors_absent", "--key", "k"], TOPIC_ABSENT),
        (["group", "describe", "first-named", "--topic", "errors_absent"], TOPIC_ABSENT),
        (["transaction", "resume", "--all", "--topic", "errors_absent"], TOPIC_ABSENT),
        (["group", "describe", "errors-absent"], GROUP_ABSENT),
        (["group", "consumers", "errors-absent"], GROUP_ABSENT),
        (["group", "reset-offset", "errors-absent", "first_named", "--to-latest"], GROUP_ABSENT),
        (["message", "consume-directly", "0A", "--group", "errors-absent", "--client", "c"], GROUP_ABSENT),
        (["dlq", "list", "errors-absent"], GROUP_ABSENT),
        (["dlq", "resend", "errors-absent", "--all"], GROUP_ABSENT),
        (["retry", "stats", "errors-absent"], GROUP_ABSENT),
    ],
)
def test_not_found_is_one_error_line_and_exit_1_for_every_command(broker, named, capsys, argv, error):
    status = pocketmq_main([*argv, "-n", broker.namesrv])  # in this process: fifteen process starts are slow
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert err.startswith(f"pocketmq {argv[0]}: error: {error}") and len(err.splitlines()) == 1, err
    assert not {"errors_absent", "%RETRY%errors-absent", "%DLQ%errors-absent"} & topics(broker)


def test_send_reads_the_body_from_stdin_or_a_file(broker, tmp_path):
    assert run_cli("topic", "create", "first_bodies", "--queues", "1", "-n", broker.namesrv).returncode == 0
    piped = run_cli("send", "first_bodies", "--body", "-", "-n", broker.namesrv, stdin='{"id": 42}\n')
    assert piped.returncode == 0, piped.stderr
    path = tmp_path / "body.bin"
    path.write_bytes(b"\x00\xffbinary")
    filed = run_cli("send", "first_bodies", "--file", str(path), "--count", "2", "-n", broker.namesrv)
    assert filed.returncode == 0, filed.stderr
    tailed = run_cli("tail", "first_bodies", "--from-beginning", "--max", "3", "--json", "-n", broker.namesrv)
    bodies = [json.loads(line) for line in tailed.stdout.splitlines()]
    assert [(m["body"], m.get("body_encoding")) for m in bodies] == [
        ('{"id": 42}\n', None),
        *[(base64.b64encode(b"\x00\xffbinary").decode(), "base64")] * 2,
    ]
    missing = run_cli("send", "first_bodies", "--file", str(tmp_path / "nope"), "-n", broker.namesrv)
    assert missing.stderr == f"pocketmq send: error: --file {tmp_path / 'nope'}: No such file or directory\n"


def test_json_errors_are_json_too(broker):
    result = run_cli("topic", "describe", "first_absent", "--json", "-n", broker.namesrv)
    assert result.returncode == 1 and result.stdout == ""
    assert json.loads(result.stderr) == {
        "command": "topic",
        "error": "topic 'first_absent' does not exist (no route on the name server)",
    }


def cli_process(*args: str, **streams) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | streams.pop("env", {})
    return subprocess.Popen([sys.executable, "-m", "pocketmq.cli.main", *args], env=env, **streams)


def test_a_reader_that_goes_away_ends_the_command_quietly(broker):
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `| head` does once it has its lines
    with os.fdopen(write_end, "wb") as closed_pipe:
        proc = cli_process("topic", "list", "-n", broker.namesrv, stdout=closed_pipe, stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=30)
    assert (proc.returncode, err) == (128 + signal.SIGPIPE, b"")


@pytest.mark.parametrize("no_color", [False, True])
def test_colour_on_a_terminal_unless_no_color(broker, no_color):
    leader, follower = pty.openpty()
    env = {"NO_COLOR": "1", "TERM": "xterm"} if no_color else {"TERM": "xterm"}
    proc = cli_process("topic", "list", "-n", broker.namesrv, stdout=follower, env=env)
    os.close(follower)
    assert proc.wait(timeout=30) == 0
    shown = os.read(leader, 4096)
    os.close(leader)
    assert shown.startswith(b"TOPIC" if no_color else b"\x1b[1mTOPIC\x1b[0m"), shown
    piped = run_cli("topic", "list", "-n", broker.namesrv, env={"TERM": "xterm"})
    assert "\x1b[" not in piped.stdout


def test_version_and_bash_completion():
    assert run_cli("--version").stdout == f"pocketmq {pocketmq.__version__}\n"
    as_module = subprocess.run([sys.executable, "-m", "pocketmq", "--version"], capture_output=True, text=True)
    assert as_module.stdout == f"pocketmq {pocketmq.__version__}\n"
    script = run_cli("completion", "bash").stdout
    complete = (
        'comp() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _pocketmq; echo "${COMPREPLY[*]}"; }'
    )
    shell = subprocess.run(
        [
            "bash",
            "-c",
            f"{script}\n{complete}\ncomp pocketmq to\ncomp pocketmq topic cr\ncomp pocketmq topic create t --qu",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert shell.stdout.splitlines() == ["topic", "create", "--queues"], shell.stderr


def stderr_on_terminal(*argv: str) -> tuple[int, str, str]:
    """``pocketmq ARGV`` with stderr on a terminal and stdout on a pipe: its status, stdout and what the
    terminal showed."""
    leader, follower = pty.openpty()
    proc = cli_process(*argv, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    out, _ = proc.communicate(timeout=30)
    shown = b""
    while chunk := _read_pty(leader):
        shown += chunk
    os.close(leader)
    return proc.returncode, out.decode(), shown.decode()


def _read_pty(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO: the writer has gone and everything was read
        return b""


def bar_shown(what: str, total: int) -> str:
    """The last drawing of a finished bar and the end of its line."""
    return f"\r{what}  [{'#' * 30}]  {total}/{total}\r\n"


def test_a_long_send_shows_progress_on_a_terminal_while_its_lines_go_to_a_file(broker):
    assert run_cli("topic", "create", "first_progress", "--queues", "1", "-n", broker.namesrv).returncode == 0
    status, out, shown = stderr_on_terminal("send", "first_progress", "--count", "5", "-n", broker.namesrv)
    assert status == 0 and len(out.splitlines()) == 5
    assert shown.startswith("\rsending to first_progress  [") and shown.endswith(
        bar_shown("sending to first_progress", 5)
    )
    status, out, shown = stderr_on_terminal("send", "first_progress", "--count", "5", "--json", "-n", broker.namesrv)
    assert (status, len(out.splitlines()), shown) == (0, 5, "")  # --json is for scripts: no bar
    quiet = run_cli("send", "first_progress", "--count", "3", "-n", broker.namesrv)
    assert quiet.returncode == 0 and quiet.stderr == ""  # stderr not a terminal: no bar


def test_dlq_resend_of_many_shows_progress_on_a_terminal(broker, named):
    dead = "%DLQ%first-resent"
    assert run_cli("topic", "create", dead, "--queues", "1", "-n", broker.namesrv).returncode == 0
    with Producer(ClientConfig(namesrv_addr=broker.namesrv)) as producer:
        for i in range(4):  # dead letters as a broker writes them: they name the topic they were sent to
            letter = Message.create(dead, f"dead-{i}")
            letter.properties[props.RETRY_TOPIC] = "first_named"
            producer.send(letter)
    status, out, shown = stderr_on_terminal("dlq", "resend", "first-resent", "--all", "-n", broker.namesrv)
    assert (status, out) == (0, "resent 4 message(s) of group first-resent to the group (its retry topic)\n")
    assert shown.endswith(bar_shown("resending first-resent's dead messages", 4)), shown
    status, out, shown = stderr_on_terminal("dlq", "resend", "first-resent", "--all", "--json", "-n", broker.namesrv)
    assert (status, len(out.splitlines()), shown) == (0, 4, "")


def test_topic_create_on_many_brokers_shows_progress_on_a_terminal(tmp_path):
    first = broker_process(tmp_path / "a", "broker-p1").start()
    second = broker_process(tmp_path / "b", "broker-p2", namesrv=first.namesrv).start()
    try:
        wait_until(lambda: len(run_cli("cluster", "--json", "-n", first.namesrv).stdout.splitlines()) == 2, 20)
        status, out, shown = stderr_on_terminal("topic", "create", "first_wide", "--queues", "2", "-n", first.namesrv)
        assert (status, out) == (0, "topic first_wide created on broker-p1, broker-p2: 2 queues each, type MIXED\n")
        assert shown.endswith(bar_shown("creating first_wide (brokers routed)", 2)), shown
    finally:
        assert second.stop() == 0 and first.stop() == 0


def silent_address() -> tuple[socket.socket, list[socket.socket]]:
    """A listening socket whose accept queue is full, so that the kernel drops a new connection's SYN: a
    connect there hangs as one to a host that is down does. (listener, the connections that fill it)"""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    with socket.socket() as probe:
        probe.settimeout(0.5)
        with pytest.raises(TimeoutError):
            probe.connect(listener.getsockname())
    return listener, fillers


def test_a_silent_name_server_fails_within_the_connect_timeout(capsys):
    listener, fillers = silent_address()
    addr = "{}:{}".format(*listener.getsockname())
    try:
        started = time.monotonic()
        status = pocketmq_main(["topic", "list", "-n", addr])  # in this process: Python's start not counted
        took_s = time.monotonic() - started
    finally:
        for sock in [listener, *fillers]:
            sock.close()
    assert (status, capsys.readouterr().err) == (
        1,
        f"pocketmq topic: error: name server {addr} unreachable: connect to {addr} timed out\n",
    )
    # the connect timeout, and no probe after it (a probe of a silent address would wait a second more)
    assert CLI_CONNECT_TIMEOUT_S <= took_s < CLI_CONNECT_TIMEOUT_S + 0.9, took_s
