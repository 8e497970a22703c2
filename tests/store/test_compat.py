"""The tokenizer check, by llama.cpp's rule, on small GGUFs written with
gguf.GGUFWriter (one per kind of mismatch) and on the real smollm2 file."""

from __future__ import annotations

import io
from pathlib import Path

import gguf
import pytest

from specchat.errors import SpecchatError
from specchat.store import compat
from specchat.store.compat import IncompatiblePair, check_pair, read_vocab
from tests.support.gguf import TOKENS, write_gguf


@pytest.fixture
def base(tmp_path) -> Path:
    return write_gguf(tmp_path / "target.gguf")


def mismatch(tmp_path: Path, base: Path, **draft) -> str:
    other = write_gguf(tmp_path / "draft.gguf", **draft)
    with pytest.raises(IncompatiblePair) as err:
        check_pair(base, other)
    assert err.value.message == f"draft and target tokenizers are incompatible: {err.value.mismatch}"
    assert "tokenizer" in err.value.hint
    return err.value.mismatch


def test_reader_agrees_with_gguf_reader(base):
    vocab = read_vocab(base)
    fields = gguf.GGUFReader(base).fields
    assert [t.decode() for t in vocab.tokens] == fields["tokenizer.ggml.tokens"].contents() == TOKENS
    assert (vocab.model, vocab.type, vocab.bos, vocab.eos, vocab.add_bos, vocab.add_eos) == ("gpt2", "BPE", 1, 2, False, False)


def test_same_tokenizer_passes(tmp_path, base):
    check_pair(base, write_gguf(tmp_path / "draft.gguf", merges=False))


def test_vocab_type(tmp_path, base):
    assert mismatch(tmp_path, base, model="llama") == "vocab type differs: target BPE (gpt2), draft SPM (llama)"


def test_add_bos_flag(tmp_path, base):
    assert mismatch(tmp_path, base, add_bos=True) == "add_bos flag differs: target false, draft true"


def test_add_eos_flag(tmp_path, base):
    assert mismatch(tmp_path, base, add_eos=True) == "add_eos flag differs: target false, draft true"


def test_bos_id(tmp_path, base):
    assert mismatch(tmp_path, base, bos=0) == "BOS token id differs: target 1, draft 0"


def test_eos_id(tmp_path, base):
    assert mismatch(tmp_path, base, eos=3) == "EOS token id differs: target 2, draft 3"


def test_vocab_size_difference_of_129_fails(tmp_path, base):
    more = TOKENS + [f"extra{i}" for i in range(129)]
    assert mismatch(tmp_path, base, tokens=more) == "vocab sizes differ by 129 (target 300, draft 429; at most 128 allowed)"


def test_vocab_size_difference_of_128_passes(tmp_path, base):
    check_pair(base, write_gguf(tmp_path / "draft.gguf", tokens=TOKENS + [f"extra{i}" for i in range(128)]))


def test_first_differing_token_is_named(tmp_path, base):
    tokens = list(TOKENS)
    tokens[7], tokens[200] = "seven", "two hundred"
    assert mismatch(tmp_path, base, tokens=tokens) == "token 7 differs: target 'tok7', draft 'seven'"


def test_tokens_below_id_5_are_not_compared(tmp_path, base):
    tokens = ["a", "b", "c", "d", "e"] + TOKENS[5:]
    check_pair(base, write_gguf(tmp_path / "draft.gguf", tokens=tokens))


def test_llama_defaults_apply_when_keys_are_missing():
    vocab = compat.Vocab(model="llama", tokens=[], bos=1, eos=2, add_bos=True, add_eos=False)
    assert compat.first_mismatch(vocab, vocab) is None


def test_not_a_gguf_is_a_clear_error(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(SpecchatError, match=r"junk.gguf is not a readable GGUF file \(no GGUF magic\)"):
        read_vocab(junk)


def test_header_cut_short_is_a_clear_error(base):
    data = base.read_bytes()[:3000]
    with pytest.raises(SpecchatError, match="the file ends inside its header"):
        read_vocab(io.BytesIO(data), label="cut.gguf")


def test_stream_reads_stop_after_the_header(base):
    class Counting(io.BytesIO):
        served = 0

        def read(self, n=-1):
            chunk = super().read(n)
            Counting.served += len(chunk)
            return chunk

    padded = base.read_bytes() + bytes(50 * 1024 * 1024)  # as if tensors followed
    assert len(read_vocab(Counting(padded)).tokens) == 300
    assert Counting.served <= 2 * 1024 * 1024


@pytest.mark.network
def test_real_smollm2_against_itself_passes(tiny_pair):
    target, draft = tiny_pair
    check_pair(target, draft)
    vocab = read_vocab(target)
    assert (vocab.type, len(vocab.tokens), vocab.bos, vocab.eos) == ("BPE", 49152, 1, 2)
