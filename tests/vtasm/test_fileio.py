"""Output files as users meet them: links, special files, permissions, missing directories."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from vtasm.errors import FormatError
from vtasm.fileio import read_npy, write_atomic


def test_writes_replace_regular_files_atomically_with_umask_permissions(tmp_path):
    target = tmp_path / "out.bin"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]  # no temporary left behind


def test_existing_permissions_are_kept(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"x")
    target.chmod(0o640)
    write_atomic(target, b"y")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_symlinks_are_written_through(tmp_path):
    real = tmp_path / "real.vasm"
    real.write_text("old")
    link = tmp_path / "link.vasm"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_special_files_are_written_in_place(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_atomic(fifo, b"through the pipe")
        assert os.read(reader, 100) == b"through the pipe"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("case", ["directory", "missing_parent", "parent_is_a_file"])
def test_write_problems_are_one_line_errors(tmp_path, case):
    (tmp_path / "file").write_text("x")
    target = {"directory": tmp_path, "missing_parent": tmp_path / "nope" / "x.bin",
              "parent_is_a_file": tmp_path / "file" / "x.bin"}[case]
    with pytest.raises(FormatError) as info:
        write_atomic(target, b"data")
    assert "cannot write" in info.value.message and "\n" not in info.value.message


def test_npz_and_text_files_are_not_npy(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.zeros(3))
    (tmp_path / "b.npy").write_text("1 2 3\n")
    with pytest.raises(FormatError, match="npz archive"):
        read_npy(tmp_path / "a.npz")
    with pytest.raises(FormatError, match="not a .npy file"):
        read_npy(tmp_path / "b.npy")
