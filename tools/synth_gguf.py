"""Write a tiny GGUF with random weights in a real architecture's layout.

    python tools/synth_gguf.py ARCH OUT.gguf [--tokenizer-from GGUF] [--force]

ARCH is one of: llama, qwen2, qwen3moe, gemma3, qwen35 (Qwen3.5 with its MTP
layer). The file holds the tensor names, shapes and metadata keys that
llama.cpp's loader asks for (the version vendored in llama-cpp-python; see
src/models/<arch>.cpp there), random weights and a real tokenizer copied from
another GGUF. So tests can load and decode every architecture specchat must
handle without downloading a model of each: what comes out is noise, but the
code path through llama.cpp is the real one (sliding-window attention,
expert routing, recurrent layers, MTP layers).

The models are tiny on purpose (hidden size 64, a few layers and heads) and
the embedding is tied to the output, so the files are about 8 MB, mostly the
49152-token vocabulary, and load in a fraction of a second. The seed is fixed:
the same command writes the same bytes.

The file is written beside OUT under a temporary name and renamed into
place, so an OUT that exists is either left as it was or replaced whole; an
existing OUT is replaced only with --force, and never where it is a folder,
a pipe or a device.
"""

from __future__ import annotations

import argparse
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import Any

import specchat  # noqa: F401  llama.cpp before numpy (app/llamacpp/native.py)
from specchat.errors import SpecchatError
from specchat.textsafe import safe_text

# isort: split
import gguf
import numpy as np

SEED = 1234
# Random weights this size keep the logits finite and make each token depend on
# the ones before it (at 0.02 every architecture repeats one token whatever the
# context, which would hide a wrong rollback).
STD = 0.1

N_EMBD = 64
N_FF = 128
N_HEAD = 4
N_HEAD_KV = 2
HEAD_DIM = N_EMBD // N_HEAD
RMS_EPS = 1e-6
CONTEXT_LENGTH = 4096

DEFAULT_TOKENIZER = (
    Path(os.environ.get("SPECCHAT_TEST_MODELS", "~/.cache/specchat/test-models")).expanduser()
    / "QuantFactory--SmolLM2-135M-Instruct-GGUF"
    / "SmolLM2-135M-Instruct.Q4_1.gguf"
)

# --- weights -----------------------------------------------------------------------
# llama.cpp names a tensor's shape innermost first (ne[0] = the input size of a
# matrix); numpy names it outermost first. These helpers take llama.cpp's
# order, the one the loader's create_tensor calls use, and reverse it.


def matrix(rng: np.random.Generator, n_in: int, n_out: int) -> np.ndarray:
    """A weight llama.cpp multiplies by, ne = (n_in, n_out), in F16 like a converted model."""
    return rng.normal(0.0, STD, size=(n_out, n_in)).astype(np.float16)


def experts(rng: np.random.Generator, n_in: int, n_out: int, n_expert: int) -> np.ndarray:
    """One matrix per expert stacked, ne = (n_in, n_out, n_expert)."""
    return rng.normal(0.0, STD, size=(n_expert, n_out, n_in)).astype(np.float16)


def f32_matrix(rng: np.random.Generator, n_in: int, n_out: int) -> np.ndarray:
    """A small matrix converters keep in F32 (expert routers, convolution kernels)."""
    return rng.normal(0.0, STD, size=(n_out, n_in)).astype(np.float32)


def vector(rng: np.random.Generator, n: int) -> np.ndarray:
    """A bias, ne = (n,)."""
    return rng.normal(0.0, STD, size=n).astype(np.float32)


def ones(n: int) -> np.ndarray:
    """An RMS norm's weight: 1 leaves the normalised activations as they are."""
    return np.ones(n, dtype=np.float32)


# --- building blocks shared by the architectures ---------------------------------------


def common_metadata(w: gguf.GGUFWriter, n_layer: int, n_vocab: int, rope_base: float) -> None:
    """The hyperparameters every transformer here needs (llama_model_base::load_hparams)."""
    w.add_name(f"synthetic {w.arch}")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(CONTEXT_LENGTH)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_rope_freq_base(rope_base)
    w.add_vocab_size(n_vocab)


def embedding(rng: np.random.Generator, n_vocab: int) -> dict[str, np.ndarray]:
    """Token embedding and final norm. There is no output.weight: like SmolLM2
    and Qwen2.5-0.5B the output is tied to the embedding, which halves the file."""
    return {"token_embd.weight": matrix(rng, N_EMBD, n_vocab), "output_norm.weight": ones(N_EMBD)}


def attention(
    rng: np.random.Generator, i: int, head_dim: int = HEAD_DIM, q_gate: bool = False, qk_norm: bool = False
) -> dict[str, np.ndarray]:
    """Separate q, k, v and output projections of layer i. q_gate doubles q
    (Qwen3.5 packs an output gate next to each query head); qk_norm adds the
    per-head RMS norms of Qwen3 and Gemma 3."""
    n_q = N_HEAD * head_dim * (2 if q_gate else 1)
    t = {
        f"blk.{i}.attn_q.weight": matrix(rng, N_EMBD, n_q),
        f"blk.{i}.attn_k.weight": matrix(rng, N_EMBD, N_HEAD_KV * head_dim),
        f"blk.{i}.attn_v.weight": matrix(rng, N_EMBD, N_HEAD_KV * head_dim),
        f"blk.{i}.attn_output.weight": matrix(rng, N_HEAD * head_dim, N_EMBD),
    }
    if qk_norm:
        t[f"blk.{i}.attn_q_norm.weight"] = ones(head_dim)
        t[f"blk.{i}.attn_k_norm.weight"] = ones(head_dim)
    return t


def ffn(rng: np.random.Generator, i: int) -> dict[str, np.ndarray]:
    """The SwiGLU feed-forward of layer i: gate and up from N_EMBD to N_FF, down back."""
    return {
        f"blk.{i}.ffn_gate.weight": matrix(rng, N_EMBD, N_FF),
        f"blk.{i}.ffn_up.weight": matrix(rng, N_EMBD, N_FF),
        f"blk.{i}.ffn_down.weight": matrix(rng, N_FF, N_EMBD),
    }


# --- the architectures -------------------------------------------------------------------


def llama(w: gguf.GGUFWriter, rng: np.random.Generator, n_vocab: int) -> dict[str, np.ndarray]:
    """Llama / SmolLM2: pre-norm attention and SwiGLU, grouped KV heads."""
    n_layer = 2
    common_metadata(w, n_layer, n_vocab, rope_base=10000.0)
    w.add_rope_dimension_count(HEAD_DIM)  # the loader checks llama's n_rot equals the head size
    t = embedding(rng, n_vocab)
    for i in range(n_layer):
        t[f"blk.{i}.attn_norm.weight"] = ones(N_EMBD)
        t |= attention(rng, i)
        t[f"blk.{i}.ffn_norm.weight"] = ones(N_EMBD)
        t |= ffn(rng, i)
    return t


def qwen2(w: gguf.GGUFWriter, rng: np.random.Generator, n_vocab: int) -> dict[str, np.ndarray]:
    """Qwen2 / Qwen2.5: llama's layout plus biases on q, k and v."""
    n_layer = 2
    common_metadata(w, n_layer, n_vocab, rope_base=1000000.0)
    t = embedding(rng, n_vocab)
    for i in range(n_layer):
        t[f"blk.{i}.attn_norm.weight"] = ones(N_EMBD)
        t |= attention(rng, i)
        t[f"blk.{i}.attn_q.bias"] = vector(rng, N_HEAD * HEAD_DIM)
        t[f"blk.{i}.attn_k.bias"] = vector(rng, N_HEAD_KV * HEAD_DIM)
        t[f"blk.{i}.attn_v.bias"] = vector(rng, N_HEAD_KV * HEAD_DIM)
        t[f"blk.{i}.ffn_norm.weight"] = ones(N_EMBD)
        t |= ffn(rng, i)
    return t


def qwen3moe(w: gguf.GGUFWriter, rng: np.random.Generator, n_vocab: int) -> dict[str, np.ndarray]:
    """Qwen3-MoE: q/k norms, and in place of the FFN a router over 4 experts of
    which 2 run per token (few, so every expert is picked in a short prompt)."""
    n_layer, n_expert, n_used, n_ff_exp = 2, 4, 2, 64
    common_metadata(w, n_layer, n_vocab, rope_base=1000000.0)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
    w.add_expert_feed_forward_length(n_ff_exp)
    t = embedding(rng, n_vocab)
    for i in range(n_layer):
        t[f"blk.{i}.attn_norm.weight"] = ones(N_EMBD)
        t |= attention(rng, i, qk_norm=True)
        t[f"blk.{i}.ffn_norm.weight"] = ones(N_EMBD)
        t[f"blk.{i}.ffn_gate_inp.weight"] = f32_matrix(rng, N_EMBD, n_expert)
        t[f"blk.{i}.ffn_gate_exps.weight"] = experts(rng, N_EMBD, n_ff_exp, n_expert)
        t[f"blk.{i}.ffn_up_exps.weight"] = experts(rng, N_EMBD, n_ff_exp, n_expert)
        t[f"blk.{i}.ffn_down_exps.weight"] = experts(rng, n_ff_exp, N_EMBD, n_expert)
    return t


GEMMA3_WINDOW = 32  # tokens a sliding-window layer sees: a 100-token test crosses it


def gemma3(w: gguf.GGUFWriter, rng: np.random.Generator, n_vocab: int) -> dict[str, np.ndarray]:
    """Gemma 3: sliding-window attention on every layer but each 4th (the real
    models use 5 local layers per global one; 4 layers need a shorter cycle to
    hold both kinds), norms after attention and after the FFN too."""
    n_layer = 4
    common_metadata(w, n_layer, n_vocab, rope_base=1000000.0)
    w.add_sliding_window(GEMMA3_WINDOW)
    w.add_sliding_window_pattern(4)  # layers 0-2 local, layer 3 global
    w.add_rope_freq_base_swa(10000.0)
    t = embedding(rng, n_vocab)
    for i in range(n_layer):
        t[f"blk.{i}.attn_norm.weight"] = ones(N_EMBD)
        t |= attention(rng, i, qk_norm=True)
        t[f"blk.{i}.post_attention_norm.weight"] = ones(N_EMBD)
        t[f"blk.{i}.ffn_norm.weight"] = ones(N_EMBD)
        t |= ffn(rng, i)
        t[f"blk.{i}.post_ffw_norm.weight"] = ones(N_EMBD)
    return t


# Qwen3.5's linear-attention (gated delta net) sizes, scaled down from the real
# ones (16 key heads and 32 value heads of 128): 2 key heads, 4 value heads of 16.
SSM_STATE = 16  # head size of keys and values
SSM_GROUPS = 2  # key heads
SSM_V_HEADS = 4  # value heads
SSM_CONV = 4  # causal convolution kernel
QWEN35_HEAD_DIM = 32  # full-attention head size (256 in the real models)


def qwen35(w: gguf.GGUFWriter, rng: np.random.Generator, n_vocab: int) -> dict[str, np.ndarray]:
    """Qwen3.5: a hybrid of 3 recurrent (gated delta net) layers to each
    full-attention layer, and after the trunk one MTP (NextN) layer, a
    full-attention block that drafts the token after next. llama.cpp loads the
    MTP layer only when asked (llama_model_params.load_mtp) and never runs it
    in the trunk's graph."""
    n_trunk, n_mtp = 4, 1
    key_dim = SSM_STATE * SSM_GROUPS
    value_dim = SSM_STATE * SSM_V_HEADS
    conv_dim = 2 * key_dim + value_dim  # q, k and v go through the convolution together
    common_metadata(w, n_trunk + n_mtp, n_vocab, rope_base=10000000.0)
    w.add_nextn_predict_layers(n_mtp)
    w.add_full_attention_interval(4)  # layers 0-2 recurrent, layer 3 full attention
    w.add_key_length(QWEN35_HEAD_DIM)
    w.add_value_length(QWEN35_HEAD_DIM)
    w.add_rope_dimension_count(QWEN35_HEAD_DIM // 2)  # partial rotary, as in the real models
    w.add_rope_dimension_sections([3, 3, 2, 0])  # multimodal rope sections, summing to n_rot / 2
    w.add_ssm_conv_kernel(SSM_CONV)
    w.add_ssm_inner_size(value_dim)
    w.add_ssm_state_size(SSM_STATE)
    w.add_ssm_time_step_rank(SSM_V_HEADS)
    w.add_ssm_group_count(SSM_GROUPS)
    t = embedding(rng, n_vocab)
    for i in range(n_trunk):
        t[f"blk.{i}.attn_norm.weight"] = ones(N_EMBD)
        t[f"blk.{i}.post_attention_norm.weight"] = ones(N_EMBD)
        if (i + 1) % 4 == 0:
            t |= attention(rng, i, head_dim=QWEN35_HEAD_DIM, q_gate=True, qk_norm=True)
        else:
            t[f"blk.{i}.attn_qkv.weight"] = matrix(rng, N_EMBD, conv_dim)
            t[f"blk.{i}.attn_gate.weight"] = matrix(rng, N_EMBD, value_dim)
            t[f"blk.{i}.ssm_conv1d.weight"] = f32_matrix(rng, SSM_CONV, conv_dim)
            t[f"blk.{i}.ssm_dt.bias"] = ones(SSM_V_HEADS)
            t[f"blk.{i}.ssm_a"] = -ones(SSM_V_HEADS)  # -exp(A_log): negative, so the state decays
            t[f"blk.{i}.ssm_beta.weight"] = matrix(rng, N_EMBD, SSM_V_HEADS)
            t[f"blk.{i}.ssm_alpha.weight"] = matrix(rng, N_EMBD, SSM_V_HEADS)
            t[f"blk.{i}.ssm_norm.weight"] = ones(SSM_STATE)
            t[f"blk.{i}.ssm_out.weight"] = matrix(rng, value_dim, N_EMBD)
        t |= ffn(rng, i)
    # The MTP block. It shares the trunk's embedding and output head, as the
    # real checkpoints do, so nextn.embed_tokens and nextn.shared_head_head are left out.
    i = n_trunk
    t[f"blk.{i}.attn_norm.weight"] = ones(N_EMBD)
    t[f"blk.{i}.post_attention_norm.weight"] = ones(N_EMBD)
    t |= attention(rng, i, head_dim=QWEN35_HEAD_DIM, q_gate=True, qk_norm=True)
    t |= ffn(rng, i)
    t[f"blk.{i}.nextn.eh_proj.weight"] = matrix(rng, 2 * N_EMBD, N_EMBD)
    t[f"blk.{i}.nextn.enorm.weight"] = ones(N_EMBD)
    t[f"blk.{i}.nextn.hnorm.weight"] = ones(N_EMBD)
    t[f"blk.{i}.nextn.shared_head_norm.weight"] = ones(N_EMBD)
    return t


ARCHS = {"llama": llama, "qwen2": qwen2, "qwen3moe": qwen3moe, "gemma3": gemma3, "qwen35": qwen35}

# --- tokenizer -----------------------------------------------------------------------------


def tokenizer_fields(path: Path) -> list[tuple[str, Any, gguf.GGUFValueType, gguf.GGUFValueType | None]]:
    """Every tokenizer.* key of a GGUF as (key, value, type, item type): the
    vocabulary, merges, token types, special token ids, add_bos flags and chat
    template. A real tokenizer makes the synthetic model tokenize and render
    prompts exactly like the model it was copied from."""
    reader = gguf.GGUFReader(path)
    fields = []
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = gguf.GGUFValueType(field.types[0])
        sub_type = gguf.GGUFValueType(field.types[1]) if vtype == gguf.GGUFValueType.ARRAY else None
        fields.append((key, field.contents(), vtype, sub_type))
    return fields


def read_tokenizer(path: Path) -> tuple[list, int]:
    """The tokenizer.* fields of a GGUF and its vocabulary's size; a SpecchatError where it holds none."""
    if not path.is_file():
        raise SpecchatError(
            f"no GGUF file {path}", hint="give a GGUF model to copy the tokenizer from (--tokenizer-from)"
        )
    try:
        fields = tokenizer_fields(path)
    except (OSError, ValueError) as err:  # gguf's reader: no GGUF magic, a header cut short
        raise SpecchatError(f"cannot read {path} as a GGUF file ({err})", hint="give a GGUF model") from None
    sizes = [len(value) for key, value, _, _ in fields if key == "tokenizer.ggml.tokens"]
    if not sizes:
        raise SpecchatError(f"{path} holds no tokenizer", hint="give a GGUF model that has one")
    return fields, sizes[0]


# --- writing -------------------------------------------------------------------------------


def write(
    arch: str, out: Path, tokenizer_from: Path = DEFAULT_TOKENIZER, seed: int = SEED, template: str | None = None
) -> Path:
    """Write the synthetic ARCH model to out and return its path (another
    seed: other weights, the same layout and tokenizer, so a draft model
    for it that disagrees; `template`: another chat template, as a model
    file may carry one that is broken or hostile). It is written to a
    temporary file beside `out`, then renamed over it."""
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}: choose one of {', '.join(ARCHS)}")
    fields, n_vocab = read_tokenizer(tokenizer_from)
    rng = np.random.default_rng(seed)
    tmp = out.with_name(f".{out.name}.{secrets.token_hex(6)}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))  # a name of its own
    try:
        w = gguf.GGUFWriter(tmp, arch)
        tensors = ARCHS[arch](w, rng, n_vocab)
        for key, value, vtype, sub_type in fields:
            if key == "tokenizer.chat_template" and template is not None:
                value = template
            w.add_key_value(key, value, vtype, sub_type)
        for name, array in tensors.items():
            w.add_tensor(name, array)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def check_out(out: Path, force: bool) -> None:
    """OUT must be a new file in a folder that exists, or with --force a regular file to replace."""
    if not out.parent.is_dir():
        raise SpecchatError(f"no folder {out.parent} to write {out.name} in", hint="make the folder first")
    try:
        st = os.stat(out)
    except FileNotFoundError:
        return
    except OSError as err:
        raise SpecchatError(f"cannot look at {out} ({err.strerror})", hint="give a path you may write") from None
    if stat.S_ISDIR(st.st_mode):
        raise SpecchatError(f"{out} is a folder", hint="give the path of a .gguf file to write")
    if not stat.S_ISREG(st.st_mode):
        raise SpecchatError(f"{out} is not a regular file (a pipe or a device)", hint="give a new .gguf path")
    if not force:
        raise SpecchatError(f"{out} exists", hint="pass --force to replace it")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a tiny random-weight GGUF in a real architecture's layout.")
    parser.add_argument("arch", choices=sorted(ARCHS))
    parser.add_argument("out", type=Path)
    parser.add_argument(
        "--tokenizer-from", type=Path, default=DEFAULT_TOKENIZER, help="GGUF to copy the tokenizer.* keys from"
    )
    parser.add_argument("--seed", type=int, default=SEED, help="other weights, the same layout")
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = parser.parse_args(argv)
    try:
        check_out(args.out, args.force)
        try:
            path = write(args.arch, args.out, args.tokenizer_from, args.seed)
        except OSError as err:
            raise SpecchatError(f"cannot write {args.out} ({err.strerror or err})") from None
    except SpecchatError as err:
        print(safe_text(f"error: {err.message}" + (f"\nhint: {err.hint}" if err.hint else "")), file=sys.stderr)
        return 1
    print(safe_text(f"{path}: {args.arch}, {path.stat().st_size / 1e6:.1f} MB"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
