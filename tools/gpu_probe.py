"""specchat's GPU figures beside llama.cpp's own tools, in one run (a few minutes on an H200).

From the repository root, on the GPU machine:

    python3 tools/gpu_probe.py DIR OUT [--max-tokens 256]

It needs a CUDA build of llama-cpp-python (its libraries may come from
LLAMA_CPP_LIB_PATH), and DIR holding target.gguf (the default pair's 1.5B,
or a model with its shapes), draft.gguf (the 0.5B) and big.gguf (a 7B);
docs/gpu.md says how to make models with the real shapes where real weights
cannot reach the machine. llama-bench, llama-lookup and
llama-speculative-simple come from PATH (missing ones print n/a). It prints
a Markdown table, each row with what it compares and the bar it must meet,
and writes every figure to OUT/probe.json.

On a CPU it runs too (`--max-tokens 16` on any small GGUF copied to the
three names): that is how the script is checked before it meets a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)
from specchat.llamacpp import llama
from specchat.bench.measure import measure_cost_curve

ROOT = Path(__file__).resolve().parent.parent
PROMPT = (ROOT / "tests" / "data" / "code_edit_prompt.txt").read_text()


def sh(cmd: list[str], timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, e.stdout or "", e.stderr or "")


# --- llama.cpp's own tools ----------------------------------------------------------------------------


def llama_bench(model: Path, n: int, depth: int) -> dict | None:
    """llama-bench tg<n> tok/s on an empty context and after `depth` tokens
    (a reply's real context: its prompt), or None without the tool."""
    if not shutil.which("llama-bench"):
        return None
    r = sh(["llama-bench", "-m", str(model), "-p", "0", "-n", str(n), "-d", f"0,{depth}", "-ngl", "99", "-o", "json"])
    try:
        return {"depth": depth, **{("tg" if t["n_depth"] == 0 else "tg_at_depth"): float(t["avg_ts"])
                                   for t in json.loads(r.stdout)}}
    except (ValueError, LookupError, TypeError):
        return None


def llama_tool(tool: str, args: list[str]) -> dict | None:
    """llama-lookup / llama-speculative-simple: decode tok/s and acceptance from its log."""
    if not shutil.which(tool):
        return None
    r = sh([tool, *args, "--temp", "0", "-ngl", "99"])
    out = r.stdout + r.stderr
    speed = re.search(r"decoded\s+\d+ tokens in\s+[\d.]+ seconds, speed:\s+([\d.]+) t/s", out)
    accept = re.search(r"accept\s+=\s+([\d.]+)%", out)
    if not speed:
        return {"rc": r.returncode, "error": out[-500:]}
    return {"tok_s": float(speed.group(1)), "accept": float(accept.group(1)) if accept else None}


# --- specchat ----------------------------------------------------------------------------------------


def specchat_run(target: Path, draft: Path, drafter: str, k: int, max_tokens: int, argmax: str = "") -> dict:
    """One `specchat run --json` in a fresh process: its stats, and derived figures.
    `argmax` ("host" or "graph") overrides where greedy picks are made (SPECCHAT_ARGMAX)."""
    cmd = [sys.executable, "-m", "specchat.cli.main", "run", PROMPT, "--target", str(target), "--draft", str(draft),
           "--drafter", drafter, "--k", str(k), "--max-tokens", str(max_tokens), "--json"]
    r = sh(cmd, env={**os.environ, "SPECCHAT_ARGMAX": argmax} if argmax else None)
    if r.returncode != 0:
        return {"rc": r.returncode, "error": r.stderr[-800:]}
    out = json.loads(r.stdout)
    s = out["stats"]
    return {
        "rc": 0,
        "tok_s": s["tok_s"],
        "spec_tok_s": s["spec_tok_s"],
        "baseline_tok_s": s["baseline_tok_s"],
        "speedup": s["speedup"],
        "alpha": s["alpha"],
        "other_share": s["t_other"] / s["t_decode"] if s["t_decode"] else None,
        "own_share": 1 - s["t_llama"] / s["t_decode"] if s["t_decode"] and s.get("t_llama") is not None else None,
        "draft_ms_per_token": s["t_draft"] / s["drafted"] * 1e3 if s["drafted"] else None,
        "steady_step_ms": 1e3 / s["baseline_tok_s"] if s["baseline_tok_s"] else None,
        "auto_choices": out["auto_choices"],
        "devices": out["devices"],
        "stats": s,  # everything run --json reported, for what the table does not show
    }


def model_facts(path: Path, steps: int) -> dict:
    """Load time, bare greedy decode loop (the engine's driver, nothing else) and
    the cost curve, both with greedy picks where a greedy turn makes them; then
    the loop again with each row scanned on the host, to compare."""
    t0 = time.perf_counter()
    m = llama.Model(path, n_ctx=4096)
    load = time.perf_counter() - t0
    text = m.tokenize(PROMPT)
    m.argmax_only(True)  # as a greedy turn does
    device = dict(m.device)
    curve = measure_cost_curve(m, text, 17)

    def loop() -> float:
        m.truncate(0)
        m.eval((text * 4)[:512], n_logits=1)
        t = m.argmax(0)
        t0 = time.perf_counter()
        for _ in range(steps):
            m.eval([t], n_logits=1)
            t = m.argmax(0)
        return (time.perf_counter() - t0) / steps

    step = loop()
    m.argmax_only(False)  # the same loop, each row copied back and scanned on the host
    host_step = loop()
    prompt_tokens = len(m.tokenize(m.apply_template([{"role": "user", "content": PROMPT}])))  # as `run` sends it
    m.close()
    return {"load_s": load, "prompt_tokens": prompt_tokens, "loop_step_ms": step * 1e3, "loop_tok_s": 1 / step,
            "loop_host_argmax_ms": host_step * 1e3, "device": device,
            "positions": curve.positions, "seconds": curve.seconds, "curve_1_ms": curve.seconds[0] * 1e3}


def numpy_first_loads(path: Path) -> dict:
    """Import numpy, then llama_cpp, then load: the order that crashed (without specchat)."""
    code = ("import numpy, llama_cpp as C; p = C.llama_model_default_params(); p.n_gpu_layers = 99; "
            f"m = C.llama_model_load_from_file({str(path).encode()!r}, p); print('loaded' if m else 'null')")
    r = sh([sys.executable, "-c", code], timeout=120)
    return {"rc": r.returncode, "out": r.stdout.strip(), "err": r.stderr[-300:]}


# --- the table ---------------------------------------------------------------------------------------


def ratio(a, b) -> float | None:
    return a / b if a and b else None


def fmt(x, spec=".1f") -> str:
    return "n/a" if x is None else format(x, spec)


def verdict(value, ok) -> str:
    return "n/a" if value is None else ("holds" if ok(value) else "**misses**")


def rows(res: dict) -> list[tuple[str, str, str, str, str]]:
    """(what, specchat, reference, ratio, bar) per figure."""
    # A run cut short leaves a partial probe.json: what is missing prints n/a.
    m, tools = res.get("models", {}), res.get("tools", {})
    runs = defaultdict(dict, res.get("runs", {}))
    out = []
    crash = res.get("numpy_first", {})
    out.append(("loading, numpy imported first", f"specchat run rc {runs['off target'].get('rc')}",
                f"bare llama_cpp rc {crash.get('rc')} ({crash.get('out') or 'crashed'})", "", "specchat rc 0"))
    for name in ("target", "big"):
        off, bench = runs[f"off {name}"].get("tok_s"), tools.get(f"bench {name}") or {}
        r = ratio(off, bench.get("tg_at_depth"))
        reference = (f"llama-bench tg: {fmt(bench.get('tg_at_depth'))} after the prompt's {bench.get('depth')} tokens"
                     f" ({fmt(bench.get('tg'))} on an empty context)")
        out.append((f"`--drafter off`, {name}", fmt(off), reference, fmt(r, ".2f"),
                    f"≥ 0.97: {verdict(r, lambda v: v >= 0.97)}"))
    for key, off_key in (("draft4 target", "off target"), ("ngram16 target", "off target"),
                         ("auto16 target", "off target"), ("ngram16 big", "off big"), ("auto16 big", "off big"),
                         ("draft4 big", "off big")):
        run, off = runs[key], runs[off_key].get("tok_s")
        r = ratio(run.get("baseline_tok_s"), off)
        out.append((f"shown baseline, {key}", fmt(run.get("baseline_tok_s")), f"{off_key}: {fmt(off)}",
                    fmt(r, ".3f"), f"within 5%: {verdict(r, lambda v: abs(v - 1) <= 0.05)}"))
    auto, off = runs["auto16 target"].get("tok_s"), runs["off target"].get("tok_s")
    r = ratio(auto, off)
    out.append(("auto, target + draft (drafts never agree)", fmt(auto), f"off: {fmt(off)}", fmt(r, ".2f"),
                f"≥ 0.97: {verdict(r, lambda v: v >= 0.97)} · chose {runs['auto16 target'].get('auto_choices')}"))
    lookup = (tools.get("lookup big") or {}).get("tok_s")
    for key in ("ngram16 big", "auto16 big"):
        r = ratio(runs[key].get("tok_s"), lookup)
        out.append((f"{key} (its output repeats)", f"{fmt(runs[key].get('tok_s'))}, α {fmt(runs[key].get('alpha'), '.2f')}",
                    f"llama-lookup k16: {fmt(lookup)}", fmt(r, ".2f"), f"≥ 0.9: {verdict(r, lambda v: v >= 0.9)}"))
    for name in ("target", "big"):
        ours, ref = runs[f"draft4 {name}"], tools.get(f"speculative {name}+draft k4") or {}
        out.append((f"draft k4, {name} + draft", f"{fmt(ours.get('tok_s'))}, α {fmt(ours.get('alpha'), '.2f')}",
                    f"llama-speculative-simple k4: {fmt(ref.get('tok_s'))}, {fmt(ref.get('accept'))}% accepted",
                    fmt(ratio(ours.get("tok_s"), ref.get("tok_s")), ".2f"), "reference"))
    for key in ("draft4 target", "auto16 target", "ngram16 big"):
        off_tok = runs["off big" if key.endswith("big") else "off target"].get("tok_s")
        steady, off_step = runs[key].get("steady_step_ms"), 1e3 / off_tok if off_tok else None
        out.append((f"a steady plain step inside {key} (ms)", fmt(steady, ".2f"), f"a step of the off run: {fmt(off_step, '.2f')}",
                    fmt(ratio(steady, off_step), ".2f"), "what the baseline samples"))
    for key in ("draft4 target", "draft4 big"):
        per, loop = runs[key].get("draft_ms_per_token"), m.get("draft", {}).get("loop_step_ms")
        r = ratio(per, loop)
        # A fully accepted round feeds k + 1 tokens for k drafts (the last draft and the target's own).
        out.append((f"drafting per drafted token, {key} (ms, catch-up included)",
                    f"{fmt(per, '.2f')} at α {fmt(runs[key].get('alpha'), '.2f')}",
                    f"bare loop of the draft model: {fmt(loop, '.2f')}", fmt(r, ".2f"), f"≤ 1.1: {verdict(r, lambda v: v <= 1.1)}"))
    for name in ("target", "draft", "big"):
        facts = m.get(name, {})
        loop, host = facts.get("loop_step_ms"), facts.get("loop_host_argmax_ms")
        out.append((f"bare loop step, {name} (ms), argmax {facts.get('device', {}).get('argmax', 'n/a')}", fmt(loop, ".3f"),
                    f"each row scanned on the host: {fmt(host, '.3f')}", fmt(ratio(loop, host), ".3f"), "< 1 where it pays"))
    for key in ("off target", "ngram16 big"):
        ours, host = runs[key].get("tok_s"), runs[f"{key}, host argmax"].get("tok_s")
        out.append((f"{key}, argmax where specchat puts it", fmt(ours), f"SPECCHAT_ARGMAX=host: {fmt(host)}",
                    fmt(ratio(ours, host), ".3f"), "> 1 where it pays"))
    for name in ("target", "draft", "big"):
        curve_1, loop = m.get(name, {}).get("curve_1_ms"), m.get(name, {}).get("loop_step_ms")
        r = ratio(curve_1, loop)
        out.append((f"cost curve, 1 position, {name} (ms)", fmt(curve_1, ".2f"), f"bare decode step: {fmt(loop, '.2f')}",
                    fmt(r, ".2f"),
                    f"within 10%: {verdict(r, lambda v: abs(v - 1) <= 0.10)}"))
    for key, run in runs.items():
        share = run.get("other_share")
        out.append((f"t_other share, {key}", fmt(share and share * 100, ".2f") + "%", "", "",
                    f"< 3%: {verdict(share, lambda v: v < 0.03)}"))
    for key, run in runs.items():
        own = run.get("own_share")
        out.append((f"outside llama.cpp, {key}", fmt(own and own * 100, ".2f") + "%",
                    "timed around each call into llama.cpp", "", "specchat's whole cost per token"))
    return out


def print_table(res: dict) -> None:
    print(f"\n{res['date']} · {res['max_tokens']} tokens, greedy, the first code-edit prompt · {res['system_info'][:80]}\n")
    print("| what | specchat | reference | ratio | bar |")
    print("|---|---|---|---|---|")
    for row in rows(res):
        print("| " + " | ".join(row) + " |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", help="folder with target.gguf, draft.gguf, big.gguf")
    ap.add_argument("out", help="folder for probe.json (written after every step, so a run cut short keeps its figures)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--loop-steps", type=int, default=128)
    ap.add_argument("--table", action="store_true", help="only print the table of OUT/probe.json, from an earlier run")
    args = ap.parse_args()
    d, out = Path(args.models), Path(args.out)
    if args.table:
        print_table(json.loads((out / "probe.json").read_text()))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    T, D, B = d / "target.gguf", d / "draft.gguf", d / "big.gguf"
    res: dict = {"date": time.strftime("%Y-%m-%d"), "system_info": llama.system_info(), "max_tokens": args.max_tokens}

    def save(step: str, value) -> None:
        print(step, value, flush=True)
        (out / "probe.json").write_text(json.dumps(res, indent=1))

    res["numpy_first"] = numpy_first_loads(T)
    save("numpy first, bare llama_cpp:", res["numpy_first"])
    res["models"] = {}
    for name, path in (("target", T), ("draft", D), ("big", B)):
        res["models"][name] = model_facts(path, args.loop_steps)
        save(name, {k: v for k, v in res["models"][name].items() if k not in ("positions", "seconds")})
    depth = res["models"]["target"]["prompt_tokens"]
    res["tools"] = {f"bench {n}": llama_bench(p, 128, depth) for n, p in (("target", T), ("draft", D), ("big", B))}
    n = str(args.max_tokens)
    res["tools"]["lookup big"] = llama_tool("llama-lookup", ["-m", str(B), "-p", PROMPT, "-n", n, "--spec-draft-n-max", "16"])
    for name, target in (("target", T), ("big", B)):  # without --spec-type it refuses to start
        res["tools"][f"speculative {name}+draft k4"] = llama_tool("llama-speculative-simple", [
            "-m", str(target), "-md", str(D), "-p", PROMPT, "-n", n, "--spec-type", "draft-simple",
            "--spec-draft-n-max", "4"])
    save("tools:", res["tools"])
    plan = {"off target": (T, "off", 1), "draft4 target": (T, "draft", 4), "ngram16 target": (T, "ngram", 16),
            "auto16 target": (T, "auto", 16), "off big": (B, "off", 1), "ngram16 big": (B, "ngram", 16),
            "auto16 big": (B, "auto", 16), "draft4 big": (B, "draft", 4),
            "off target, host argmax": (T, "off", 1, "host"), "ngram16 big, host argmax": (B, "ngram", 16, "host")}
    res["runs"] = {}
    for key, (target, drafter, k, *argmax) in plan.items():
        res["runs"][key] = specchat_run(target, D, drafter, k, args.max_tokens, *argmax)
        save(key, {k: v for k, v in res["runs"][key].items() if k != "stats"})
    print_table(res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
