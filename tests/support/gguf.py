"""Small GGUF files written for the header and pairing tests: a tokenizer, and nothing else."""

from __future__ import annotations

from pathlib import Path

import gguf

TOKENS = ["<unk>", "<s>", "</s>", "<pad>", "<mask>"] + [f"tok{i}" for i in range(5, 300)]

def write_gguf(path: Path, model="gpt2", tokens=TOKENS, bos=1, eos=2, add_bos=False, add_eos=None, merges=True) -> Path:
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_name("test model")
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    if merges:  # a big string array after the tokens, which the reader must walk past
        writer.add_token_merges([f"t o{i}" for i in range(1000)])
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    writer.add_add_bos_token(add_bos)
    if add_eos is not None:
        writer.add_add_eos_token(add_eos)
    writer.add_chat_template("{{ messages }}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
