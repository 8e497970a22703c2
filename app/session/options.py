"""What a session is opened with, as two values resolved once at the edge.

`LoadOptions` say which pair and how llama.cpp loads it; `DecodeOptions`
say how a reply is decoded. Every command that loads a pair (the chat,
`run`, `bench`, `models check`) builds its LoadOptions with `load_options`,
which holds the one order each choice is made in: the command's flag, then
the environment, then settings.toml, then the default. Below the edge
nothing reads a setting again: the loader, the session and the llama.cpp
driver take these values as they are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from specchat import checks, kept
from specchat.config import Settings, load_settings
from specchat.decoding.sampling import SamplingParams

EXTRA_BUFTS_ENV = "SPECCHAT_EXTRA_BUFTS"


@dataclass(frozen=True)
class LoadOptions:
    """Which pair, and how llama.cpp loads it."""

    pair: str | None = None  # a pair by name (None: the default pair)...
    target: str | None = None  # ...or by its files
    draft: str | None = None
    threads: int | None = None  # None: the physical cores
    ctx: int | None = None  # None: the model's trained context, at most 8192
    n_gpu_layers: int = -1  # -1: every layer the backend takes, 0: none
    draft_n_gpu_layers: int = -1
    extra_bufts: str = "auto"  # llama.cpp's extra CPU buffer types (llamacpp.kernels): auto | on | off
    extra_bufts_from: str = "the default"  # where that was chosen, for F2 and `run --json`
    verbose: bool = False  # llama.cpp's own log on stderr


@dataclass(frozen=True)
class DecodeOptions:
    """How a session decodes its replies, until the user changes it."""

    drafter: str = "auto"
    k: int | None = None  # the most a drafter proposes a round; None: the drafter's own (ChatSession resolves it)
    sampling: SamplingParams = SamplingParams()
    baseline_every: int = 8  # a plain step among the drafted rounds every this many, for the shown speedup
    system: str | None = None
    max_tokens: int = 1024


def load_options(
    pair: str | None = None,
    target: str | None = None,
    draft: str | None = None,
    *,
    threads: int | None = None,
    ctx: int | None = None,
    n_gpu_layers: int = -1,
    draft_n_gpu_layers: int = -1,
    extra_bufts: str | None = None,
    verbose: bool = False,
    settings: Settings | None = None,
) -> LoadOptions:
    """LoadOptions from a command's flags (None: not given; each checked here,
    a bad one is one line), then SPECCHAT_EXTRA_BUFTS, then `settings`
    (settings.toml where not given)."""
    s = load_settings(warn=kept.warn) if settings is None else settings  # a command's: its problems on stderr
    bufts, where = _extra_bufts(extra_bufts, s)
    return LoadOptions(
        pair,
        target,
        draft,
        threads=(s.threads if threads is None else checks.threads(threads)) or None,
        ctx=(s.ctx if ctx is None else checks.ctx(ctx)) or None,
        n_gpu_layers=checks.gpu_layers(n_gpu_layers),
        draft_n_gpu_layers=checks.gpu_layers(draft_n_gpu_layers, "--draft-n-gpu-layers"),
        extra_bufts=bufts,
        extra_bufts_from=where,
        verbose=verbose,
    )


def _extra_bufts(flag: str | None, settings: Settings) -> tuple[str, str]:
    """(auto | on | off, where it was chosen): --extra-bufts, the environment, the settings."""
    if flag is not None:
        return checks.extra_bufts(flag), "--extra-bufts"
    env = os.environ.get(EXTRA_BUFTS_ENV, "")
    if env:
        return checks.extra_bufts(env, EXTRA_BUFTS_ENV), EXTRA_BUFTS_ENV
    return settings.extra_bufts, "settings.toml"
