"""Chat prompts from the GGUF's own template (tokenizer.chat_template), rendered
with jinja2 the way Hugging Face and llama.cpp render it."""

from __future__ import annotations

import datetime

import jinja2
import llama_cpp as C
from jinja2.sandbox import ImmutableSandboxedEnvironment

from specchat.errors import SpecchatError

_FALLBACK = (  # ChatML, for a GGUF that carries no template
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _raise(message: str) -> None:
    raise SpecchatError(f"the chat template refused the conversation: {message}")


def _special_text(model, token: int) -> str:
    if token < 0:
        return ""
    return C.llama_vocab_get_text(model.vocab, token).decode("utf-8", errors="replace")


class ChatTemplate:
    """A model's chat template, compiled once (llama.Model keeps it)."""

    def __init__(self, model) -> None:
        source = model.meta("tokenizer.chat_template") or _FALLBACK
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loader=jinja2.BaseLoader())
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
        self.template = env.from_string(source)
        self.bos_token = _special_text(model, C.llama_vocab_bos(model.vocab))
        self.eos_token = _special_text(model, C.llama_vocab_eos(model.vocab))

    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        return self.template.render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )
