"""`paths.open_regular`, the one way specchat opens a file it did not just
make (an attached file, a kept measurement, a model's header, a stored
download, the picker's look for binary files): what it does with a FIFO, a
link, a folder, a device and any bytes at all.

Real parts: real files, FIFOs, links and /dev/null in a temporary folder.
"""

from __future__ import annotations

import os
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specchat import paths


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@given(data=st.binary(max_size=4096))
def test_a_regular_file_reads_back_exactly_what_it_holds(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("f") / "file.bin"
    path.write_bytes(data)
    with paths.open_regular(path) as f:
        assert f.read() == data
        assert os.get_blocking(f.fileno())  # reads wait for the bytes, as a plain open's do


def test_a_fifo_is_refused_at_once_and_no_descriptor_is_left_open(tmp_path):
    fifo = tmp_path / "kept.json"
    os.mkfifo(fifo)
    before = _open_fds()
    done = threading.Event()
    outcome: list[BaseException] = []

    def attempt():
        try:
            paths.open_regular(fifo)
        except BaseException as err:  # noqa: BLE001 - what it raised is the finding
            outcome.append(err)
        done.set()

    threading.Thread(target=attempt, daemon=True).start()
    assert done.wait(5), "opening a FIFO waited for a writer"
    assert isinstance(outcome[0], paths.NotRegularFile)
    assert _open_fds() == before


@pytest.mark.parametrize("what", ["folder", "device"])
def test_a_folder_or_a_device_is_no_regular_file(tmp_path, what):
    path = tmp_path if what == "folder" else "/dev/null"
    before = _open_fds()
    with pytest.raises(paths.NotRegularFile):
        paths.open_regular(path)
    assert _open_fds() == before


def test_a_link_is_not_followed_unless_asked(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("the real file")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with pytest.raises(OSError) as caught:
        paths.open_regular(link)
    assert not isinstance(caught.value, paths.NotRegularFile)  # refused at the open (ELOOP), nothing was read
    with paths.open_regular(link, follow_links=True) as f:
        assert f.read() == b"the real file"


def test_a_link_to_a_fifo_is_refused_even_when_links_are_followed(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "model.gguf"
    link.symlink_to(fifo)
    with pytest.raises(paths.NotRegularFile):
        paths.open_regular(link, follow_links=True)


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(FileNotFoundError):
        paths.open_regular(tmp_path / "gone")
