"""The broker's stage offset table (broker/stage_offsets.py): per-queue records replaced whole, validated,
persisted atomically and reloaded, removed with their group."""

from __future__ import annotations

import pytest

from pocketmq.broker.stage_offsets import StageOffsetManager
from pocketmq.common.errors import BadRequestError

RECORD = {"commitOffset": 12, "stageOffsets": [{"strategy": "s", "stageGroup": "g", "stageOffset": 7}]}


def test_records_are_per_queue_and_survive_a_reload(tmp_path):
    path = tmp_path / "stage_offsets.json"
    table = StageOffsetManager(path)
    table.update("grp", "orders", 0, RECORD)
    table.update("grp", "orders", 1, {"commitOffset": 3, "stageOffsets": []})
    assert table.query("grp", "orders", 0) == RECORD
    assert table.query("grp", "orders", 1)["commitOffset"] == 3  # the prototype mixed queues of a topic
    assert table.query("grp", "orders", 2) is None
    assert table.persist() and not table.persist()  # nothing changed since
    again = StageOffsetManager(path)
    again.load()
    assert again.query("grp", "orders", 0) == RECORD


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"stageOffsets": []},
        {"commitOffset": -1},
        {"commitOffset": 1, "stageOffsets": [{"strategy": "s"}]},
        {"commitOffset": 1, "stageOffsets": [{"stageOffset": -2}]},
    ],
)
def test_malformed_records_are_refused(tmp_path, bad):
    with pytest.raises(BadRequestError):
        StageOffsetManager(tmp_path / "t.json").update("grp", "orders", 0, bad)


def test_remove_group(tmp_path):
    table = StageOffsetManager(tmp_path / "t.json")
    table.update("grp", "orders", 0, RECORD)
    table.update("other", "orders", 0, RECORD)
    table.remove_group("grp")
    assert table.query("grp", "orders", 0) is None and table.query("other", "orders", 0) == RECORD
