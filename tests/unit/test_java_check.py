"""Whether Java can run Spark: the version `java -version` prints, and CI's rule that a missing Java fails."""

from __future__ import annotations

import pytest

from pocketmq.testing.java import java_major, java_problem, java_required


@pytest.mark.parametrize(
    "output, major",
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_402"', 8),
        ("command not found", None),
    ],
)
def test_the_major_version_of_java_version_output(output, major):
    assert java_major(output) == major


@pytest.mark.parametrize("value, required", [("true", True), ("1", True), ("", False), ("false", False), ("0", False)])
def test_ci_makes_java_required(monkeypatch, value, required):
    monkeypatch.setenv("CI", value)
    assert java_required() is required


def test_an_old_java_is_a_problem_that_says_how_to_fix_it(tmp_path, monkeypatch):
    java = tmp_path / "java"
    java.write_text("#!/bin/sh\necho 'java version \"1.8.0_402\"' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    problem = java_problem()
    assert problem == (
        f'{java} is too old or unknown (java version "1.8.0_402"); install Java 17+ (Debian: apt-get install '
        "openjdk-17-jre-headless) and put java on PATH"
    )
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert java_problem().startswith("java not found on PATH; install Java 17+")
