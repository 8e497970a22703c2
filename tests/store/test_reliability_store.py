"""Hostile and clumsy input, the store and the command line: "verified"
means hashed, arguments are checked at the edge, rm and pull take turns.
test_reliability.py has the screen and startup."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from specchat.config import Settings
from specchat.errors import SpecchatError
from specchat.history.database import History
from specchat.store import files as store
from specchat.store.catalog import load_catalog
from specchat.store.pairs import resolve_pair
from specchat.store.pull import pull_pair
from tests.support.hostile import cli, err_lines, flip_a_byte, put, read_only, specchat

# --- "verified" means the bytes were hashed -----------------------------------------

PAIRS = """
[pairs.one]
target = { repo = "org/big-GGUF", filename = "big.gguf" }
draft = { repo = "org/small-GGUF", filename = "small.gguf" }

[pairs.twin-a]
target = { repo = "org/twin-GGUF", filename = "t.gguf" }
draft = { repo = "org/twin-GGUF", filename = "d.gguf" }

[pairs.twin-b]
target = { repo = "org/twin-GGUF", filename = "t.gguf" }
draft = { repo = "org/twin-GGUF", filename = "d.gguf" }

[pairs.v2]
target = { repo = "org/big-GGUF", filename = "big.gguf", revision = "v2" }
draft = { repo = "org/small-GGUF", filename = "small.gguf" }
"""


@pytest.fixture
def pairs(write_pairs):
    write_pairs(PAIRS)
    catalog = load_catalog()
    for _, f in catalog.get("one").roles():
        put(f, os.urandom(5000))
    return catalog


def test_a_flipped_byte_is_not_verified(pairs):
    f = pairs.get("one").target
    path = store.file_path(f)
    assert store.check(f) == "verified"
    flip_a_byte(path)
    assert store.check(f) == "damaged" and not store.is_ready(f)
    with pytest.raises(SpecchatError) as err:
        resolve_pair("one")
    assert err.value.message == f"{path} does not match the sha256 it was pulled with: the file changed on disk"
    assert err.value.hint == "run `specchat pull one` to download it again"
    lines = cli("models").stdout.splitlines()
    assert "  one (custom): partly pulled" in lines
    assert "    target     5.0 kB  DAMAGED: changed on disk, its sha256 no longer matches; fix: specchat pull one" in lines


@pytest.mark.parametrize("command", [["run", "hi"], ["bench", "--drafters", "ngram", "--suites", "chat"]])
def test_run_and_bench_refuse_a_damaged_file_naming_it_and_the_fix(pairs, specchat_home, command):
    path = store.file_path(pairs.get("one").target)
    flip_a_byte(path)
    done = specchat(*command, "--pair", "one", env={"SPECCHAT_HOME": str(specchat_home)})
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines[0] == f"error: {path} does not match the sha256 it was pulled with: the file changed on disk"
    assert lines[1] == "hint: run `specchat pull one` to download it again"


def test_models_verify_rehashes_even_when_the_mtime_hides_a_change(pairs):
    path = store.file_path(pairs.get("one").draft)
    flip_a_byte(path, keep_mtime=True)
    assert store.check(pairs.get("one").draft) == "verified"  # size and mtime say nothing changed
    done = cli("models", "--verify")
    assert done.exit_code == 1
    lines = done.stdout.splitlines()
    assert f"ok       {store.file_path(pairs.get('one').target)}" in lines
    assert f"FAILED   {path}: changed on disk: its sha256 no longer matches; fix: specchat pull one" in lines
    assert "1 of 2 files verified" in lines
    assert store.check(pairs.get("one").draft) == "damaged"  # remembered without hashing again


def test_pull_fetches_a_damaged_file_again(hub_server, write_pairs):
    data = os.urandom(200_000)
    write_pairs('[pairs.h]\ntarget = { repo = "test/h-GGUF", filename = "h.gguf" }\n'
                'draft = { repo = "test/h-GGUF", filename = "h.gguf" }\n')
    hub_server.add("test/h-GGUF", "h.gguf", data)
    out = io.StringIO()
    pull_pair("h", source="hub", progress=False, console=Console(file=out, width=300))
    path = store.file_path(load_catalog().get("h").target)
    flip_a_byte(path)
    out = io.StringIO()
    result = pull_pair("h", source="hub", progress=False, console=Console(file=out, width=300))
    assert result["already"] is False and "already pulled" not in out.getvalue()
    assert path.read_bytes() == data


def test_the_store_keeps_each_revision_apart(hub_server, write_pairs):
    main, v2 = os.urandom(100_000), os.urandom(100_001)
    write_pairs('[pairs.m]\ntarget = { repo = "test/r-GGUF", filename = "r.gguf" }\n'
                'draft = { repo = "test/r-GGUF", filename = "r.gguf" }\n'
                '[pairs.n]\ntarget = { repo = "test/r-GGUF", filename = "r.gguf", revision = "v2" }\n'
                'draft = { repo = "test/r-GGUF", filename = "r.gguf", revision = "v2" }\n')
    hub_server.add("test/r-GGUF", "r.gguf", main)
    hub_server.add("test/r-GGUF", "r.gguf", v2, revision="v2")
    quiet = Console(file=io.StringIO(), width=300)
    pull_pair("m", source="hub", progress=False, console=quiet)
    result = pull_pair("n", source="hub", progress=False, console=quiet)
    assert result["already"] is False
    m, n = (store.file_path(load_catalog().get(p).target) for p in ("m", "n"))
    assert m != n and m.read_bytes() == main and n.read_bytes() == v2
    assert n.parent.name == "test--r-GGUF@v2"


# --- arguments are checked at the edge -------------------------------------------------


@pytest.mark.parametrize("args,first", [
    (["--temp", "nan"], "error: --temp nan is out of range: it must be a finite number ≥ 0"),
    (["--temp", "inf"], "error: --temp inf is out of range: it must be a finite number ≥ 0"),
    (["--temp", "-1"], "error: --temp -1.0 is out of range: it must be a finite number ≥ 0"),
    (["--top-p", "2"], "error: --top-p 2.0 is out of range: it must be more than 0 and at most 1"),
    (["--top-k", "-3"], "error: --top-k -3 is out of range: it must be ≥ 0"),
    (["--k", "0"], "error: --k 0 is out of range: it must be between 1 and 64"),
    (["--k", "-5"], "error: --k -5 is out of range: it must be between 1 and 64"),
    (["--k", "1000"], "error: --k 1000 is out of range: it must be between 1 and 64"),
    (["--max-tokens", "0"], "error: --max-tokens 0 is out of range: a reply needs at least 1 token"),
    (["--max-tokens", "-5"], "error: --max-tokens -5 is out of range: a reply needs at least 1 token"),
    (["--ctx", "1"], "error: --ctx 1 is out of range: the context must hold at least 256 tokens"),
])
def test_run_checks_its_numbers_first(args, first, tmp_path):
    done = specchat("run", "hi", *args, env={"SPECCHAT_HOME": str(tmp_path)})
    lines = err_lines(done)
    assert done.returncode == 2
    assert lines[0] == first and lines[1].startswith("hint: ") and len(lines) == 2


def test_run_chat_and_bench_share_the_k_limit(tmp_path):
    from specchat.decoding.target import K_MAX

    env = {"SPECCHAT_HOME": str(tmp_path)}
    run = err_lines(specchat("run", "hi", "--k", str(K_MAX + 1), env=env))[0]
    chat = err_lines(specchat("chat", "--k", str(K_MAX + 1), env=env))[0]
    bench = err_lines(specchat("bench", "--k", str(K_MAX + 1), env=env))[0]
    assert run == chat == f"error: --k {K_MAX + 1} is out of range: it must be between 1 and {K_MAX}"
    assert f"1..{K_MAX}" in bench or f"1 and {K_MAX}" in bench
    assert "out of range" not in err_lines(specchat("run", "hi", "--k", str(K_MAX), env=env))[0]


def test_a_prompt_that_is_not_utf8_is_one_line(tmp_path):
    done = specchat("run", b"caf\xe9 ok", env={"SPECCHAT_HOME": str(tmp_path)})
    lines = err_lines(done)
    assert done.returncode == 2
    assert lines[0] == "error: the prompt is not valid UTF-8 (a stray byte at character 4)"
    assert lines[1].startswith("hint: ")


def hostile_gguf(path: Path) -> Path:
    """132 bytes: a GGUF header whose first key claims to be 2^62 bytes long."""
    data = b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 62)
    path.write_bytes(data + b"A" * (132 - len(data)))
    return path


def test_a_gguf_with_a_huge_key_length_is_refused_quickly(tmp_path):
    from specchat.store.compat import read_vocab

    path = hostile_gguf(tmp_path / "evil.gguf")
    assert path.stat().st_size == 132
    t0 = time.perf_counter()
    with pytest.raises(SpecchatError) as err:
        read_vocab(path)
    assert time.perf_counter() - t0 < 1.0
    assert err.value.message == f"{path} is not a readable GGUF file (its header declares a value of {1 << 62} bytes)"


@pytest.mark.real
def test_run_refuses_a_hostile_draft(tiny_pair, tmp_path):
    evil = hostile_gguf(tmp_path / "evil.gguf")
    done = specchat("run", "hi", "--target", str(tiny_pair[0]), "--draft", str(evil), "--max-tokens", "4")
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines[0] == f"error: {evil} is not a readable GGUF file (its header declares a value of {1 << 62} bytes)"


# --- rm and pull take turns; pairs that share files go together -----------------------


def test_rm_waits_for_no_pull_it_refuses_while_one_holds_the_file(pairs, specchat_home):
    f = pairs.get("one").target
    path = store.file_path(f)
    partial = store.partial_path(path)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom specchat.store import files as store\nfrom specchat.store.catalog import load_catalog\n"
         "f = load_catalog().get('one').target\n"
         "with store.lock(f):\n"
         "    store.partial_path(store.file_path(f)).write_bytes(b'unpacking')\n"
         "    print('held', flush=True)\n"
         "    sys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "SPECCHAT_HOME": str(specchat_home)},
    )
    try:
        assert holder.stdout.readline() == b"held\n"
        done = specchat("rm", "one", env={"SPECCHAT_HOME": str(specchat_home)})
        lines = err_lines(done)
        assert done.returncode == 1
        assert lines[0] == "error: big.gguf is being pulled by another specchat"
        assert partial.read_bytes() == b"unpacking" and path.is_file()
    finally:
        holder.communicate(b"\n", timeout=30)
    assert cli("rm", "one").exit_code == 0
    assert not path.exists() and not partial.exists()


def test_a_lock_file_deleted_by_rm_is_not_a_lock(pairs):
    """rm deletes the lock file while holding it. A pull that was waiting on
    that file must take the lock anew, or it and a later pull would both
    "hold" the lock (flock locks are per open file, so threads show it)."""
    f = pairs.get("one").target
    lock_path = store.file_path(f).with_name("big.gguf.lock")
    holding, done = threading.Event(), threading.Event()

    def waiter():
        with store.lock(f):
            holding.set()
            done.wait(10)

    with store.lock(f):
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.2)  # the waiter has opened the old lock file and waits on it
        lock_path.unlink()
    assert holding.wait(10)
    try:
        with pytest.raises(store.Busy):
            with store.lock(f, wait=False):
                pass
    finally:
        done.set()
        thread.join()


def test_two_pairs_sharing_every_file_are_removed_together(write_pairs):
    write_pairs(PAIRS)
    catalog = load_catalog()
    paths = [put(f, os.urandom(100)) for _, f in catalog.get("twin-a").roles()]
    alone = cli("rm", "twin-a")
    assert alone.exit_code == 0
    assert alone.stdout.splitlines() == [*(f"kept {p} (used by twin-b)" for p in paths),
                                         "to delete it too: specchat rm twin-a twin-b"]
    both = cli("rm", "twin-a", "twin-b")
    assert both.exit_code == 0
    assert both.stdout.splitlines() == [f"deleted {p}" for p in paths]
    assert not any(p.exists() for p in paths)


async def test_the_chat_refuses_a_damaged_pair_naming_the_file_and_the_fix(pairs, tmp_path):
    from specchat.tui.app import SpecchatApp
    from specchat.tui.state.models import Models
    from tests.support.tui import wait_until

    path = store.file_path(pairs.get("one").draft)
    flip_a_byte(path)
    app = SpecchatApp(Models(), Settings(pair="one"), history=History(tmp_path / "h.sqlite3"), save_settings=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: any(n.title == "loading failed" for n in app._notifications))
        (note,) = [n.message for n in app._notifications if n.title == "loading failed"]
        assert note == (f"{path} does not match the sha256 it was pulled with: the file changed on disk "
                        "(run `specchat pull one` to download it again)")
        assert app.chat.session is None


async def test_an_unknown_pair_in_the_settings_falls_back_to_the_default(specchat_home):
    from specchat.tui.app import SpecchatApp
    from specchat.tui.state.models import Models
    from tests.support.tui import wait_until

    app = SpecchatApp(Models(), Settings(pair="nope"), history=None, save_settings=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "PullScreen" and app.screen.query("#pull-yes"))
        (note,) = [n.message for n in app._notifications if n.title == "model pairs"]
        assert note.startswith("unknown pair 'nope' (known pairs: qwen2.5-coder-1.5b, ")
        assert app.screen.pair_name == load_catalog().default  # offered instead


async def test_a_broken_pairs_file_never_stops_the_chat(write_pairs, specchat_home):
    from specchat.tui.app import SpecchatApp
    from specchat.tui.state.models import Models
    from tests.support.tui import wait_until

    path = write_pairs("[pairs.x\n")
    app = SpecchatApp(Models(), Settings(), history=None, save_settings=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_until(pilot, lambda: any(n.title == "model pairs" for n in app._notifications))
        await pilot.press("f4")
        await pilot.pause()
        notes = [n.message for n in app._notifications if n.title == "model pairs"]
        assert len(notes) == 2 and all(m.startswith(f"{path} is not valid TOML") for m in notes)
        assert app.is_running and app.chat.session is None


def test_chat_with_an_unknown_pair_is_one_line(tmp_path):
    done = specchat("chat", "--pair", "nope", env={"SPECCHAT_HOME": str(tmp_path)})
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines == ["error: unknown pair 'nope'", lines[1]] and lines[1].startswith("hint: known pairs: ")


def test_rm_on_a_read_only_store_is_one_line(pairs, specchat_home):
    folder = store.file_path(pairs.get("one").target).parent
    with read_only(folder):
        done = specchat("rm", "one", env={"SPECCHAT_HOME": str(specchat_home)})
    lines = err_lines(done)
    assert done.returncode == 1
    assert lines[0].startswith(f"error: cannot delete {folder}/big.gguf: the model store is read-only")
    assert lines[1].startswith("hint: fix the permissions of")
