"""tools/synth_gguf.py: tiny random-weight GGUFs in each architecture's real
layout load in llama.cpp and decode with specchat's own driver, and the
Qwen3.5 one carries an MTP layer llama.cpp loads when asked (load_mtp)."""

from __future__ import annotations

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
