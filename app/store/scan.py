"""`specchat models scan`: find the GGUF files a user already has and say
which of them can draft for which.

Where it looks (`default_places`): LM Studio's models folders, Ollama's
model store (its manifests name the blobs), llama.cpp's download cache,
the Hugging Face hub cache (the `snapshots/` links) and the folder
SPECCHAT_MODELS names, or only the folders the user names, each walked
without recursion and without following links to folders, MAX_FOLDERS
folders at most (specchat.walk). Only GGUF headers are read
(compat.read_vocab; compat.check_whole compares the size their tensors
need with the file's). Files are grouped by tokenizer; each target is checked against every smaller file
with llama.cpp's rule (compat.first_mismatch), and the smallest draft that
passes is proposed as a local pair (`--add` registers them with
local.add). A file that cannot be read is one line, and the scan goes on.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich import filesize

from specchat import paths
from specchat.errors import SpecchatError
from specchat.store import local
from specchat.store.catalog import load_catalog
from specchat.store.compat import Architecture, Vocab, check_whole, first_mismatch, read_architecture_kinds, read_vocab
from specchat.textsafe import safe_json, safe_text
from specchat.walk import walk

OLLAMA_MODEL = "application/vnd.ollama.image.model"
_SPLIT_PART = re.compile(r"-(\d{5})-of-\d{5}\.gguf$", re.IGNORECASE)
# Folders walked in one place at most: a tool's model folder holds far
# fewer, and a tree this big (a home folder, a whole disk) is left with one line.
MAX_FOLDERS = 100_000
MAX_MANIFEST_BYTES = 1 << 20  # an Ollama manifest names a few blobs in about a kilobyte


@dataclass(frozen=True)
class Found:
    """One GGUF file: where it is, what its tool calls it, its tokenizer."""

    place: str
    name: str
    path: Path
    size: int
    vocab: Vocab
    architecture: Architecture | None = None  # its kinds (dense, MoE, SWA, hybrid, MTP), where the header says

    def tokenizer_key(self) -> tuple:
        v = self.vocab
        return (v.type, v.bos, v.eos, v.add_bos, v.add_eos, tuple(v.tokens))


@dataclass
class Candidates:
    """A target and the smaller files checked as its drafts."""

    target: Found
    drafts: list[Found] = field(default_factory=list)
    refused: list[tuple[Found, str]] = field(default_factory=list)


@dataclass
class Scan:
    places: list[tuple[str, Path]]
    found: list[Found]
    problems: list[str]


# --- where the tools keep their files -------------------------------------------------


def default_places() -> list[tuple[str, Path]]:
    home = Path.home()
    hf_home = Path(os.environ.get("HF_HOME") or home / ".cache" / "huggingface")
    return [
        ("LM Studio", home / ".lmstudio" / "models"),
        ("LM Studio", home / ".cache" / "lm-studio" / "models"),
        ("Ollama", Path(os.environ.get("OLLAMA_MODELS") or home / ".ollama" / "models")),
        ("llama.cpp cache", Path(os.environ.get("LLAMA_CACHE") or home / ".cache" / "llama.cpp")),
        ("Hugging Face cache", Path(os.environ.get("HF_HUB_CACHE") or hf_home / "hub")),
    ] + ([("SPECCHAT_MODELS", Path(own).expanduser())] if (own := os.environ.get("SPECCHAT_MODELS")) else [])


def _candidates(place: str, root: Path, problems: list[str]) -> Iterator[tuple[str, Path]]:
    """(name, path) of every GGUF file under `root` as its tool lays them out."""
    if place == "Ollama":
        yield from _ollama(root, problems)
        return
    for folder, names in _folders(root, problems):
        for name in names:
            if name.lower().endswith(".gguf"):
                path = folder / name
                yield (_hf_name(root, path) if place == "Hugging Face cache" else name), path


def _hf_name(root: Path, path: Path) -> str:
    """OWNER/REPO:FILE for models--OWNER--REPO/snapshots/REV/FILE."""
    parts = path.relative_to(root).parts
    if len(parts) >= 4 and parts[0].startswith("models--") and parts[1] == "snapshots":
        return parts[0].removeprefix("models--").replace("--", "/", 1) + ":" + "/".join(parts[3:])
    return path.name


def _ollama(root: Path, problems: list[str]) -> Iterator[tuple[str, Path]]:
    """Ollama's manifests/REGISTRY/NAMESPACE/MODEL/TAG name the model blob blobs/sha256-..."""
    manifests = root / "manifests"
    for folder, names in _folders(manifests, problems):
        for tag in names:
            manifest = folder / tag
            parts = manifest.relative_to(manifests).parts
            name = (
                f"{parts[2]}:{parts[3]}"
                if len(parts) == 4 and parts[:2] == ("registry.ollama.ai", "library")
                else "/".join(parts[:-1]) + ":" + parts[-1]
            )
            try:
                layers = json.loads(paths.read_regular(manifest, MAX_MANIFEST_BYTES, follow_links=True))["layers"]
                digest = next(layer["digest"] for layer in layers if layer.get("mediaType") == OLLAMA_MODEL)
            except (OSError, ValueError, KeyError, TypeError, StopIteration, RecursionError):
                problems.append(f"{manifest}: not an Ollama manifest naming a model blob; skipped")
                continue
            if not isinstance(digest, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
                problems.append(f"{manifest}: its model digest is not sha256:HEX; skipped")
                continue
            yield name, root / "blobs" / digest.replace(":", "-")


def _folders(root: Path, problems: list[str]) -> Iterator[tuple[Path, list[str]]]:
    """Each folder under `root` and its files' names (walk.walk: no recursion,
    links to folders not followed), MAX_FOLDERS at most."""
    for n, found in enumerate(walk(root, on_error=lambda err: problems.append(_cannot(err))), 1):
        if n > MAX_FOLDERS:
            problems.append(
                f"{root}: holds over {MAX_FOLDERS:,} folders; the rest was not scanned "
                "(name the folder that holds the models: specchat models scan DIR)"
            )
            return
        yield found


def _cannot(err: OSError) -> str:
    return f"{err.filename}: cannot be read ({err.strerror}); skipped"


# --- reading them --------------------------------------------------------------------------


def scan(dirs: list[str] | None = None) -> Scan:
    """Every GGUF file in the folders given (or the default places), read once each."""
    places = [("folder", Path(d).expanduser().absolute()) for d in dirs] if dirs else default_places()
    problems: list[str] = []
    found: list[Found] = []
    seen: set[str] = set()
    for place, root in places:
        if not root.is_dir():
            if dirs:
                problems.append(f"{root}: not a folder; skipped")
            continue  # that tool is not installed here
        for name, path in _candidates(place, root, problems):
            real = os.path.realpath(path)
            if real in seen:
                continue  # the same bytes under another name (a link, another snapshot)
            seen.add(real)
            item = _read(place, name, path, problems)
            if item is not None:
                found.append(item)
    return Scan(places, found, problems)


def _read(place: str, name: str, path: Path, problems: list[str]) -> Found | None:
    part = _SPLIT_PART.search(path.name)
    if part and int(part.group(1)) != 1:
        return None  # the tokenizer is in part 1
    try:
        size = path.stat().st_size
        vocab = read_vocab(path, str(path))
        check_whole(path)
    except OSError as err:
        problems.append(f"{path}: cannot be read ({err.strerror}); skipped")
        return None
    except SpecchatError as err:
        problems.append(f"{err.message}; skipped")
        return None
    if not vocab.tokens:
        problems.append(f"{path}: has no tokenizer (a projector or an adapter?); skipped")
        return None
    return Found(place, name, path, size, vocab, read_architecture_kinds(path))


# --- pairing them --------------------------------------------------------------------------


def tokenizers(found: list[Found]) -> list[list[Found]]:
    """The files grouped by identical tokenizer, biggest group first."""
    groups: dict[tuple, list[Found]] = {}
    for f in found:
        groups.setdefault(f.tokenizer_key(), []).append(f)
    return sorted(groups.values(), key=len, reverse=True)


def candidates(found: list[Found]) -> list[Candidates]:
    """Each file with a smaller one, biggest first: the drafts that pass llama.cpp's rule
    (smallest first) and, for the others, the first rule that fails."""
    by_size = sorted(found, key=lambda f: f.size, reverse=True)
    out = []
    for i, target in enumerate(by_size):
        smaller = [d for d in reversed(by_size[i + 1 :]) if d.size < target.size]
        if not smaller:
            continue
        entry = Candidates(target)
        for d in smaller:
            why = first_mismatch(target.vocab, d.vocab)
            if why is None:
                entry.drafts.append(d)
            else:
                entry.refused.append((d, why))
        out.append(entry)
    return out


def proposed_name(target: Found, taken: set[str]) -> str:
    """A pair name from the target's name: catalog names and other local pairs are not reused."""
    own = target.name.rsplit(":", 1)[-1] if target.place == "Hugging Face cache" else target.name
    stem = re.sub(r"\.gguf$", "", own, flags=re.IGNORECASE)
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._").lower() or "local"
    mine = local.load()
    if base in load_catalog().pairs:
        base += "-local"
    name, n = base, 2
    while name in taken or (name in mine and mine[name].target.path != target.path):
        name, n = f"{base}-{n}", n + 1
    return name


def proposals(entries: list[Candidates]) -> list[tuple[str, Found, Found]]:
    """(name, target, draft): each target with the smallest draft that passes."""
    taken: set[str] = set()
    out = []
    for e in entries:
        if e.drafts:
            name = proposed_name(e.target, taken)
            taken.add(name)
            out.append((name, e.target, e.drafts[0]))
    return out


# --- the command ---------------------------------------------------------------------------


# check(pair name or None, target path or None, draft path or None) -> the
# check's figures (bench.check.check_pair, which the CLI passes: the store
# measures nothing itself).
Check = Callable[[str | None, str | None, str | None], dict]


def run_scan(dirs: list[str] | None, add: bool = False, json_out: bool = False, check: Check | None = None) -> int:
    """`specchat models scan`: what it finds, the pairs it proposes, with
    `add` registered, with `check` each measured on this machine; returns
    the exit code (130 where Ctrl-C stopped a check)."""
    result = scan(dirs)
    entries = candidates(result.found)
    proposed = proposals(entries)
    if json_out:
        data = _as_json(result, entries, proposed)
        data["added"] = [_add(name, target, draft, say=False) for name, target, draft in proposed] if add else []
        data["measured"] = dict(_measured(proposed, add, check)) if check else {}
        print(safe_json(data, indent=2))
        return 130 if any(m["interrupted"] for m in data["measured"].values()) else 0
    for line in _lines(result, entries, proposed):
        print(safe_text(line))
    if add:
        for name, target, draft in proposed:
            _add(name, target, draft, say=True)
    stopped = False
    if check:
        for name, checked in _measured(proposed, add, check):
            print(safe_text(verdict_line(name, checked)), flush=True)
            stopped = checked["interrupted"]
    if add and proposed:
        print(safe_text(f"chat with `specchat --pair {proposed[0][0]}`"))
    return 130 if stopped else 0


def verdict_line(name: str, checked: dict) -> str:
    """One pair's verdicts on one line, from its check's figures."""
    said = " · ".join(f"{d}: {row['verdict']}" for d, row in checked["drafters"].items())
    return f"measured {name}: {said}" + (" (interrupted)" if checked["interrupted"] else "")


def _measured(proposed: list[tuple[str, Found, Found]], added: bool, check: Check) -> Iterator[tuple[str, dict]]:
    """Each proposed pair's check, in turn: by name where it was added (so
    its verdict is kept), else by its files. Ctrl-C ends the check under way
    and the scan's measuring."""
    for name, target, draft in proposed:
        checked = check(name, None, None) if added else check(None, str(target.path), str(draft.path))
        yield name, checked
        if checked["interrupted"]:
            return


def _add(name: str, target: Found, draft: Found, say: bool) -> str:
    pair = local.add(name, str(target.path), str(draft.path))
    if say:
        print(safe_text(f"added local pair {pair.name}: {target.name} drafted by {draft.name}"))
    return pair.name


def _lines(result: Scan, entries: list[Candidates], proposed: list[tuple[str, Found, Found]]) -> list[str]:
    where = [f"{place}: {root}" for place, root in result.places if root.is_dir()]
    lines = ["scanned " + ("; ".join(where) if where else "nothing: none of the usual folders is here")]
    groups = tokenizers(result.found)
    label = {id(f): chr(ord("A") + i) if i < 26 else str(i) for i, g in enumerate(groups) for f in g}
    lines.append(f"found {len(result.found)} GGUF file{'s' * (len(result.found) != 1)}:")
    for f in result.found:
        lines.append(f"  {filesize.decimal(f.size):>9}  {f.name}  [{f.place}, tokenizer {label[id(f)]}]")
        lines.append(f"{'':>13}{f.path}")
        if f.architecture is not None:
            lines.append(f"{'':>13}{f.architecture.label()}: {f.architecture.speculation()}")
    if result.problems:
        lines.append("skipped:")
        lines += [f"  {p}" for p in result.problems]
    if groups:
        lines.append("tokenizers:")
        for g in groups:
            v = g[0].vocab
            what = f"{v.type}, {len(v.tokens)} tokens"
            lines.append(f"  {label[id(g[0])]} ({what}): " + ", ".join(f.name for f in g))
    for e in entries:
        lines.append(f"target {e.target.name} ({filesize.decimal(e.target.size)}):")
        lines += [f"  drafts with it: {d.name} ({filesize.decimal(d.size)})" for d in e.drafts]
        lines += [f"  refused: {d.name}: {why}" for d, why in e.refused]
    for name, target, draft in proposed:
        lines.append(f"proposed: {local.LocalPair(name, _ref(target), _ref(draft)).add_command()}")
    if not proposed:
        lines.append("no pair proposed: no smaller file shares a target's tokenizer")
    return lines


def _ref(f: Found) -> local.LocalFile:
    return local.LocalFile(f.path, f.size, 0, "")


def _as_json(result: Scan, entries: list[Candidates], proposed: list[tuple[str, Found, Found]]) -> dict:
    def file(f: Found) -> dict:
        return {"name": f.name, "place": f.place, "path": str(f.path), "size": f.size, "vocab_type": f.vocab.type,
                "n_vocab": len(f.vocab.tokens),
                "architecture": f.architecture.name if f.architecture else None,
                "kinds": list(f.architecture.kinds) if f.architecture else None}  # fmt: skip

    return {
        "places": [{"place": p, "path": str(r), "present": r.is_dir()} for p, r in result.places],
        "files": [file(f) for f in result.found],
        "skipped": result.problems,
        "tokenizers": [[str(f.path) for f in g] for g in tokenizers(result.found)],
        "targets": [
            {
                "target": str(e.target.path),
                "drafts": [str(d.path) for d in e.drafts],
                "refused": [{"draft": str(d.path), "rule": why} for d, why in e.refused],
            }
            for e in entries
        ],
        "proposed": [{"name": n, "target": str(t.path), "draft": str(d.path)} for n, t, d in proposed],
    }
