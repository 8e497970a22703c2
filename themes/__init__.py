"""Textual themes, each carrying the speculation colours as theme variables.

Every theme sets the spec variables the TUI's styles use:

- `spec-accepted`  accepted draft tokens of no drafter below (a server's drafts)
- `spec-rejected`  draft tokens the target threw away (also struck through)
- `spec-ngram`     accepted tokens the n-gram drafter proposed
- `spec-model`     accepted tokens the draft model proposed
- `spec-mtp`       accepted tokens the target's own MTP head proposed
- `spec-grammar`   accepted tokens the grammar forced
- `spec-memory`    accepted tokens copied from the memory (this user's earlier
                   replies)

Each drafter has its colour in every mode: alone, or as the part of a
hybrid or auto draft that proposed the token.
- `spec-good`      a speedup above 1
- `spec-bad`       a speedup below 1

User themes are TOML files in `<config dir>/themes/`, one theme per file:

    name = "solarized"          # optional; defaults to the file name
    primary = "#268bd2"         # any Theme field: secondary, background, dark, ...
    [variables]
    spec-accepted = "#859900"

A spec colour a user theme leaves out is the light theme's where it says
`dark = false`, the dark one's otherwise. The chat offers these themes and
the user's, not Textual's own (some of those leave the prompt unreadable).

Every key of a user theme is checked here, before Textual sees it
(`theme_from_toml`): the name is plain words (it is listed in the palette),
each colour parses as one, a variable is one specchat or Textual knows and
holds what its default holds (a colour, or a text style such as "bold"),
numbers are finite shares. A theme that fails is refused whole, with one
line naming its file, key and value; the app starts on the default.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import fields
from functools import cache
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.css.constants import VALID_STYLE_FLAGS
from textual.theme import Theme

from specchat import paths
from specchat.textsafe import safe_text

SPEC_VARIABLES = (
    "spec-accepted",
    "spec-rejected",
    "spec-ngram",
    "spec-model",
    "spec-mtp",
    "spec-grammar",
    "spec-memory",
    "spec-good",
    "spec-bad",
)

# Fallbacks for themes that don't name the spec colours (Textual's own, say).
SPEC_DEFAULTS = {
    "spec-accepted": "#4ec96b",
    "spec-rejected": "#e0605e",
    "spec-ngram": "#4ec96b",
    "spec-model": "#3fb8c4",
    "spec-mtp": "#e58fd0",
    "spec-grammar": "#c58af9",
    "spec-memory": "#e8c547",
    "spec-good": "#4ec96b",
    "spec-bad": "#e0605e",
}

DARK = Theme(
    name="specchat-dark",
    primary="#5a9bd5",
    secondary="#8a7fd0",
    accent="#e0a84e",
    background="#16181d",
    surface="#1e2128",
    panel="#272b34",
    foreground="#d8dbe2",
    success="#4ec96b",
    error="#e0605e",
    warning="#e0a84e",
    dark=True,
    variables=dict(SPEC_DEFAULTS),
)

LIGHT = Theme(
    name="specchat-light",
    primary="#2f6db3",
    secondary="#6a5acd",
    accent="#b06d00",
    background="#fafafa",
    surface="#f0f0f2",
    panel="#e4e6ea",
    foreground="#1f2328",
    success="#1a7f37",
    error="#c62828",
    warning="#b06d00",
    dark=False,
    variables={
        "spec-accepted": "#1a7f37",
        "spec-rejected": "#c62828",
        "spec-ngram": "#1a7f37",
        "spec-model": "#0b6e79",
        "spec-mtp": "#a3207a",
        "spec-grammar": "#8250df",
        "spec-memory": "#9a6700",
        "spec-good": "#1a7f37",
        "spec-bad": "#c62828",
    },
)

# Okabe-Ito colours: blue vs orange (plus the strike-through) stay apart for
# every common form of colour blindness; no red/green pair anywhere.
COLORBLIND = Theme(
    name="specchat-colorblind",
    primary="#56b4e9",
    secondary="#cc79a7",
    accent="#e69f00",
    background="#15171c",
    surface="#1d2027",
    panel="#262a33",
    foreground="#e2e4e9",
    success="#0072b2",
    error="#e69f00",
    warning="#f0e442",
    dark=True,
    variables={
        "spec-accepted": "#56b4e9",
        "spec-rejected": "#e69f00",
        "spec-ngram": "#56b4e9",
        "spec-model": "#cc79a7",
        "spec-mtp": "#0072b2",
        "spec-grammar": "#009e73",
        "spec-memory": "#f0e442",
        "spec-good": "#56b4e9",
        "spec-bad": "#e69f00",
    },
)

HIGH_CONTRAST = Theme(
    name="specchat-high-contrast",
    primary="#ffff00",
    secondary="#00ffff",
    accent="#ffff00",
    background="#000000",
    surface="#000000",
    panel="#1a1a1a",
    foreground="#ffffff",
    success="#00ff00",
    error="#ff4040",
    warning="#ffff00",
    dark=True,
    luminosity_spread=0.3,
    text_alpha=1.0,
    variables={
        "spec-accepted": "#00ff00",
        "spec-rejected": "#ff4040",
        "spec-ngram": "#00ff00",
        "spec-model": "#00ffff",
        "spec-mtp": "#8888ff",
        "spec-grammar": "#ff00ff",
        "spec-memory": "#ffff00",
        "spec-good": "#00ff00",
        "spec-bad": "#ff4040",
    },
)

BUILTIN = (DARK, LIGHT, COLORBLIND, HIGH_CONTRAST)
BUILTIN_NAMES = frozenset(t.name for t in BUILTIN)
DEFAULT_THEME = DARK.name

_THEME_FIELDS = {f.name for f in fields(Theme)}
MAX_THEME_BYTES = 64 << 10  # a theme is a few dozen colours: a bigger file is not one
# What each key of a theme file must hold; every other key is a colour.
_KINDS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "name": (str, "a string"),
    "dark": (bool, "true or false"),
    "ansi": (bool, "true or false"),
    "luminosity_spread": ((int, float), "a number"),
    "text_alpha": ((int, float), "a number"),
    "variables": (dict, "a table"),
}
_NAME = re.compile(r"[\w.+-]+( [\w.+-]+)*")  # shown in the palette: words, never markup
_HINTS = {"colour": 'a colour (try "#268bd2")', "style": 'a text style (try "bold underline")'}


def span_style(kind: str, drafter: str, resolve=lambda var: f"${var}") -> str:
    """The style of one span of a reply ({kind, drafter}, as display.spans makes
    them): the target's own tokens plain, rejected drafts struck through, and
    accepted drafts in the colour of the drafter that proposed them, whatever
    the mode (hybrid's spans read hybrid:ngram, …). Textual resolves the $variables from the
    theme; a plain terminal passes `resolve=SPEC_DEFAULTS.get`."""
    if kind == "rejected":
        return "strike " + resolve("spec-rejected")
    if kind == "accepted":
        return resolve(SOURCES.get(drafter.removeprefix("hybrid:"), "spec-accepted"))
    return ""


# Accepted tokens coloured by who proposed them, in every mode.
SOURCES = {
    "ngram": "spec-ngram",
    "draft": "spec-model",
    "mtp": "spec-mtp",
    "grammar": "spec-grammar",
    "memory": "spec-memory",
}


def theme_from_toml(text: str, default_name: str) -> Theme:
    """One Theme from a TOML document. Raises ValueError naming the bad key,
    so a broken file is refused here instead of crashing the app when used."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(str(err)) from None
    except RecursionError:
        raise ValueError("nested too deep to be a theme") from None
    unknown = sorted(set(data) - _THEME_FIELDS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}")
    if "primary" not in data:
        raise ValueError("missing 'primary' colour")
    if "name" not in data and not _NAME.fullmatch(default_name):
        raise ValueError(f'the file name {default_name!r} is not a theme name: add name = "…" to the file')
    data.setdefault("name", default_name)
    for key, value in data.items():
        _check(key, value)
    # The token colours it leaves out: the light set on a light theme (dark = false), else the dark.
    data["variables"] = {**(SPEC_DEFAULTS if data.get("dark", True) else LIGHT.variables), **data.get("variables", {})}
    theme = Theme(**data)
    try:
        theme.to_color_system().generate()  # what Textual does when the theme is chosen
    except Exception as err:  # noqa: BLE001 - any failure here would have crashed the app
        raise ValueError(f"the theme's colours do not combine ({err})") from None
    return theme


def _check(key: str, value) -> None:
    """One key of a theme file, as Textual will use it."""
    kind, what = _KINDS.get(key, (str, "a colour"))
    if key not in _KINDS:
        _value(key, value, "colour")
    elif not _is(value, kind):
        raise ValueError(f"{key} should be {what}, not {value!r}")
    elif key == "name" and not (len(value) <= 64 and _NAME.fullmatch(value)):
        raise ValueError(f"name = {value!r} is not a theme name (letters, digits, spaces and - _ . +)")
    elif key in ("luminosity_spread", "text_alpha") and not 0 <= value <= 1:  # NaN and inf fail too
        raise ValueError(f"{key} = {value!r} is not a number from 0 to 1")
    elif key == "variables":
        forms = _variable_forms()
        for name, held in value.items():
            if name not in forms:
                raise ValueError(f"unknown variable {name!r}")
            _value(f"variables.{name}", held, forms[name])


def _is(value: object, kind: type | tuple[type, ...]) -> bool:
    """isinstance, where true and false are no numbers."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _value(key: str, value, default_form: str) -> None:
    """A colour, or a variable's value: of the form its default has ("auto 87%"
    and "initial" defaults take a colour too)."""
    form = _form(value)
    if form != default_form and not (form == "colour" and default_form in ("auto", "initial")):
        raise ValueError(f"{key} = {value!r} is not {_HINTS.get(default_form, _HINTS['colour'])}")


def _form(value) -> str | None:
    """What a value is, as Textual's styles read it: colour, style, auto, initial, or None."""
    if not isinstance(value, str):
        return None
    if value == "initial" or re.fullmatch(r"auto( \d{1,3}%)?", value):
        return value.split()[0]
    if re.fullmatch(r"[a-z]+( [a-z]+)*", value) and set(value.split()) <= VALID_STYLE_FLAGS:
        return "style"
    try:
        Color.parse(value)
    except ColorParseError:
        return None
    return "colour"


@cache
def _variable_forms() -> dict[str, str]:
    """Every theme variable specchat or Textual knows, and the form of its default
    (each default has one of the forms _form reads)."""
    defaults = {**DARK.to_color_system().generate(), **SPEC_DEFAULTS}
    return {name: form for name, value in defaults.items() if (form := _form(value)) is not None}


def load_user_themes(folder: Path) -> tuple[list[Theme], list[str]]:
    """Themes from `folder/*.toml`, and one error line per file that failed."""
    themes: list[Theme] = []
    errors: list[str] = []
    if not folder.is_dir():
        return themes, errors
    taken = set(BUILTIN_NAMES)
    for path in sorted(folder.glob("*.toml")):
        try:
            theme = theme_from_toml(_read_theme(path), path.stem)
            if theme.name in taken:  # it would replace that theme without a word
                whose = "a built-in theme" if theme.name in BUILTIN_NAMES else "a theme loaded before it"
                raise ValueError(f"the name {theme.name!r} is taken by {whose}")
            taken.add(theme.name)
            themes.append(theme)
        except paths.NotRegularFile:
            errors.append(safe_text(f"theme {path}: not a regular file; not loaded"))
        except paths.TooBig as err:
            errors.append(safe_text(f"theme {path}: {err.size} bytes, too big for a theme; not loaded"))
        except (ValueError, TypeError, OSError) as err:  # UnicodeDecodeError is a ValueError
            errors.append(safe_text(f"theme {path}: {getattr(err, 'strerror', None) or err}; not loaded"))
    return themes, errors


def _read_theme(path: Path) -> str:
    """A theme file's text, read as `paths.read_regular` reads: a FIFO or a
    device named *.toml never hangs the start, a huge file is refused
    unread, and a link is followed (themes may be kept with dotfiles)."""
    return paths.read_regular(path, MAX_THEME_BYTES, follow_links=True).decode("utf-8")
