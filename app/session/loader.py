"""Open a pair for chatting: find its files, check the tokenizers match,
load the target now and the draft model on first use.

Where each model runs (backend, device, layers offloaded) is kept on the
session; a target on a GPU with its draft on the CPU gets a warning, since
then every drafted token costs a CPU step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from specchat import checks
from specchat.drafters import BY_NAME, Name
from specchat.errors import SpecchatError
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions, LoadOptions


def pair_files(pair: str | None, target: str | None, draft: str | None) -> tuple[str, Path, Path | None]:
    """(pair label, target path, draft path or None): files given by path,
    a local pair (`specchat models add`), or a pulled pair. An empty name or
    path is refused, never taken for the default pair."""
    target, draft = checks.model_file(target, "--target"), checks.model_file(draft, "--draft")
    if target:
        t = Path(target).expanduser()
        d = Path(draft).expanduser() if draft else None
        for p in filter(None, (t, d)):
            if not p.is_file():
                raise SpecchatError(f"no model file at {p}", hint="pass the path of a .gguf file")
        return t.stem, t, d
    if draft:
        raise SpecchatError("--draft needs --target", hint="or use --pair NAME")
    from specchat.store import local
    from specchat.store.pairs import default_pair_name, resolve_pair

    name = default_pair_name() if pair is None else pair  # "" is the catalog's error
    mine = local.get(name)
    if mine is not None:  # files the user registered with `specchat models add`
        return (name, *local.resolve(mine))
    t, d = resolve_pair(name)
    return name, Path(t), Path(d)


def open_session(
    load: LoadOptions = LoadOptions(),
    decode: DecodeOptions = DecodeOptions(),
    warn: Callable[[str], None] | None = None,
) -> ChatSession:
    """Load the pair `load` names as it says, and a session that decodes as
    `decode` says; `warn` hears the warnings (stderr where None)."""
    from specchat.llamacpp import llama
    from specchat.llamacpp.kernels import choose
    from specchat.llamacpp.mtp import MtpHead, mtp_head

    warn = warn or _print_warning
    llama.set_verbose(load.verbose)
    label, t_path, d_path = pair_files(load.pair, load.target, load.draft)
    drafter = decode.drafter
    if d_path == t_path and drafter != Name.DRAFT and ships_mtp(t_path):
        d_path = None  # a model that ships an MTP head drafts with it, not with a second copy of itself
    spec = BY_NAME.get(drafter)
    if d_path is None and spec and spec.uses_draft_model and not (spec.head_stands_in and ships_mtp(t_path)):
        raise SpecchatError(
            f"pair '{label}' has no draft model, so the {drafter} drafter cannot run on it",
            hint="use --drafter auto, ngram, grammar or off, or give the pair a draft (--draft PATH)",
        )
    if d_path is not None and d_path != t_path:
        from specchat.store.compat import check_pair

        check_pair(t_path, d_path)

    def loaded(path: Path, n_ctx: int | None, n_gpu_layers: int) -> llama.Model:
        kernels = choose(path, n_gpu_layers, load.extra_bufts, load.extra_bufts_from)
        model = llama.Model(path, n_ctx=n_ctx, n_threads=load.threads, n_gpu_layers=n_gpu_layers, kernels=kernels)
        if kernels.warning:
            warn(kernels.warning)
        return model

    target_model = loaded(t_path, load.ctx, load.n_gpu_layers)
    mtp_prior = 2 / target_model.device["layers"] if target_model.hidden is not None else 0.5

    def load_draft() -> llama.Model:
        # Same context size as the target, so the draft can follow the whole conversation.
        assert d_path is not None  # the session gets this loader only with a draft model
        m = loaded(d_path, target_model.n_ctx, load.draft_n_gpu_layers)
        session.devices["draft"] = m.device
        problem = placement_warning(target_model.device, m.device)
        if problem:
            warn(problem)
        return m

    def load_mtp_head() -> MtpHead:
        head = mtp_head(target_model)
        session.devices["mtp"] = target_model.device  # the target's own layers, where the target runs
        return head

    session = ChatSession(
        target_model,
        load_draft if d_path is not None else None,
        decode,
        pair=label,
        # A draft step costs about its share of the target's bytes, until measured;
        # an MTP head, about a block and the output layer of the target's.
        draft_cost_prior=d_path.stat().st_size / t_path.stat().st_size if d_path else mtp_prior,
        load_mtp_head=load_mtp_head if target_model.hidden is not None else None,
    )
    if target_model.hidden is not None:
        session.devices.setdefault("mtp", None)  # the target's MTP head, once it has loaded
    if session.no_drafting and drafter != Name.OFF:
        warn(session.no_drafting)
    return session


def ships_mtp(path: Path) -> bool:
    """The GGUF carries MTP draft layers (hybrid then drafts with them)."""
    from specchat.store.compat import read_architecture_kinds

    arch = read_architecture_kinds(path)
    return arch is not None and arch.mtp_layers > 0


def placement_warning(target: dict, draft: dict) -> str | None:
    """Say so when the target is offloaded and the draft (partly) is not."""
    if target["gpu_layers"] and draft["gpu_layers"] < draft["layers"]:
        return (
            f"the target runs on {target['backend']} but the draft model has {draft['gpu_layers']}/"
            f"{draft['layers']} layers offloaded, so drafting runs on the CPU; "
            "pass --draft-n-gpu-layers -1 to offload it all"
        )
    return None


def _print_warning(text: str) -> None:
    from rich.console import Console
    from rich.text import Text

    from specchat.textsafe import safe_text  # a warning may name the user's file

    Console(stderr=True, highlight=False).print(Text(safe_text(f"warning: {text}"), style="yellow"))
