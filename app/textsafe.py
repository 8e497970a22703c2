"""Text from users, models and files, made safe to show: the one owner of
that rule, used by every path to the screen (the TUI, `specchat run`, error
lines, exports, the history list).

Such text is data. The TUI never parses it as markup (callers wrap it in
`Content(...)`, never a markup string), and `safe_text` makes every control
character visible except newline and tab, so no stored reply or model token
can retitle the terminal, clear the screen or move the cursor:

- C0 controls and DEL become their Unicode control pictures (ESC -> ␛);
- C1 controls (U+0080-U+009F, which some terminals obey as ESC [ ...) become
  `<U+009B>`;
- lone surrogates (invalid UTF-8 from a file or the command line) become
  U+FFFD, so the text can always be encoded, written and drawn.

A Windows line end (CR LF) is a newline, not a control character to show.
"""

from __future__ import annotations

import json
import re

# Every character that must not reach a terminal as itself.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# In JSON, where the text must stay exact: C1 and DEL as \u escapes (json.dumps
# already escapes C0). A lone surrogate is no character at all, and two of them
# as \u escapes would read back as one other character: they become U+FFFD.
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟
    if code == 0x7F:
        return "\u2421"  # ␡
    if code <= 0x9F:
        return f"<U+{code:04X}>"
    return "\ufffd"  # a lone surrogate


def safe_text(text: object) -> str:
    """`text` as a string with every control character but newline and tab
    made visible, and every lone surrogate replaced."""
    text = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def storable(text: str) -> str:
    """`text` as UTF-8 can hold it (SQLite, a file): every lone surrogate
    (a server's JSON may escape one) becomes U+FFFD, the rest stays exact."""
    return _SURROGATE.sub("\ufffd", text)


def safe_json(value: object, **dumps) -> str:
    """JSON for a terminal or a file: every character survives (C1 controls
    and DEL as \\u escapes), readable letters stay letters, lone surrogates
    become U+FFFD."""
    text = _SURROGATE.sub("\ufffd", json.dumps(value, ensure_ascii=False, **dumps))
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
