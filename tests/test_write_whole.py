"""Reports, partial reports and profiles are written whole or not at all
(:func:`agentfsm.runtime.files.write_whole`): a write cut short keeps the file before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfsm.core.errors import UsageError
from agentfsm.runtime.files import write_whole


def test_a_write_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "quality.partial.json"
    path.write_text("old", encoding="utf-8")
    write_whole(path, '{"meta": {}}\n')
    assert path.read_text(encoding="utf-8") == '{"meta": {}}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quality.partial.json"]


def test_a_write_that_fails_midway_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    path.write_text('{"models": {"other": {}}}', encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):  # fails after the temporary file was opened
        write_whole(path, "ok so far \udc80")
    assert path.read_text(encoding="utf-8") == '{"models": {"other": {}}}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.json"]


def test_a_path_that_cannot_be_written_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "missing-dir" / "report.json"
    with pytest.raises(UsageError, match="cannot write .*report.json"):
        write_whole(path, "{}")


def test_a_link_is_written_through_and_kept(tmp_path: Path) -> None:
    # renamed over, the link itself became a file and its target kept the old text
    (tmp_path / "pages").mkdir()
    target = tmp_path / "pages" / "report.json"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    write_whole(link, "new")
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new"
    assert sorted(p.name for p in (tmp_path / "pages").iterdir()) == ["report.json"]


def test_bytes_are_written_as_they_are(tmp_path: Path) -> None:
    # agentfsm diagram -o observed.png: graphviz's PNG, whole or not at all
    path = tmp_path / "observed.png"
    path.write_bytes(b"old")
    write_whole(path, b"\x89PNG\r\n\x1a\n\x00\xff")
    assert path.read_bytes() == b"\x89PNG\r\n\x1a\n\x00\xff"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["observed.png"]
