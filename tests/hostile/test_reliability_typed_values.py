"""Values of the wrong type where specchat expects a number, a string or a
list: a GGUF header whose tokenizer keys hold another type is one line with
a hint (in the real process, before any model loads), and a server reply's
stats with a baseline that is no figure show no baseline, never a traceback."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from specchat.display import stats_fields
from specchat.errors import SpecchatError
from specchat.store.compat import check_pair, read_vocab
from tests.support.hostile import err_lines, specchat

TOKENS = ["<unk>", "<s>", "</s>"] + [f"tok{i}" for i in range(3, 40)]
HINT = "check the file; re-pull it if it came from the store"


def write_gguf(path: Path, **keys) -> Path:
    """A GGUF file with the usual tokenizer keys, each replaced by `keys`
    (key name → a writer call that stores it with another type)."""
    writer = gguf.GGUFWriter(str(path), arch="llama")
    fields = {
        "tokenizer.ggml.model": lambda: writer.add_tokenizer_model("gpt2"),
        "tokenizer.ggml.tokens": lambda: writer.add_token_list(TOKENS),
        "tokenizer.ggml.bos_token_id": lambda: writer.add_bos_token_id(1),
        "tokenizer.ggml.eos_token_id": lambda: writer.add_eos_token_id(2),
    }
    for key, add in fields.items():
        keys[key](writer, key) if key in keys else add()
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


WRONG_TYPES = [
    ("tokenizer.ggml.tokens", lambda w, key: w.add_uint32(key, 5), "tokenizer.ggml.tokens is not a list of strings"),
    ("tokenizer.ggml.tokens", lambda w, key: w.add_array(key, list(range(40))),
     "tokenizer.ggml.tokens is not a list of strings"),
    ("tokenizer.ggml.model", lambda w, key: w.add_array(key, [1, 2]), "tokenizer.ggml.model is not a string"),
    ("tokenizer.ggml.bos_token_id", lambda w, key: w.add_string(key, "1"),
     "tokenizer.ggml.bos_token_id is not a token id"),
    ("tokenizer.ggml.eos_token_id", lambda w, key: w.add_float32(key, 2.0),
     "tokenizer.ggml.eos_token_id is not a token id"),
]


@pytest.mark.parametrize(("key", "add", "why"), WRONG_TYPES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(WRONG_TYPES)])
def test_a_tokenizer_key_of_another_type_is_a_clear_error(tmp_path, key, add, why):
    path = write_gguf(tmp_path / "odd.gguf", **{key: add})
    with pytest.raises(SpecchatError) as err:
        read_vocab(path)
    assert err.value.message == f"{path} is not a readable GGUF file ({why})"
    assert err.value.hint == HINT
    with pytest.raises(SpecchatError, match="is not a readable GGUF file"):
        check_pair(write_gguf(tmp_path / "good.gguf"), path)


def test_the_usual_keys_still_read(tmp_path):
    vocab = read_vocab(write_gguf(tmp_path / "good.gguf"))
    assert (vocab.model, vocab.type, vocab.bos, vocab.eos) == ("gpt2", "BPE", 1, 2)
    assert [t.decode() for t in vocab.tokens] == TOKENS


def test_run_with_a_draft_whose_tokens_are_a_number_says_so_in_one_line(tmp_path):
    """`specchat run --target --draft` checks the pair before loading either model."""
    target = write_gguf(tmp_path / "target.gguf")
    draft = write_gguf(tmp_path / "draft.gguf", **{"tokenizer.ggml.tokens": lambda w, key: w.add_uint32(key, 5)})
    done = specchat("run", "hi", "--target", str(target), "--draft", str(draft), env={"SPECCHAT_HOME": str(tmp_path)})
    assert done.returncode != 0
    assert not done.stdout
    lines = err_lines(done)  # no traceback
    assert lines[0].endswith(f"{draft} is not a readable GGUF file (tokenizer.ggml.tokens is not a list of strings)")
    assert lines[1:] == [f"hint: {HINT}"]


def test_a_server_baseline_that_is_no_figure_shows_no_baseline():
    """The server's stats line, given a baseline that cannot be shown (negative,
    infinite, text) and a speedup: the baseline is called inconsistent."""
    for baseline in (-1.0, float("inf"), "fast"):
        stats = {"source": "server", "timings_sent": True, "counters": False, "tok_s": 90.0,
                 "baseline_tok_s": baseline, "speedup": 2.0}
        assert stats_fields(stats) == [("speculation", "no speculation data from this server"),
                                       ("tok_s", "90.0 tok/s (server clock)"),
                                       ("baseline", "the baseline's figures are inconsistent, not shown")]
