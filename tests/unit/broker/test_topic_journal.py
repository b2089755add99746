"""The topic table's journal (``broker.topic_journal``): changes appended as lines, folded into topics.json now
and then; a reload sees every change made, a torn last line is cut off, lines the file already holds are
skipped, and a failed append is never written behind."""

import pytest

from pocketmq.broker.topic_journal import MIN_LINES_BEFORE_FOLD
from pocketmq.broker.topics import TopicManager
from pocketmq.common.topic import PERM_READ, TopicConfig
from pocketmq.runtime import files

pytestmark = pytest.mark.timeout(60)


def table(path) -> TopicManager:
    topics = TopicManager(path, auto_create_enabled=True, default_queue_nums=4)
    topics.load()
    return topics


def reloaded(topics: TopicManager, path) -> TopicManager:
    again = table(path)
    assert again.all() == topics.all() and again.data_version == topics.data_version
    return again


def test_changes_go_to_the_journal_and_are_folded_into_the_file_now_and_then(tmp_path):
    path = tmp_path / "topics.json"
    journal = tmp_path / "topics.json.journal"
    topics = table(path)
    topics.create_or_update(TopicConfig("a", 2, 2))
    topics.change("a", lambda current: TopicConfig("a", 4, 4, perm=PERM_READ))
    topics.get_or_create("auto")
    topics.delete("auto")
    assert not path.exists() and len(journal.read_bytes().splitlines()) == 4
    assert reloaded(topics, path).get("a") == TopicConfig("a", 4, 4, perm=PERM_READ)

    for n in range(MIN_LINES_BEFORE_FOLD):
        topics.create_or_update(TopicConfig(f"t{n}", 1, 1))
    assert path.exists() and len(journal.read_bytes().splitlines()) < MIN_LINES_BEFORE_FOLD  # folded once
    assert reloaded(topics, path).get("auto") is None


def test_a_torn_last_line_is_cut_off_and_the_journal_goes_on(tmp_path):
    path = tmp_path / "topics.json"
    journal = tmp_path / "topics.json.journal"
    topics = table(path)
    topics.create_or_update(TopicConfig("kept", 2, 2))
    whole = journal.read_bytes()
    with open(journal, "ab") as f:
        f.write(b'{"config": {"topicName": "torn"')  # a crash during an append: never made, never answered
    again = reloaded(topics, path)
    assert journal.read_bytes() == whole
    again.create_or_update(TopicConfig("next", 1, 1))
    assert table(path).get("next") == TopicConfig("next", 1, 1) and table(path).get("torn") is None


def test_lines_the_file_already_holds_are_skipped(tmp_path):
    path = tmp_path / "topics.json"
    journal = tmp_path / "topics.json.journal"
    topics = table(path)
    for n in range(MIN_LINES_BEFORE_FOLD):
        topics.create_or_update(TopicConfig(f"t{n}", 1, 1))
    before_fold = journal.read_bytes()
    topics.delete("t0")  # this change folds the journal into the file
    assert not journal.exists()
    journal.write_bytes(before_fold)  # as if a crash came between the file's write and the journal's removal
    again = reloaded(topics, path)
    assert again.get("t0") is None


def test_after_a_failed_append_the_next_change_rewrites_the_file(tmp_path, monkeypatch):
    path = tmp_path / "topics.json"
    journal = tmp_path / "topics.json.journal"
    topics = table(path)
    topics.create_or_update(TopicConfig("kept", 2, 2))

    def half_written(target, data):
        with open(target, "ab") as f:
            f.write(data[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pocketmq.broker.topic_journal.append_durably", half_written)
    with pytest.raises(OSError):
        topics.create_or_update(TopicConfig("lost", 1, 1))
    assert topics.get("lost") is None
    monkeypatch.setattr("pocketmq.broker.topic_journal.append_durably", files.append_durably)
    topics.create_or_update(TopicConfig("after", 3, 3))
    assert path.exists() and not journal.exists()  # written whole, not behind the part of a line
    again = reloaded(topics, path)
    assert again.get("lost") is None and again.get("after") == TopicConfig("after", 3, 3)
    again.create_or_update(TopicConfig("appended", 1, 1))
    assert journal.exists() and table(path).get("appended") == TopicConfig("appended", 1, 1)
