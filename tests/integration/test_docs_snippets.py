"""Every ``python``, ``sh`` and ``bash`` block of README.md and docs/*.md runs as written against one real broker,
so the docs cannot drift from the code (docs/development.md, "Docs").

The convention the docs follow:
- Snippets name the addresses of a broker started with the defaults (``make run``, ``pocketmq serve``): the name
  server 127.0.0.1:9876 and gRPC 127.0.0.1:8081. The test swaps those two for its broker's and sets
  ``POCKETMQ_NAMESRV``, which the CLI and the SDK use when no address is given.
- The blocks run in document order, each in a fresh process: a block may rely on what an earlier block of the
  same file made (a topic), never on its Python names. Each file starts without the topics the files before it
  made, so that two docs may each create `orders` their way.
- A Python block names nothing it does not define or import, even in a function it never calls.
- A block that cannot run here (a foreground server, a cluster, a long run, an outline with placeholders) follows
  an HTML comment ``<!-- docs-test: skip (the reason) -->`` on the line before its fence: the skip is visible in
  the doc and in the test report. Other fences (text, json, outputs, synopses) are not code and are not run.
"""

from __future__ import annotations

import builtins
import os
import re
import subprocess
import symtable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.client import Admin
from pocketmq.common.topic import is_group_topic, is_system_topic
from pocketmq.testing import embedded_broker
from pocketmq.testing.warm_python import WarmPython, shared_warm_python

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("python", "sh", "bash")
DEFAULT_NAMESRV = "127.0.0.1:9876"
DEFAULT_GRPC = "127.0.0.1:8081"
SNIPPET_TIMEOUT_S = 20.0
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```", flags=re.S | re.M)
SKIP = re.compile(r"^<!-- docs-test: skip \((?P<reason>[^)]+)\) -->\s*$")
ANY_MARKER = re.compile(r"^\s*<!--\s*docs-test")  # a line of its own: prose may quote the marker

pytestmark = pytest.mark.timeout(60)


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip_reason: str | None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    """The fenced blocks of one Markdown file, with the skip marker of the line before each fence."""
    text = path.read_text()
    found = []
    for fence in FENCE.finditer(text):
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = SKIP.search(before)
        found.append(
            Snippet(
                path=path,
                line=text.count("\n", 0, fence.start()) + 1,
                lang=fence["lang"],
                code=fence["code"],
                skip_reason=marker["reason"] if marker else None,
            )
        )
    return found


ALL_SNIPPETS = [snippet for path in DOCS for snippet in snippets(path)]


def runnable_params():
    for snippet in ALL_SNIPPETS:
        if snippet.lang in RUNNABLE:
            marks = [pytest.mark.skip(reason=snippet.skip_reason)] if snippet.skip_reason else []
            yield pytest.param(snippet, id=snippet.name, marks=marks)


@pytest.fixture(scope="module")
def warm_python() -> WarmPython:
    """The test process's warm Python (``run_cli``'s, started already when a CLI test ran before)."""
    return shared_warm_python()


@pytest.fixture(scope="module")
def docs_broker(tmp_path_factory):
    """A broker of this module's own: the snippets create the topics `orders`, change dynamic settings and add ACL
    users, which the session broker's other tests must not see."""
    with embedded_broker(tmp_path_factory.mktemp("docs-broker")) as broker:
        yield broker


class TopicsOfOneFile:
    """Deletes the topics the previous file's snippets made when the snippets of the next file begin: those a user
    names, not the broker's system topics or a group's retry and dead letter topics, which no snippet creates."""

    def __init__(self, admin: Admin):
        self.admin = admin
        self.baseline = set(admin.list_topics())
        self.current: Path | None = None

    def enter(self, path: Path) -> None:
        if path != self.current:
            for topic in set(self.admin.list_topics()) - self.baseline:
                if not (is_system_topic(topic) or is_group_topic(topic)):
                    self.admin.delete_topic(topic)
            self.current = path


@pytest.fixture(scope="module")
def topics_of_one_file(docs_broker):
    with Admin(docs_broker.client_config()) as admin:
        yield TopicsOfOneFile(admin)


@pytest.fixture(scope="module")
def snippet_env(docs_broker, warm_python, tmp_path_factory) -> dict[str, str]:
    """The environment of every snippet: the broker's addresses, a HOME of its own (the official client writes
    its logs there) and on PATH a ``pocketmq`` that runs this checkout's CLI in the warm Python."""
    return {
        **docs_broker.process.env,
        "HOME": str(tmp_path_factory.mktemp("docs-home")),
        "PATH": f"{warm_python.bin_dir}{os.pathsep}{os.environ['PATH']}",
        "POCKETMQ_NAMESRV": docs_broker.namesrv_addr,
        "NO_COLOR": "1",
    }


def command(snippet: Snippet, docs_broker, warm_python: WarmPython) -> list[str]:
    code = snippet.code.replace(DEFAULT_NAMESRV, docs_broker.namesrv_addr)
    code = code.replace(DEFAULT_GRPC, docs_broker.grpc_endpoint)
    if snippet.lang == "python":
        return [str(warm_python.bin_dir / "warm-python"), "-c", code]
    return ["bash", "-e", "-o", "pipefail", "-c", code]


def undefined_names(code: str) -> set[str]:
    """The global names ``code`` reads, in any of its scopes, that it neither binds nor imports."""
    module = symtable.symtable(code, "<snippet>", "exec")
    bound = {s.get_name() for s in module.get_symbols() if s.is_assigned() or s.is_imported()}
    read: set[str] = set()
    tables = [module]
    while tables:
        table = tables.pop()
        tables += table.get_children()
        read |= {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.is_global()}
    return read - bound - set(dir(builtins))


@pytest.mark.parametrize("snippet", list(runnable_params()))
def test_snippet_runs(snippet: Snippet, docs_broker, warm_python, topics_of_one_file, snippet_env, tmp_path):
    if snippet.lang == "python":
        assert undefined_names(snippet.code) == set(), f"{snippet.name} names what it does not define"
    topics_of_one_file.enter(snippet.path)
    result = subprocess.run(
        command(snippet, docs_broker, warm_python),
        cwd=tmp_path,
        env=snippet_env,
        capture_output=True,
        text=True,
        timeout=SNIPPET_TIMEOUT_S,
    )
    assert result.returncode == 0, (
        f"{snippet.name} exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    )


def test_every_marker_is_a_skip_with_a_reason_before_a_runnable_block():
    """A misspelt marker would run the block it meant to skip, and one before a text block would say nothing."""
    problems = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        starts = {s.line: s for s in snippets(path)}
        for number, line in enumerate(lines, start=1):
            if not ANY_MARKER.search(line):
                continue
            target = starts.get(number + 1)
            if not SKIP.search(line):
                problems.append(f"{path.name}:{number}: not `<!-- docs-test: skip (reason) -->`")
            elif target is None or target.lang not in RUNNABLE:
                problems.append(f"{path.name}:{number}: the next line is not a python, sh or bash fence")
    assert problems == []


def test_the_docs_have_snippets_that_run():
    """The extraction itself: a change to the fence syntax must not make this module run nothing."""
    assert sum(s.lang in RUNNABLE and s.skip_reason is None for s in ALL_SNIPPETS) >= 20
