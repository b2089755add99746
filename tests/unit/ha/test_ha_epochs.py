"""Replication epochs, pure: tenures, the common prefix of two histories, what a slave does before following,
and the epoch file."""

from __future__ import annotations

import json

import pytest

from pocketmq.cluster.ha_epochs import (
    EPOCH_FILE,
    Epoch,
    EpochFile,
    PlanKind,
    adopt,
    begin_tenure,
    common_prefix_end,
    epochs_of_body,
    parse_epochs,
    plan,
)

A1, B2, C3 = Epoch(1, 0, "a"), Epoch(2, 800, "b"), Epoch(3, 1200, "c")


def test_a_tenure_starts_at_the_log_end_with_the_next_number():
    assert begin_tenure([], 0, 0, "a") == [Epoch(1, 0, "a")]
    assert begin_tenure([A1], 800, 0, "b") == [A1, B2]


def test_a_tenure_that_wrote_nothing_is_replaced_and_entries_below_retention_go():
    assert begin_tenure([A1, B2], 800, 0, "x") == [A1, Epoch(3, 800, "x")]  # B wrote nothing: no slave holds it
    assert begin_tenure([A1, B2, C3], 1500, 900, "d") == [B2, C3, Epoch(4, 1500, "d")]  # A's records are gone
    assert begin_tenure([A1, B2, C3], 1500, 1200, "d") == [C3, Epoch(4, 1500, "d")]
    # a recovered log shorter than a tenure's start (a torn tail) drops that tenure, numbers still rise
    assert begin_tenure([A1, B2], 700, 0, "x") == [A1, Epoch(3, 700, "x")]


def test_the_common_prefix_ends_where_the_first_side_leaves_the_shared_epoch():
    # old master (epoch 1 only, wrote to 1000) and the slave promoted at 800
    assert common_prefix_end([A1], 1000, [A1, B2], 1500) == 800
    # a slave behind in the same history: all of it is shared
    assert common_prefix_end([A1, B2], 900, [A1, B2], 1500) == 900
    # the slave is ahead of the master inside the master's current epoch (the master lost its tail)
    assert common_prefix_end([A1], 1000, [A1], 700) == 700
    # the slave went on in a tenure the master never saw: shared up to where it began
    assert common_prefix_end([A1, Epoch(2, 900, "z")], 1300, [A1, B2], 1500) == 800
    # the same number but another tenure is not shared; no shared epoch at all: nothing in common
    assert common_prefix_end([Epoch(1, 0, "other")], 500, [A1], 700) == 0


def test_the_plan_follows_truncates_or_refuses():
    assert plan([A1, B2], 0, 900, [A1, B2], 1500, 900).kind is PlanKind.FOLLOW
    cut = plan([A1], 0, 1000, [A1, B2], 1500, confirmed_phys_offset=800)
    assert (cut.kind, cut.truncate_to) == (PlanKind.TRUNCATE, 800)
    everything = plan([Epoch(1, 0, "other")], 0, 500, [A1], 700, 0)
    assert (everything.kind, everything.truncate_to) == (PlanKind.TRUNCATE, 0)


def test_records_confirmed_as_replicated_are_never_cut():
    refused = plan([A1], 0, 1000, [A1, B2], 1500, confirmed_phys_offset=900)
    assert refused.kind is PlanKind.REFUSE and "900" in refused.reason and "800" in refused.reason


def test_nothing_in_common_above_retention_is_refused_not_emptied():
    refused = plan([Epoch(1, 0, "other")], 4096, 5000, [A1], 7000, 0)
    assert refused.kind is PlanKind.REFUSE and "retention" in refused.reason


def test_without_epochs_on_either_side_the_continuity_check_decides():
    assert plan([], 0, 1000, [A1], 1500, 0).kind is PlanKind.UNKNOWN
    assert plan([A1], 0, 1000, [], 1500, 0).kind is PlanKind.UNKNOWN
    assert plan([], 0, 0, [A1], 1500, 0).kind is PlanKind.FOLLOW  # an empty slave just follows


def test_a_slave_adopts_the_epochs_that_began_below_its_end():
    assert adopt([A1, B2, C3], 1200) == [A1, B2]
    assert adopt([A1, B2, C3], 1201) == [A1, B2, C3]
    assert adopt([A1], 0) == []


def test_malformed_or_unordered_entries_are_refused():
    with pytest.raises(ValueError, match="out of order"):
        parse_epochs([B2.to_json(), A1.to_json()])
    with pytest.raises(ValueError):
        parse_epochs([{"epoch": 1}])
    with pytest.raises(ValueError):
        epochs_of_body(b"not json")


def test_the_file_keeps_epochs_and_the_confirmed_offset(tmp_path):
    epochs = EpochFile(tmp_path)
    epochs.load()
    first = epochs.begin_tenure(0, 0)
    assert first.epoch == 1 and json.loads(epochs.path.read_text())["epochs"] == [first.to_json()]
    epochs.confirmed(500)
    epochs.confirmed(300)  # it only moves up
    assert epochs.save_if_changed() and not epochs.save_if_changed()
    epochs.replace([first, Epoch(2, 900, "m")])
    epochs.cut(900)
    again = EpochFile(tmp_path)
    again.load()
    assert again.epochs == [first] and again.confirmed_phys_offset == 500
    assert again.begin_tenure(1000, 0).epoch == 2 and again.begin_tenure(1000, 0).epoch == 3


def test_a_damaged_file_is_a_clear_error(tmp_path):
    (tmp_path / "ha_epochs.json").write_text('{"epochs": [{"epoch": "x"}]}')
    with pytest.raises(ValueError, match="ha_epochs.json does not parse"):
        EpochFile(tmp_path).load()


def test_a_tenure_that_cannot_be_saved_starts_anyway_and_is_saved_once_there_is_room(tmp_path, monkeypatch):
    epochs = EpochFile(tmp_path)

    def disk_full(path, document):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pocketmq.cluster.ha_epochs.atomic_write_json", disk_full)
    started = epochs.begin_tenure(100, 0)  # a master starting on a full disk
    assert epochs.epochs[-1] == started and not (tmp_path / EPOCH_FILE).exists()
    monkeypatch.undo()
    assert epochs.save_if_changed() and not epochs.save_if_changed()
    reloaded = EpochFile(tmp_path)
    reloaded.load()
    assert reloaded.epochs == [started]
