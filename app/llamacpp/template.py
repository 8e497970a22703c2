"""Chat prompts from the GGUF's own template (tokenizer.chat_template), rendered
with jinja2 the way Hugging Face and llama.cpp render it.

A template is code from a file: it runs in jinja2's sandbox, within a time
budget (RENDER_SECONDS, checked on every line of the compiled template, so a
runaway loop ends) and a size budget (no string or list multiplied past
MAX_TEXT characters), and any error it raises, at compile time or at render
time, is one line naming the model file."""

from __future__ import annotations

import datetime
import sys
import time

import jinja2
import llama_cpp as C
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from specchat.errors import SpecchatError

_FALLBACK = (  # ChatML, for a GGUF that carries no template
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
RENDER_SECONDS = 5.0  # a real template renders a conversation in milliseconds
MAX_TEXT = 1 << 24  # characters (or items) a template may build by multiplying: 16 M


def _raise(message: str) -> None:
    raise SpecchatError(f"the chat template refused the conversation: {message}")


def _special_text(model, token: int) -> str:
    if token < 0:
        return ""
    return C.llama_vocab_get_text(model.vocab, token).decode("utf-8", errors="replace")


class _Sandbox(ImmutableSandboxedEnvironment):
    """jinja2's sandbox, where `*` and `**` cannot build a value past the size budget."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context, operator, left, right):
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_TEXT:
                    raise SecurityError(f"the template builds a value of {len(seq) * n} items")
        if operator == "**" and isinstance(right, int) and abs(right) > 64:
            raise SecurityError(f"the template raises a number to the power {right}")
        return super().call_binop(context, operator, left, right)


class _OutOfTime(Exception):
    pass


class ChatTemplate:
    """A model's chat template, compiled once (llama.Model keeps it)."""

    def __init__(self, model) -> None:
        self.name = model.path.name
        source = model.meta("tokenizer.chat_template") or _FALLBACK
        env = _Sandbox(trim_blocks=True, lstrip_blocks=True, loader=jinja2.BaseLoader())
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
        try:
            self.template = env.from_string(source)
        except jinja2.TemplateSyntaxError as err:
            raise SpecchatError(
                f"{self.name}'s chat template does not parse (line {err.lineno}: {err.message})",
                hint="the model file's template is broken; try another file of the model",
            ) from None
        self.bos_token = _special_text(model, C.llama_vocab_bos(model.vocab))
        self.eos_token = _special_text(model, C.llama_vocab_eos(model.vocab))

    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        try:
            return _within(
                RENDER_SECONDS,
                lambda: self.template.render(
                    messages=messages,
                    add_generation_prompt=add_generation_prompt,
                    bos_token=self.bos_token,
                    eos_token=self.eos_token,
                ),
            )
        except SpecchatError:
            raise  # the template's own raise_exception: its words
        except _OutOfTime:
            raise SpecchatError(
                f"{self.name}'s chat template did not finish in {RENDER_SECONDS:.0f} s (a runaway loop?)",
                hint="the model file's template is broken; try another file of the model",
            ) from None
        except (jinja2.TemplateError, SecurityError, ArithmeticError, MemoryError, TypeError, ValueError,
                LookupError, AttributeError, RecursionError) as err:  # fmt: skip
            raise SpecchatError(
                f"{self.name}'s chat template failed ({type(err).__name__}: {err})",
                hint="the model file's template is broken; try another file of the model",
            ) from None


def _within(seconds: float, render):
    """Run render() on this thread, stopping it once `seconds` have passed:
    a trace function checks the clock on each line the template runs."""
    deadline = time.monotonic() + seconds

    def trace(frame, event, arg):
        if time.monotonic() > deadline:
            raise _OutOfTime
        return trace

    old = sys.gettrace()
    sys.settrace(trace)
    try:
        return render()
    finally:
        sys.settrace(old)
