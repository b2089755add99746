"""The parser every command shares: examples that parse, help without reStructuredText quotes, a typo reported
with its own command's usage, and output that colours only a terminal."""

from __future__ import annotations

import argparse
import io
import re
import shlex

import pytest

from pocketmq.cli.examples import EXAMPLES
from pocketmq.cli.main import build_parser
from pocketmq.cli.parsing import parse
from pocketmq.cli.terminal import paint


def all_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from all_parsers(sub, (*path, name))


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
