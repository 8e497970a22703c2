"""tools/synth_gguf.py: tiny random-weight GGUFs in each architecture's real
layout load in llama.cpp and decode with specchat's own driver, and the
Qwen3.5 one carries an MTP layer llama.cpp loads when asked (load_mtp). An
OUT it cannot write is one error line and a hint, never a traceback or a
wait, and an OUT that exists is replaced whole, only with --force."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tools import synth_gguf

# A prompt of 121 SmolLM2 tokens: longer than gemma3's 32-token window.
PROMPT = "The quick brown fox jumps over the lazy dog. " * 12

# Per arch, metadata keys the file must hold and llama.cpp must read back.
EXPECTED_META = {
    "llama": {"llama.block_count": "2", "llama.rope.dimension_count": "16"},
    "qwen2": {"qwen2.block_count": "2", "qwen2.rope.freq_base": "1000000.000000"},
    "qwen3moe": {"qwen3moe.expert_count": "4", "qwen3moe.expert_used_count": "2"},
    "gemma3": {"gemma3.attention.sliding_window": "32", "gemma3.attention.sliding_window_pattern": "4"},
    "qwen35": {"qwen35.block_count": "5", "qwen35.nextn_predict_layers": "1", "qwen35.full_attention_interval": "4"},
}


def synth(arch: str, out, tokenizer) -> str:
    assert synth_gguf.main([arch, str(out), "--tokenizer-from", str(tokenizer)]) == 0
    return str(out)


@pytest.mark.real
@pytest.mark.parametrize("arch", sorted(EXPECTED_META))
def test_synthetic_model_loads_and_decodes_finite_varied_logits(arch, tiny_pair, tmp_path):
    from specchat.llamacpp.llama import Model

    path = synth(arch, tmp_path / f"{arch}.gguf", tiny_pair[0])
    m = Model(path, n_ctx=512, n_threads=2, n_gpu_layers=0)
    try:
        assert m.meta("general.architecture") == arch
        for key, value in EXPECTED_META[arch].items():
            assert m.meta(key) == value, key
        assert m.n_vocab == 49152  # the copied SmolLM2 vocabulary
        tokens = m.tokenize(PROMPT)
        assert len(tokens) == 121 > synth_gguf.GEMMA3_WINDOW
        assert m.detokenize(tokens) == PROMPT  # the real tokenizer round-trips
        m.eval(tokens, n_logits=2)
        for j in (0, 1):
            row = m.logits(j)
            assert np.isfinite(row).all()
            assert row.std() > 0.05 and row.max() - row.min() > 0.5
        assert not np.array_equal(m.logits(0), m.logits(1))
    finally:
        m.close()


@pytest.mark.real
def test_qwen35_mtp_layer_loads_only_with_load_mtp(tiny_pair, tmp_path):
    import llama_cpp as C

    from specchat.llamacpp.llama import recent_log

    path = synth("qwen35", tmp_path / "qwen35.gguf", tiny_pair[0]).encode()
    unused = {}
    for load_mtp in (False, True):
        mp = C.llama_model_default_params()
        mp.n_gpu_layers = 0
        mp.use_extra_bufts = False  # llama.cpp's AMX kernel crashes at the first decode
        mp.load_mtp = load_mtp
        model = C.llama_model_load_from_file(path, mp)
        assert model
        try:
            assert C.llama_model_n_layer(model) == 4  # the trunk: 3 recurrent layers and 1 full attention
            assert C.llama_model_n_layer_nextn(model) == 1
            unused[load_mtp] = [line for line in recent_log() if "unused tensor" in line]
            if load_mtp:
                # A draft context runs the MTP block's graph: it builds only with the block's weights.
                cp = C.llama_context_default_params()
                cp.n_ctx = cp.n_batch = cp.n_ubatch = 256
                cp.n_threads = cp.n_threads_batch = 2
                cp.ctx_type = C.LLAMA_CONTEXT_TYPE_MTP
                ctx = C.llama_init_from_model(model, cp)
                assert ctx
                C.llama_free(ctx)
        finally:
            C.llama_model_free(model)
    # Without load_mtp llama.cpp skips the 15 tensors of block 4, the MTP block; with it, none.
    assert len(unused[False]) == 15 and all("blk.4." in line for line in unused[False])
    assert unused[True] == []


@pytest.mark.real
def test_same_command_writes_the_same_bytes(tiny_pair, tmp_path):
    a = synth("qwen3moe", tmp_path / "a.gguf", tiny_pair[0])
    b = synth("qwen3moe", tmp_path / "b.gguf", tiny_pair[0])
    assert open(a, "rb").read() == open(b, "rb").read()
    assert 5e6 < len(open(a, "rb").read()) < 20e6  # a few MB: mostly the 49152-token embedding in F16


# --- where it writes ----------------------------------------------------------------------

SCRIPT = Path(synth_gguf.__file__)
SCRIPT_SECONDS = 120  # it imports numpy and gguf and writes a few hundred kB: seconds, even on a busy machine


@pytest.fixture
def tokenizer(tmp_path) -> Path:
    """A GGUF holding only a 16-token tokenizer: enough to write a file, not to run one."""
    import gguf

    path = tmp_path / "tokenizer.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(16)])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def limit_file_size() -> None:
    """In the child: files of 64 kB at most, a write past it failing as on a full disk (EFBIG, not a signal)."""
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))


def synth_script(out, tokenizer: Path, *flags: str, preexec=None) -> subprocess.CompletedProcess:
    """`python tools/synth_gguf.py llama OUT` as a user runs it; still running after SCRIPT_SECONDS fails the test."""
    argv = [sys.executable, str(SCRIPT), "llama", str(out), "--tokenizer-from", str(tokenizer), *flags]
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=SCRIPT_SECONDS, stdin=subprocess.DEVNULL, preexec_fn=preexec
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"synth_gguf.py was still running after {SCRIPT_SECONDS} s")


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_it_writes_a_new_file_and_replaces_one_only_with_force(tokenizer, tmp_path):
    import gguf

    out = tmp_path / "model.gguf"
    r = synth_script(out, tokenizer)
    assert r.returncode == 0, r.stderr
    assert gguf.GGUFReader(out).fields["general.architecture"].contents() == "llama"
    written = out.read_bytes()
    out.write_bytes(b"the user's own model")
    r = synth_script(out, tokenizer)
    assert (r.returncode, r.stderr.splitlines()) == (1, [f"error: {out} exists", "hint: pass --force to replace it"])
    assert out.read_bytes() == b"the user's own model"
    r = synth_script(out, tokenizer, "--force")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == written and leftovers(tmp_path) == []


def test_an_out_it_cannot_write_is_one_error_line(tokenizer, tmp_path):
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    cases = {
        tmp_path: [f"error: {tmp_path} is a folder", "hint: give the path of a .gguf file to write"],
        tmp_path / "nowhere" / "m.gguf": [
            f"error: no folder {tmp_path / 'nowhere'} to write m.gguf in",
            "hint: make the folder first",
        ],
        fifo: [f"error: {fifo} is not a regular file (a pipe or a device)", "hint: give a new .gguf path"],
        Path("/dev/full"): [
            "error: /dev/full is not a regular file (a pipe or a device)",
            "hint: give a new .gguf path",
        ],
    }
    for out, lines in cases.items():
        for flags in ((), ("--force",)):  # --force replaces a file, never a folder, a pipe or a device
            r = synth_script(out, tokenizer, *flags)
            assert (r.returncode, r.stderr.splitlines()) == (1, lines), out


def test_a_write_that_fails_midway_leaves_nothing_that_looks_ready(tokenizer, tmp_path):
    out = tmp_path / "model.gguf"
    r = synth_script(out, tokenizer, preexec=limit_file_size)
    (line,) = r.stderr.splitlines()  # the error as the write met it: "File too large", or a short write
    assert r.returncode == 1 and line.startswith(f"error: cannot write {out} (")
    assert not out.exists() and leftovers(tmp_path) == []


def test_a_tokenizer_it_cannot_read_is_one_error_line(tmp_path):
    missing, junk = tmp_path / "missing.gguf", tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    r = synth_script(tmp_path / "m.gguf", missing)
    assert (r.returncode, r.stderr.splitlines()[0]) == (1, f"error: no GGUF file {missing}")
    r = synth_script(tmp_path / "m.gguf", junk)
    assert r.returncode == 1 and r.stderr.splitlines()[0].startswith(f"error: cannot read {junk} as a GGUF file (")
    assert len(r.stderr.splitlines()) == 2 and not (tmp_path / "m.gguf").exists()
