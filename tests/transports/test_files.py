"""The one atomic file writer of the token store, the task store, the project approvals and the
command line's configuration edits."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from trio_mcp.transports._files import write_atomically


def test_the_file_is_replaced_whole_with_the_mode_asked_for_whatever_the_umask(
    tmp_path: Path,
) -> None:
    target = tmp_path / "file.json"
    target.write_text("old")
    old = os.umask(0o077)
    try:
        write_atomically(target, b"new", mode=0o644)
    finally:
        os.umask(old)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    write_atomically(target, b"private")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json"]  # no temporary left


def test_a_failure_leaves_the_target_as_it_was_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "file.json"
    target.write_text("old")
    (tmp_path / "dir").mkdir()
    with pytest.raises(OSError):
        write_atomically(tmp_path / "dir", b"new")  # a directory cannot be renamed over
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "missing" / "file.json", b"new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "file.json"]
