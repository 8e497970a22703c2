"""`paths.read_regular` (and `read_regular_stat`, which attaching, write-back
and the kept files read through) and the two files read through it that the
user names or keeps: settings.toml and a JSON schema or grammar file. What
each does with a FIFO, a folder, a link, a huge file and any bytes at all.

Real parts: real files, FIFOs and links in a temporary folder, the real
settings reader and writer, the real schema loader.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specchat import config, paths
from specchat.decoding import schema
from specchat.errors import SpecchatError


def _within(seconds: float, work: Callable[[], object]) -> object:
    """What `work` returned or raised, failing where it waits past `seconds` (a FIFO's open)."""
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_catch(work)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"waited over {seconds} s: a FIFO was opened for a writer that never comes"
    return outcome[0]


def _catch(work: Callable[[], object]) -> object:
    try:
        return work()
    except BaseException as err:  # noqa: BLE001 - what it raised is the finding
        return err


@given(data=st.binary(max_size=2048), limit=st.integers(min_value=0, max_value=2048))
def test_read_regular_gives_every_byte_up_to_the_limit_and_refuses_past_it(tmp_path_factory, data, limit):
    path = tmp_path_factory.mktemp("r") / "f"
    path.write_bytes(data)
    if len(data) <= limit:
        assert paths.read_regular(path, limit) == data
        got, status = paths.read_regular_stat(path, limit)
        assert (got, status.st_size, status.st_ino) == (data, len(data), os.stat(path).st_ino)
    else:
        with pytest.raises(paths.TooBig) as caught:
            paths.read_regular(path, limit)
        assert (caught.value.size, caught.value.limit) == (len(data), limit)


def test_read_regular_follows_a_link_only_when_asked(tmp_path):
    (tmp_path / "real").write_bytes(b"x = 1\n")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert paths.read_regular(tmp_path / "link", 100, follow_links=True) == b"x = 1\n"
    with pytest.raises(OSError):
        paths.read_regular(tmp_path / "link", 100)


# --- settings.toml ------------------------------------------------------------------------


def test_a_fifo_for_settings_gives_the_defaults_and_one_line_at_once(tmp_path):
    path = tmp_path / "settings.toml"
    os.mkfifo(path)
    loaded = _within(5, lambda: config.read_settings(path))
    assert isinstance(loaded, config.Loaded)
    assert loaded.settings == config.Settings()
    assert loaded.errors == [f"{path} is not a regular file; using the defaults"]


def test_a_huge_settings_file_gives_the_defaults_and_names_its_size(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_bytes(b"# " + b"x" * config.MAX_SETTINGS_BYTES + b"\n")
    loaded = config.read_settings(path)
    assert loaded.settings == config.Settings()
    assert loaded.errors == [f"{path} is {config.MAX_SETTINGS_BYTES + 3} bytes, too big for settings; using the defaults"]


def test_a_folder_for_settings_gives_the_defaults(tmp_path):
    path = tmp_path / "settings.toml"
    path.mkdir()
    loaded = config.read_settings(path)
    assert loaded.settings == config.Settings()
    assert loaded.errors == [f"{path} is not a regular file; using the defaults"]


def test_settings_kept_through_a_link_are_read_through_it(tmp_path):
    (tmp_path / "dotfiles.toml").write_text('theme = "light"\n')
    path = tmp_path / "settings.toml"
    path.symlink_to(tmp_path / "dotfiles.toml")
    loaded = config.read_settings(path)
    assert (loaded.settings.theme, loaded.errors) == ("light", [])


def test_saving_over_a_fifo_says_so_and_leaves_the_fifo(tmp_path):
    path = tmp_path / "settings.toml"
    os.mkfifo(path)
    outcome = _within(5, lambda: config.save_settings({"theme": "light"}, path))
    assert isinstance(outcome, OSError)
    assert str(outcome) == f"{path} is not a settings file specchat can rewrite"
    assert path.is_fifo()


def test_saving_with_no_file_yet_makes_one(tmp_path):
    path = tmp_path / "settings.toml"
    config.save_settings({"theme": "light"}, path)
    assert config.read_settings(path).settings.theme == "light"


# --- a schema or grammar file -------------------------------------------------------------


def _schema_error(path) -> str:
    outcome = _within(5, lambda: schema.load_schema(path, warn=None))
    assert isinstance(outcome, SpecchatError), outcome
    return outcome.one_line()


def test_a_fifo_for_a_schema_is_one_line_at_once(tmp_path):
    path = tmp_path / "person.json"
    os.mkfifo(path)
    assert _schema_error(path) == f"{path} is not a regular file (name the JSON schema file itself, not a folder or a pipe)"


def test_a_folder_for_a_schema_is_one_line(tmp_path):
    assert _schema_error(tmp_path) == f"{tmp_path} is not a regular file (name the JSON schema file itself, not a folder or a pipe)"


def test_a_huge_schema_is_refused_by_its_size(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(schema.MAX_FILE_BYTES + 1)  # sparse: the size says it, nothing is read
    assert _schema_error(path) == "huge.json is 16.0 MB: too big for a JSON schema (specchat reads JSON schema files up to 16.0 MB)"


def test_a_schema_named_through_a_link_is_read(tmp_path):
    (tmp_path / "real.json").write_text('{"type": "object", "properties": {"name": {"type": "string"}}}')
    (tmp_path / "person.json").symlink_to(tmp_path / "real.json")
    spec = schema.load_schema(tmp_path / "person.json", warn=None)
    assert spec.gbnf and spec.source


@given(data=st.binary(max_size=512))
def test_any_bytes_as_a_schema_give_a_schema_or_one_clear_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("s") / "any.json"
    path.write_bytes(data)
    try:
        schema.load_schema(path, warn=None)
    except SpecchatError as err:
        assert "\n" not in str(err) and err.hint
