"""Whether an external tool the tests need is on PATH at a usable version, and what to tell the user when not.

Java runs the Spark tests (``pocketmq.testing.java``), etcd the failover tests (``pocketmq.testing.etcd``); both
follow one rule:

- ``tool_problem(tool)``: ``None`` when the tool is usable, else one sentence saying what is wrong and how to
  fix it.
- ``tool_required()``: whether a missing tool is an error rather than a reason to skip the tests that need it: in
  CI (``CI`` set to a true value, as CI services do) a machine without it must not pass by skipping.
- ``exit_on_problem(tool, needed_by)``: the ``python -m`` check of each module: prints the problem and exits 1.
- ``skip_or_fail(problem, needed_by)``: what a test that needs the tool calls first: nothing without a problem,
  else it skips the test with the problem, or fails it in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Tool:
    command: str  # looked up on PATH
    version_flag: str
    major_of: Callable[[str], int | None]  # the major version in the output of ``command version_flag``
    accepts: Callable[[int], bool]
    wrong_version: str  # what the problem says of a version not accepted, e.g. "is too old or unknown"
    install_hint: str


def tool_problem(tool: Tool) -> str | None:
    path = shutil.which(tool.command)
    if path is None:
        return f"{tool.command} not found on PATH; {tool.install_hint}"
    try:
        done = subprocess.run([path, tool.version_flag], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{path} {tool.version_flag} failed ({exc}); {tool.install_hint}"
    output = (done.stdout + done.stderr).strip()  # java prints its version on stderr, etcd on stdout
    major = tool.major_of(output)
    if major is None or not tool.accepts(major):
        first_line = output.splitlines()[0] if output else "no version output"
        return f"{path} {tool.wrong_version} ({first_line}); {tool.install_hint}"
    return None


def tool_required() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def exit_on_problem(tool: Tool, needed_by: str) -> None:
    problem = tool_problem(tool)
    if problem is not None:
        print(f"{needed_by}: {problem}", file=sys.stderr)
        sys.exit(1)


def skip_or_fail(problem: str | None, needed_by: str) -> None:
    """``needed_by`` says who needs what, e.g. "the failover tests need etcd 3.x"."""
    if problem is None:
        return
    import pytest  # only tests call this: the package does not depend on pytest

    if tool_required():
        pytest.fail(f"CI is set and {needed_by}: {problem}")
    pytest.skip(f"{needed_by}: {problem}")
