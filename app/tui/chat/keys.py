"""Every key of the chat, in one table: ACTIONS makes the bindings (each
with an id, so `[keymap]` in the settings can remap it), the command
palette and the legend's key list. What each one does is SpecchatApp's
`action_<name>`, which asks the ChatController (controller.py) for the rules.
`checked_keymap` keeps the [keymap] entries that bind and names the others.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.keys import REPLACED_KEYS, Keys, key_to_character


@dataclass(frozen=True)
class Action:
    id: str  # binding id: remap with [keymap] in settings.toml
    keys: str
    action: str
    title: str
    help: str
    show: bool = False
    priority: bool = False  # wins over the prompt's own keys (ctrl+d, ctrl+t, …)


ACTIONS = [
    Action(
        "cycle_drafter",
        "ctrl+d",
        "cycle_drafter",
        "Drafter",
        "Cycle the drafter (from the next round, also mid-reply)",
        True,
        True,
    ),
    Action(
        "k_up",
        "ctrl+up",
        "change_k(1)",
        "k+",
        "Let this drafter propose one token more per round (its k, in this chat)",
        False,
        True,
    ),
    Action(
        "k_down", "ctrl+down", "change_k(-1)", "k−", "Let this drafter propose one token fewer per round", False, True
    ),
    Action("cancel", "escape", "cancel", "Cancel", "Stop at the next round; the partial reply stays", True),
    Action(
        "toggle_rejected",
        "ctrl+t",
        "toggle_rejected",
        "Rejected",
        "Show or hide the rejected drafts in replies that ended, and code's drafter colours",
        True,
        True,
    ),
    Action("legend", "f1", "legend", "Legend", "What the colours and numbers mean; every key", True),
    Action("stats_panel", "f2", "stats_panel", "Stats", "Show or hide the stats panel", True),
    Action(
        "history",
        "f3",
        "history",
        "History",
        "History: reopen, search (s: every message), rename, delete or export a conversation",
        True,
    ),
    Action("pairs", "f4", "app.pairs", "Pairs", "Switch to another model pair (pull it if needed)", True),
    Action("markdown", "f5", "markdown", "Markdown", "Flip the last reply between colours and rendered Markdown"),
    Action(
        "copy_reply",
        "f6",
        "copy_reply",
        "Copy",
        "Copy a message (the last reply first in line; c: its code): to the terminal's clipboard and to copied.txt",
        False,
        True,
    ),
    Action(
        "copy_code",
        "f7",
        "copy_code",
        "Copy code",
        "Copy the last reply's code blocks, as F6 copies a message",
        False,
        True,
    ),
    Action("regenerate", "ctrl+r", "regenerate", "Regenerate", "Generate the last reply again", True, True),
    Action("edit_last", "ctrl+l", "edit_last", "Edit last", "Edit and resend your last message", False, True),
    Action("new_chat", "ctrl+n", "new_chat", "New chat", "Start a new conversation", True, True),
    Action(
        "memory",
        "f10",
        "memory",
        "Memory",
        "Draft from your earlier replies in the history, or not, in this chat (on at start; off empties the memory)",
    ),
    Action(
        "json_schema",
        "f8",
        "app.json_schema",
        "Reply as JSON matching…",
        "Constrain the replies to a JSON schema file (/schema FILE before a message does the same; off frees them)",
    ),
    Action(
        "branch",
        "ctrl+b",
        "branch",
        "Branch",
        "Branch from any message: send one of yours again, edited, or have a reply again; the old branch stays",
        True,
        True,
    ),
    Action(
        "diff",
        "f9",
        "diff",
        "Diff",
        "The last reply's code against the attached file it rewrites; w there writes it back once you say y",
        True,
    ),
    Action("next_branch", "alt+right", "step_branch(1)", "Next branch", "Step to this conversation's next branch"),
    Action("prev_branch", "alt+left", "step_branch(-1)", "Previous branch", "Step to its previous branch"),
]

# Palette commands without a key of their own: each has a slash command too.
SETTINGS_COMMANDS = [
    (
        "System prompt…",
        "ask('/system')",
        "This conversation's system prompt, kept with it (/system TEXT does the same)",
    ),
    ("Temperature…", "ask('/temp')", "Sample the replies at this temperature, 0 greedy (/temp 0.7 does the same)"),
    ("Top-p…", "ask('/top-p')", "Sample from the top-p share of the probability, 1 off (/top-p 0.9 does the same)"),
]


class SpecchatCommands(Provider):
    """The command palette, from the ACTIONS table."""

    def _commands(self):
        run, screen = self.app.run_action, self.screen  # the chat's screen, which the palette opened over
        for a in ACTIONS:
            yield a.title, partial(run, a.action, screen), a.help
        for title, action, help_text in SETTINGS_COMMANDS:
            yield title, partial(run, action, screen), help_text

    async def discover(self) -> Hits:
        for title, run, help_text in self._commands():
            yield DiscoveryHit(title, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, run, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=help_text)


def legend_keys(bindings: list[Binding], display: Callable[[Binding], str]) -> list[tuple[str, str]]:
    """(key as shown, what it does) for each of ACTIONS bound now, once each,
    after the user's [keymap]."""
    ours = {a.id for a in ACTIONS}
    seen: dict[str, Binding] = {}
    for b in bindings:
        if b.id in ours and b.id not in seen:
            seen[b.id] = b
    keys = [(b.key_display or display(b), b.description) for b in seen.values()]
    return keys + list(OTHER_KEYS)


# Keys and commands the legend lists after ACTIONS: Textual's, the prompt's and the slash commands.
OTHER_KEYS = (
    ("ctrl+p", "The command palette: every action by its name"),
    ("shift+enter", "A new line in the message (ctrl+j too)"),
    ("tab", "Move between the prompt and the conversation (↑ ↓ pgup pgdn scroll it)"),
    ("/file PATH", "Attach a file to the next message (@ in the prompt picks one)"),
    ("/system TEXT", "This conversation's system prompt (/system alone clears it)"),
    ("/temp X, /top-p X", "Sample at temperature X (0 greedy) or top-p X (1 off); kept for the next chats"),
)


def keymap_conflicts(keymap: dict[str, str]) -> list[str]:
    """One line per key that [keymap] leaves bound to more than one action
    (only one of them would run, and the other would have no key)."""
    by_key: dict[str, list[str]] = {}
    for a in ACTIONS:
        for key in keymap.get(a.id, a.keys).split(","):
            by_key.setdefault(key.strip(), []).append(a.id)
    return [
        f"keymap: {key} is bound to {' and '.join(ids)}; only one of them runs, so remap the others"
        for key, ids in by_key.items()
        if key and len(ids) > 1
    ]


_MODIFIERS = {"ctrl", "shift", "alt", "meta", "super", "hyper"}
# Textual's names of keys ("f9", "left", "pageup"; "minus", "slash"), without their modifiers.
_NAMES = {k.value.rpartition("+")[2] for k in Keys if not k.value.startswith("<")} | set(REPLACED_KEYS)
_KEY_EXAMPLES = 'keys look like "ctrl+d", "f9" or "alt+left"'


def is_key(key: str) -> bool:
    """A key Textual can report: one character, or modifiers and a key's name."""
    if len(key) == 1:
        return True
    *modifiers, name = key.split("+")
    known = len(name) == 1 or name in _NAMES or key_to_character(name) is not None
    return known and all(m in _MODIFIERS for m in modifiers)


def checked_keymap(keymap: dict[str, str], where: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The [keymap] entries that bind one of ACTIONS to keys, and one warning
    per entry left out (empty, not a key, no such id), naming it and, from
    `where` (config.Settings.keymap_where), its line; a left-out binding keeps its own key."""
    defaults = {a.id: a.keys for a in ACTIONS}
    kept: dict[str, str] = {}
    warnings: list[str] = []
    for name, keys in keymap.items():
        problem = _problem(name, keys, defaults)
        if problem is None:
            kept[name] = keys
        else:
            at = (where or {}).get(name)
            warnings.append(f"{at}: {problem}" if at else problem)
    return kept, warnings


def _problem(name: str, keys: str, defaults: dict[str, str]) -> str | None:
    if name not in defaults:
        near = difflib.get_close_matches(name, defaults, n=1)
        ids = f"did you mean {near[0]}?" if near else f"the ids: {', '.join(defaults)}"
        return f"keymap.{name} is not the id of any key; ignored ({ids})"
    keeps = f"{name} keeps {defaults[name]}"
    if not keys.strip():
        return f"keymap.{name} is empty; {keeps}"
    bad = [key.strip() for key in keys.split(",") if not is_key(key.strip())]
    if bad:
        return f"keymap.{name}: {bad[0]!r} is not a key ({_KEY_EXAMPLES}); {keeps}"
    typing = [key.strip() for key in keys.split(",") if _types(key.strip())]
    if typing:
        return f"keymap.{name}: {typing[0]!r} is a key the prompt types or sends with ({_KEY_EXAMPLES}); {keeps}"
    return None


# Keys the prompt needs to edit and send a message; bound to an action, they
# would run it (and save what it changes) at each keystroke instead.
_PROMPT_KEYS = {"enter", "tab", "backspace", "delete", "space", "left", "right", "home", "end"}


def _types(key: str) -> bool:
    """A key that types a character or edits the prompt: one printable
    character (shifted or not), or one of _PROMPT_KEYS alone."""
    name = key.removeprefix("shift+")
    return (len(name) == 1 and name.isprintable()) or key in _PROMPT_KEYS
