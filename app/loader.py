"""Open a pair for chatting: find its files, check the tokenizers match,
load the target now and the draft model on first use."""

from __future__ import annotations

from pathlib import Path

from specchat.chat import ChatSession
from specchat.errors import SpecchatError
from specchat.sampling import SamplingParams


def pair_files(pair: str | None, target: str | None, draft: str | None) -> tuple[str, Path, Path | None]:
    """(pair label, target path, draft path or None)."""
    if target:
        t = Path(target).expanduser()
        d = Path(draft).expanduser() if draft else None
        for p in filter(None, (t, d)):
            if not p.is_file():
                raise SpecchatError(f"no model file at {p}", hint="pass the path of a .gguf file")
        return t.stem, t, d
    if draft:
        raise SpecchatError("--draft needs --target", hint="or use --pair NAME")
    from specchat.store import default_pair_name, resolve_pair

    name = pair or default_pair_name()
    t, d = resolve_pair(name)
    return name, Path(t), Path(d)


def open_session(
    pair: str | None = None,
    target: str | None = None,
    draft: str | None = None,
    *,
    drafter: str,
    k: int,
    sampling: SamplingParams = SamplingParams(),
    baseline_every: int = 8,
    system: str | None = None,
    max_tokens: int = 1024,
    threads: int | None = None,
    ctx: int | None = None,
    n_gpu_layers: int = -1,
    verbose: bool = False,
) -> ChatSession:
    from specchat import llama

    llama.set_verbose(verbose)
    label, t_path, d_path = pair_files(pair, target, draft)
    if d_path is not None and d_path != t_path:
        from specchat.compat import check_pair

        check_pair(t_path, d_path)
    target_model = llama.Model(t_path, n_ctx=ctx, n_threads=threads, n_gpu_layers=n_gpu_layers)

    def load_draft():
        # Same context size as the target, so the draft can follow the whole conversation.
        return llama.Model(d_path, n_ctx=target_model.n_ctx, n_threads=threads, n_gpu_layers=n_gpu_layers)

    return ChatSession(
        target_model,
        load_draft if d_path is not None else None,
        drafter=drafter,
        k=k,
        sampling=sampling,
        baseline_every=baseline_every,
        system=system,
        max_tokens=max_tokens,
        pair=label,
        # A draft step costs about its share of the target's bytes, until measured.
        draft_cost_prior=d_path.stat().st_size / t_path.stat().st_size if d_path else 0.5,
    )
