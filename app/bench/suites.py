"""The bench's suites: prompts grouped by the kind of text they ask for
(copy-heavy edits, summaries, fresh code, chat, math, JSON extraction).
Packaged suites live in suites/*.toml; a suite file of the same shape can be
passed by path. A prompt may name a JSON schema file (`schema = "…"`,
relative to its suite file): its replies are decoded under that schema.
A prompt may be a conversation: `turns = ["…", "…"]` in place of `text`,
each later turn asked after the reply to the one before, in the same chat.
`--prompts PATH` (`load_prompts`) is the user's own suite: a folder of .txt
files, one prompt each, or one TOML file of the suites' shape.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from specchat import paths
from specchat.decoding.schema import GrammarSpec, load_schema
from specchat.errors import SpecchatError

MAX_FILE_BYTES = 1 << 20  # a prompt or a suite file: past this it would not fit a context anyway
SUITES = ("code-edit", "summarize", "code-gen", "chat", "math", "json")


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str  # the first (or only) message
    constraint: GrammarSpec | None = None  # the schema its replies must match
    followups: tuple[str, ...] = ()  # the messages asked after it, each after the reply to the one before

    @property
    def turns(self) -> tuple[str, ...]:
        return (self.text, *self.followups)


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
        try:
            text = _text_of(path)
        except paths.TooBig as err:
            raise SpecchatError(f"the suite {path} is {_too_big(err)}", hint=SUITE_SHAPE, code=2) from None
        except (OSError, ValueError) as err:  # UnicodeDecodeError is a ValueError
            why = getattr(err, "strerror", None) or err
            raise SpecchatError(f"cannot read the suite {path} ({why})", hint=SUITE_SHAPE, code=2) from None
    elif name in SUITES:
        folder = resources.files("specchat.bench").joinpath("suites")
        text = folder.joinpath(f"{name}.toml").read_text("utf-8")
    else:
        raise SpecchatError(
            f"unknown suite {name!r}",
            hint=f"choose from: {', '.join(SUITES)}, mt-bench, humaneval (or a .toml file)",
            code=2,
        )
    return _parse(text, folder, name)


def _parse(text: str, folder: Traversable, name: str) -> Suite:
    """A suite from its TOML text; `folder` holds the schema files it names."""
    try:
        data = tomllib.loads(text)
        prompts = tuple(_prompt(p, folder) for p in data.get("prompt", []))
    except tomllib.TOMLDecodeError as err:
        raise SpecchatError(f"{name} is not valid TOML: {err}", hint=SUITE_SHAPE, code=2) from None
    except RecursionError:
        raise SpecchatError(f"{name} is not valid TOML: nested too deep", hint=SUITE_SHAPE, code=2) from None
    except (KeyError, TypeError, AttributeError):
        raise SpecchatError(
            f"{name}: every [[prompt]] needs an id and a text (or turns)", hint=SUITE_SHAPE, code=2
        ) from None
    if not prompts:
        raise SpecchatError(f"suite {name!r} has no prompts", hint="add [[prompt]] tables with id and text")
    return Suite(str(data.get("name", Path(name).stem)), prompts, str(data.get("description", "")))


SUITE_SHAPE = 'a suite file holds [[prompt]] tables: id = "…" and text = "…" (or turns = ["…", "…"])'


def _prompt(table: dict, folder: Traversable) -> Prompt:
    """One [[prompt]]: a text, or a conversation's turns (a list of texts)."""
    if "turns" in table:
        turns = table["turns"]
        if "text" in table or not isinstance(turns, list) or not turns:
            raise TypeError("a prompt has a text or a list of turns")
        first, *rest = (_text(t) for t in turns)
        return Prompt(str(table["id"]), first, _schema(folder, table.get("schema")), tuple(rest))
    return Prompt(str(table["id"]), _text(table["text"]), _schema(folder, table.get("schema")))


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TypeError("a prompt's text is a non-empty string")
    return value


def load_prompts(path: str) -> Suite:
    """The user's own prompts as a suite: a folder of .txt files (one prompt
    each, named by the file's stem, in name order) or one suite TOML file."""
    where = Path(path).expanduser()
    if where.is_dir():
        files = sorted(f for f in where.iterdir() if f.suffix == ".txt" and f.is_file())
        for f in files:  # a link to a file elsewhere (/etc/shadow) is not a prompt of this folder
            if paths.link_out(f, where) is not None:
                raise SpecchatError(
                    f"--prompts: {f} links to a file outside {where}",
                    hint="copy the prompt into the folder instead of linking to it",
                    code=2,
                )
        prompts = tuple(Prompt(f.stem, _read_prompt(f)) for f in files)
        if not prompts:
            raise SpecchatError(
                f"--prompts: no .txt files in {where}", hint="put one prompt in each NAME.txt file", code=2
            )
        return Suite(where.name or "prompts", prompts, f"prompts from {where}")
    if where.is_file() and where.suffix == ".toml":
        return _parse(_read(where), where.parent, str(where))
    what = "is not a folder or a .toml file" if where.exists() else "does not exist"
    raise SpecchatError(
        f"--prompts: {where} {what}", hint="pass a folder of .txt files (one prompt each) or a suite .toml", code=2
    )


def _read(path: Path) -> str:
    try:
        return _text_of(path)
    except paths.TooBig as err:
        raise SpecchatError(
            f"--prompts: {path} is {_too_big(err)}", hint="prompts are UTF-8 text files", code=2
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecchatError(
            f"--prompts: cannot read {path}: {getattr(err, 'strerror', None) or err}",
            hint="prompts are UTF-8 text files",
            code=2,
        ) from None


def _text_of(path: Path) -> str:
    """A suite's or a prompt's text, read as `paths.read_regular` reads: a
    FIFO swapped in after the checks never hangs the bench, and a huge file
    is refused unread (a link is followed: the callers judge where it leads)."""
    return paths.read_regular(path, MAX_FILE_BYTES, follow_links=True).decode("utf-8")


def _too_big(err: paths.TooBig) -> str:
    return f"{err.size:,} bytes, over the {err.limit >> 20} MiB a prompt or a suite may hold"


def _read_prompt(path: Path) -> str:
    text = _read(path).strip()
    if not text:
        raise SpecchatError(f"--prompts: {path} is empty", hint="write one prompt in each .txt file", code=2)
    return text


def _schema(folder: Traversable, name: str | None) -> GrammarSpec | None:
    return None if name is None else load_schema(str(folder.joinpath(name)))
