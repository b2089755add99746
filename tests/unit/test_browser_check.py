"""Whether the browser tests can drive a headless Chromium: the versions `chromium --version` and `chromedriver
--version` print, a driver of another release than the browser, and the fix each problem names."""

from __future__ import annotations

import pytest

from pocketmq.testing.browser import browser_problem, browser_required, major_version


@pytest.mark.parametrize(
    "output, major",
    [
        ("Chromium 156.0.8078.108 built on Debian GNU/Linux 12 (bookworm)", 156),
        ("ChromeDriver 156.0.8078.108 (730482a940ce25ae7cf051320d8340e793acf8b9-refs/branch-heads/8078@{#2244})", 156),
        ("Google Chrome 120.0.6099.71", 120),
        ("no such command", None),
    ],
)
def test_the_major_version_of_the_browser_and_its_driver(output, major):
    assert major_version(output) == major


def fake_tool(folder, name: str, says: str) -> None:
    tool = folder / name
    tool.write_text(f"#!/bin/sh\necho '{says}'\n")
    tool.chmod(0o755)


def test_a_missing_browser_or_a_driver_of_another_release_is_a_problem_that_says_how_to_fix_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert browser_problem() == (
        "chromium not found on PATH; install Debian's chromium and chromium-driver "
        "(apt-get install chromium chromium-driver)"
    )
    fake_tool(tmp_path, "chromium", "Chromium 156.0.8078.108 built on Debian GNU/Linux 12 (bookworm)")
    fake_tool(tmp_path, "chromedriver", "ChromeDriver 150.0.1 (abc)")
    assert browser_problem() == (
        "chromedriver is version 150 but chromium is 156; install Debian's chromium and chromium-driver "
        "(apt-get install chromium chromium-driver) of one release"
    )
    fake_tool(tmp_path, "chromedriver", "ChromeDriver 156.0.8078.108 (abc)")
    assert browser_problem() is None


@pytest.mark.parametrize("value, required", [("true", True), ("", False), ("false", False)])
def test_ci_makes_the_browser_required_as_it_does_java(monkeypatch, value, required):
    monkeypatch.setenv("CI", value)
    assert browser_required() is required
