"""The bench's suites: prompts grouped by the kind of text they ask for
(copy-heavy edits, summaries, fresh code, chat, math, JSON extraction).
Packaged suites live in suites/*.toml; a suite file of the same shape can be
passed by path. A prompt may name a JSON schema file (`schema = "…"`,
relative to its suite file): its replies are decoded under that schema.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from specchat.errors import SpecchatError
from specchat.schema import GrammarSpec, load_schema

SUITES = ("code-edit", "summarize", "code-gen", "chat", "math", "json")


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    constraint: GrammarSpec | None = None  # the schema its replies must match


@dataclass(frozen=True)
class Suite:
    name: str
    prompts: tuple[Prompt, ...]
    description: str = ""


def load_suite(name: str) -> Suite:
    """A packaged suite by name, or a suite file (path ending in .toml)."""
    if name.endswith(".toml"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise SpecchatError(f"no suite file at {path}", hint="pass a suite name or the path of a .toml file")
        folder: Traversable = path.parent
        text = path.read_text("utf-8")
    elif name in SUITES:
        folder = resources.files("specchat.bench").joinpath("suites")
        text = folder.joinpath(f"{name}.toml").read_text("utf-8")
    else:
        raise SpecchatError(
            f"unknown suite {name!r}", hint=f"choose from: {', '.join(SUITES)} (or a .toml file)", code=2
        )
    data = tomllib.loads(text)
    prompts = tuple(Prompt(p["id"], p["text"], _schema(folder, p.get("schema"))) for p in data.get("prompt", []))
    if not prompts:
        raise SpecchatError(f"suite {name!r} has no prompts", hint="add [[prompt]] tables with id and text")
    return Suite(data.get("name", Path(name).stem), prompts, data.get("description", ""))


def _schema(folder: Traversable, name: str | None) -> GrammarSpec | None:
    return None if name is None else load_schema(str(folder.joinpath(name)))
