"""What the chat needs from its model source and from the session it opens.

`ModelSource` is the chat's model source: `Models` talks to the real store,
pull and loader (imported lazily, so the app opens before llama.cpp loads);
`ServerModels` offers a llama.cpp server's model the same way. Tests give
the app another source with the same members, backed by the fake model.

`Session` is what the chat drives, whoever decodes: a local pair's
`chat.ChatSession` or a server's `server.session.ServerSession`. `run` and
`bench` drive the one class they open, by that class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import urlsplit

from specchat.config import Settings
from specchat.errors import SpecchatError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from specchat.decoding.costmodel import Measuring
    from specchat.decoding.sampling import SamplingParams
    from specchat.decoding.schema import GrammarSpec
    from specchat.drafters.memory import Memory
    from specchat.engine.loop import Cancel, OnIdle, OnPrefill, OnRound, Turn
    from specchat.server.session import ServerSession
    from specchat.session.dialogue import SessionStatus


@runtime_checkable
class Session(Protocol):
    """A conversation the chat drives (ChatSession or ServerSession). Turns
    block; the chat runs them on a worker and calls the knobs from its own
    thread."""

    pair: str  # the status bar's and the history's name for what answers
    system: str | None  # the system prompt the next turns are built with (None: none)
    devices: dict[str, dict | None]  # where target and draft run (llamacpp.placement); None: not known

    @property
    def draft_model_loaded(self) -> bool: ...  # never on a server: its draft model is its own
    @property
    def cpu_bound(self) -> bool: ...  # decoding keeps every core busy: the chat waits for each batch to show
    @property
    def constraint_spec(self) -> GrammarSpec | None: ...  # what replies must match, carried to the next pair

    # --- the conversation (chat.Dialogue)
    @property
    def messages(self) -> list[dict]: ...
    def replace_messages(self, messages: list[dict]) -> None: ...
    def last_user_text(self) -> str | None: ...
    def clear(self) -> None: ...

    # --- turns: on_round gets each round (a server's chunk) as it is decoded;
    # on_idle is called while a server is silent, so what came is shown
    def reply(
        self, user_text: str, on_round: OnRound = None, cancel: Cancel = None, on_idle: OnIdle = None
    ) -> Turn: ...
    def regenerate(self, on_round: OnRound = None, cancel: Cancel = None, on_idle: OnIdle = None) -> Turn: ...
    def edit_last(
        self, user_text: str, on_round: OnRound = None, cancel: Cancel = None, on_idle: OnIdle = None
    ) -> Turn: ...
    def on_prefill(self, tell: OnPrefill) -> None: ...  # (tokens read, of) as a long prompt is read

    # --- knobs (a SpecchatError where this session cannot take one)
    @property
    def drafter_name(self) -> str: ...
    def drafter_names(self) -> list[str]: ...
    def set_drafter(self, name: str) -> None: ...
    @property
    def k(self) -> int: ...
    def set_k(self, k: int | None) -> None: ...  # None: the drafter's own
    def set_constraint(self, spec: GrammarSpec | None) -> None: ...
    @property
    def sampling(self) -> SamplingParams: ...
    def set_sampling(self, temp: float, top_p: float) -> None: ...

    # --- what a local pair measures and keeps (a server's do nothing; its memory is None)
    @property
    def memory(self) -> Memory | None: ...  # this user's earlier replies, drafted from

    memory_owner: object  # whose the next reply is in the memory (the conversation's record)

    def on_measure(self, tell: Callable[[Measuring], None] | None) -> None: ...  # how measuring the curve goes
    def measure_ahead(self) -> str | None: ...  # measure the cost curve now, between replies, if it is due
    def remember(self, replies: Iterable[tuple[object, str, str]], ticket: int | None = None) -> None: ...
    def set_memory(self, on: bool) -> None: ...

    def status(self) -> SessionStatus: ...
    def close(self) -> None: ...


@runtime_checkable
class ModelSource(Protocol):
    """Where the chat's pairs come from and how one opens (Models, ServerModels)."""

    remembers_pair: bool  # the settings keep the pair last opened
    legend_note: str  # F1's legend: what "server totals" means on a server; "" for local pairs

    def pairs(self) -> list[PairInfo]: ...
    def default_pair(self) -> str: ...
    def is_pulled(self, name: str) -> bool: ...
    def pull(self, name: str) -> None: ...
    def pull_progress(self, name: str) -> tuple[int, int | None]: ...
    def found_pairs(self) -> list[PairInfo]: ...  # where nothing is pulled: pairs of the user's files a scan found
    def add_found(self, name: str) -> str: ...  # register one of them as a local pair; its name
    def open(
        self, pair: str, drafter: str, k: int | None, settings: Settings
    ) -> Session: ...  # k None: the drafter's own


@dataclass
class PairInfo:
    name: str
    description: str
    pulled: bool
    default: bool = False
    size: int | None = None  # bytes to download (target + draft), where known
    local: bool = False  # the user's own files (`models add`, `--target`), not the store's
    verdict: str = ""  # the last `specchat models check` of the pair, in one line


class Models:
    """The real store, pull and loader; with `target` (`specchat --target PATH
    [--draft PATH]`) those files too, as a pair named by the target's file
    (loader.pair_files resolves them, as for run and bench)."""

    legend_note = ""  # a local pair's accepted drafts need no note

    def __init__(self, target: str | None = None, draft: str | None = None, extra_bufts: str | None = None) -> None:
        self.extra_bufts = extra_bufts  # --extra-bufts, for every pair the chat opens
        self.files: tuple[str, str | None] | None = None
        self.file_pair = ""
        if target is not None or draft is not None:
            from specchat.session.loader import pair_files

            self.file_pair, t_path, d_path = pair_files(None, target, draft)
            self.files = (str(t_path), str(d_path) if d_path else None)
        self.remembers_pair = self.files is None  # the settings keep a pair by name, never files by path
        self.found: dict[str, tuple[str, str]] = {}  # found_pairs' offers: name -> (target, draft)

    def pairs(self) -> list[PairInfo]:
        from specchat.store.pairs import pair_status

        return self._file_info() + [_info(p) for p in pair_status()]

    def _file_info(self) -> list[PairInfo]:
        if self.files is None:
            return []
        about = f"files: {self.files[0]}" + (f" drafted by {self.files[1]}" if self.files[1] else "")
        return [PairInfo(self.file_pair, about, True, local=True)]

    def default_pair(self) -> str:
        from specchat.store.pairs import default_pair_name

        return self.file_pair or default_pair_name()

    def is_pulled(self, name: str) -> bool:
        """Both files are in the store, or the pair is a local one (never pulled).
        A file whose bytes changed or that is gone counts too: opening it then
        fails with a message that names the file and the fix."""
        from specchat.store.pairs import pair_status

        if self.files is not None and name == self.file_pair:
            return True
        entry = pair_status(name)[0]
        return entry["local"] or all(entry[role]["state"] in ("verified", "damaged") for role in ("target", "draft"))

    def pull(self, name: str) -> None:
        """Blocking; run it in a thread. Progress comes from `pull_progress`."""
        from specchat.store.pull import pull_pair

        pull_pair(name, source="auto", progress=False)

    def pull_progress(self, name: str) -> tuple[int, int | None]:
        """(bytes on disk, bytes in all) of a pull under way, read from the store."""
        from specchat.store.pairs import pair_status

        entry = pair_status(name)[0]
        done = 0
        total: int | None = 0
        files = [entry["target"]] if entry["same_file"] else [entry["target"], entry["draft"]]
        for f in files:
            size = f.get("size")
            total = None if total is None or size is None else total + size
            if f["state"] == "verified":
                done += size or 0
            else:
                done += f.get("partial_bytes") or 0
        return done, total

    def found_pairs(self) -> list[PairInfo]:
        """Where no pair is ready, the pairs `specchat models scan` proposes
        from the files in the usual tools' folders (reads GGUF headers only)."""
        if any(p.pulled for p in self.pairs()):
            return []
        from specchat.store.scan import candidates, proposals, scan

        offers = proposals(candidates(scan().found))
        self.found = {name: (str(t.path), str(d.path)) for name, t, d in offers}
        return [
            PairInfo(name, f"{t.name} drafted by {d.name} ({t.place})", False, size=t.size + d.size, local=True)
            for name, t, d in offers
        ]

    def add_found(self, name: str) -> str:
        """Register a found pair by reference (hashing its files: run it in a thread)."""
        from specchat.store import local

        return local.add(name, *self.found[name]).name

    def open(self, pair: str, drafter: str, k: int | None, settings: Settings) -> Session:
        from specchat.decoding.sampling import SamplingParams
        from specchat.session.loader import open_session
        from specchat.session.options import DecodeOptions, load_options

        target, draft = self.files if self.files is not None and pair == self.file_pair else (None, None)
        load = load_options(None if target else pair, target, draft, extra_bufts=self.extra_bufts, settings=settings)
        sampling = SamplingParams(temp=settings.temperature, top_p=settings.top_p)
        return open_session(load, DecodeOptions(drafter, k, sampling, system=settings.system_prompt or None))


def _info(p: dict) -> PairInfo:
    sizes = [p["target"].get("size")] + ([] if p["same_file"] else [p["draft"].get("size")])
    size = None if None in sizes else sum(sizes)
    return PairInfo(
        p["name"], p.get("description", ""), p["ready"], p.get("default", False), size, p["local"], p.get("verdict", "")
    )


# --- a llama.cpp server as the chat's model source ---------------------------------


class ServerModels:
    """The chat's model source (tui.state.models.Models' methods) for a server:
    one "pair", the server's model, always there, opened as a ServerSession."""

    remembers_pair = False  # the settings keep the last local pair, never a server
    # F1's legend: what the accepted colour claims on a server.
    legend_note = (
        ": a llama.cpp server's accepted drafts, from the differences of its running totals "
        "(draft_n_accepted, predicted_n) between streamed chunks; a chunk is coloured only when all "
        "its tokens were accepted drafts. The server sends no rejected drafts."
    )

    def __init__(self, url: str, baseline: bool = False, baseline_url: str | None = None, model: str = "") -> None:
        from specchat.server.client import check_url, shown_url

        self.url = check_url(url)
        self.baseline = baseline
        self.baseline_url = check_url(baseline_url) if baseline_url else None
        self.name = f"{model or 'server'} @ {urlsplit(shown_url(self.url)).netloc}"

    def pairs(self) -> list:
        return [PairInfo(self.name, "the llama.cpp server's model and speculation", True, True)]

    def default_pair(self) -> str:
        return self.name

    def is_pulled(self, name: str) -> bool:
        return name == self.name

    def pull(self, name: str) -> None:
        raise SpecchatError("a server's model is not pulled", hint="the server loads its own model")

    def pull_progress(self, name: str) -> tuple[int, int | None]:
        return 0, None

    def found_pairs(self) -> list[PairInfo]:
        return []  # the server's model is always there

    def add_found(self, name: str) -> str:
        raise SpecchatError("a server offers no local files", hint="drop --server to chat on your own files")

    def open(self, pair: str, drafter: str, k: int | None, settings) -> ServerSession:
        from specchat.decoding.sampling import SamplingParams
        from specchat.server.session import ServerSession

        session = ServerSession(
            self.url,
            sampling=SamplingParams(temp=settings.temperature, top_p=settings.top_p),
            system=settings.system_prompt or None,
            baseline_url=self.baseline_url,
            with_baseline=self.baseline,
        )
        session.pair = self.name
        if k is not None and "n_max" in session.info.knobs:
            session.set_k(k)  # the chat's k goes out as speculative.n_max where the server takes it
        if drafter in session.drafter_names():
            session.set_drafter(drafter)
        return session


def chat_models(
    url: str | None,
    *,
    pair: str | None,
    drafter: str | None,
    baseline: bool,
    baseline_server: str | None,
    target: str | None = None,
    draft: str | None = None,
) -> ServerModels | None:
    """The chat's model source for `specchat --server URL`, checked before the
    app starts (an unreachable server is one line, not an app with no model);
    None without --server."""
    if url is None:
        if baseline or baseline_server:
            raise SpecchatError(
                "--baseline and --baseline-server need --server URL",
                code=2,
                hint="specchat --server http://127.0.0.1:8080 --baseline",
            )
        return None
    from specchat.server.client import check_url
    from specchat.server.opening import check_server_options
    from specchat.server.session import ServerSession

    check_server_options(
        {"--pair": pair, "--target": target, "--draft": draft},
        drafter,
        baseline,
        baseline_server,
        instead="chat with a local pair",
    )
    probe = ServerSession(
        check_url(url), with_baseline=baseline, baseline_url=check_url(baseline_server) if baseline_server else None
    )
    try:
        if baseline:
            probe.check_baseline()
    finally:
        probe.close()
    return ServerModels(url, baseline=baseline, baseline_url=baseline_server, model=probe.info.model)
