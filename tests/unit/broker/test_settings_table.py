"""docs/broker.md lists every broker setting as the config definitions have them (regenerate with
``python -m pocketmq.broker.settings_table docs/broker.md``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.settings_table import settings_markdown, with_table

BROKER_MD = Path(__file__).resolve().parents[3] / "docs" / "broker.md"


def test_docs_broker_md_has_the_current_settings_table():
    text = BROKER_MD.read_text()
    assert with_table(text) == text, "run: python -m pocketmq.broker.settings_table docs/broker.md"


def test_the_table_names_every_setting_with_its_broker_conf_keys():
    table = settings_markdown()
    for f in dataclasses.fields(BrokerConfig):
        assert f"| `{f.name}` |" in table
    assert "| `file_reserved_hours` | `fileReservedTime` | `72.0` |  |" in table
    assert "| `flush_mode` | `flushDiskType` | `async` |  |" in table
    assert "- `deleteWhen`: " in table
