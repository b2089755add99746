"""The parser every command shares: examples that parse, help without reStructuredText quotes, a typo reported
with its own command's usage, and output that colours only a terminal."""

from __future__ import annotations

import io
import json
import re
import shlex
import sys
from types import SimpleNamespace

import pytest

from pocketmq.cli.examples import EXAMPLES
from pocketmq.cli.main import build_parser, main
from pocketmq.cli.parsing import all_parsers, parse
from pocketmq.cli.terminal import ProgressBar, paint


@pytest.mark.parametrize("line", sorted({line for lines in EXAMPLES.values() for line in lines}))
def test_every_example_parses(line):
    command = re.search(r"pocketmq [^|)\"]*", line).group(0)  # in a pipe or $(...) too
    args = parse(build_parser(), shlex.split(command)[1:])
    assert args.func is not None


def test_every_command_has_examples_and_plain_help():
    for path, parser in all_parsers(build_parser()):
        if not path:
            continue
        assert path in EXAMPLES, f"pocketmq {' '.join(path)} has no examples"
        text = parser.format_help()
        assert "``" not in text, text
        assert "examples:\n  " in text and "pocketmq" in text.split("examples:")[1]


def test_a_mistyped_flag_shows_the_commands_own_usage_and_the_flag_it_meant(capsys):
    with pytest.raises(SystemExit) as exited:
        parse(build_parser(), ["topic", "create", "orders", "--qeues", "3"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pocketmq topic create ")
    assert err.endswith("pocketmq topic create: error: unrecognized arguments: --qeues 3 (did you mean --queues?)\n")


def test_topic_update_without_a_change_is_a_usage_error_naming_the_options(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["topic", "update", "orders", "-n", "127.0.0.1:1"])  # refused before any connection
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pocketmq topic update ")
    assert err.endswith(
        "pocketmq topic update: error: nothing to update: name at least one of --queues, --type, --gray-queue-ratio\n"
    )
    assert (
        "changes (at least one of --queues, --type, --gray-queue-ratio is required):"
        in build_parser("topic").parse_args(["topic", "update", "orders"]).usage_parser.format_help()
    )


@pytest.mark.parametrize(
    "argv, error",
    [
        (["topic", "create", "orders", "--queues", "x", "--json"], "argument --queues: invalid int value: 'x'"),
        (["tail", "orders", "--json", "--mx", "3"], "unrecognized arguments: --mx 3 (did you mean --max?)"),
    ],
)
def test_with_json_a_usage_error_is_the_json_error_object(capsys, argv, error):
    with pytest.raises(SystemExit) as exited:
        parse(build_parser(argv[0]), argv)
    assert exited.value.code == 2
    assert json.loads(capsys.readouterr().err) == {"command": argv[0], "error": error}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert paint("error:", "red", Terminal()) == "\x1b[31merror:\x1b[0m"
    assert paint("error:", "red", io.StringIO()) == "error:"
    monkeypatch.setenv("NO_COLOR", "")
    assert paint("error:", "red", Terminal()) == "error:"


def terminal_stderr(monkeypatch, *, stdout: io.StringIO | None = None) -> Terminal:
    """stderr on a terminal, stdout on ``stdout`` (a file by default). Set in the test itself: pytest's capture
    puts its own streams back after the fixtures."""
    stderr = Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(sys, "stdout", stdout or io.StringIO())
    return stderr


def test_a_progress_bar_draws_on_a_terminal_and_ends_its_line(monkeypatch):
    stderr = terminal_stderr(monkeypatch)
    with ProgressBar(SimpleNamespace(json=False), "sending", 3) as bar:
        for _ in range(3):
            bar.advance()
            bar._shown_at = 0.0  # every step is due for a redraw (they come faster than REDRAW_S here)
    assert (
        stderr.getvalue()
        == "".join(f"\rsending  [{'#' * (10 * n)}{'.' * (30 - 10 * n)}]  {n}/3" for n in (1, 2, 3)) + "\n"
    )


@pytest.mark.parametrize("as_json, total, lines_to_terminal", [(True, 5, False), (False, 1, False), (False, 5, True)])
def test_no_progress_bar_with_json_for_one_item_or_where_the_lines_show_progress(
    monkeypatch, as_json, total, lines_to_terminal
):
    stderr = terminal_stderr(monkeypatch, stdout=Terminal() if lines_to_terminal else None)
    with ProgressBar(SimpleNamespace(json=as_json), "sending", total, lines=True) as bar:
        bar.advance(total)
    assert stderr.getvalue() == ""


def test_a_paused_bar_clears_its_line_and_comes_back(monkeypatch):
    stderr = terminal_stderr(monkeypatch)
    with ProgressBar(SimpleNamespace(json=False), "resending", 2) as bar:
        bar.advance()
        bar.pause()
        bar.advance()
    assert stderr.getvalue() == (f"\rresending  [{'#' * 15}{'.' * 15}]  1/2\r\x1b[K\rresending  [{'#' * 30}]  2/2\n")
