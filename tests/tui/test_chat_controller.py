"""The chat's rules as plain Python (tui/state/controller.py): which drafter and
k the next round runs with, what waits while a reply or a schema binding
is under way, Esc and the edit of the last message, what a pair switch
carries over, and the status bar's figures. No Textual app runs here; the
Pilot tests keep what a person sees."""

from __future__ import annotations

import pytest

from specchat.decoding.schema import GrammarSpec
from specchat.drafters import NAMES
from specchat.errors import SpecchatError
from specchat.session.chat import ChatSession
from specchat.session.options import DecodeOptions
from specchat.tui.state.controller import ChatController, Notice
from specchat.tui.state.conversation import Conversation
from tests.support.tui import long_model, noisy_draft


def session(drafter: str = "auto", k: int | None = None, draft=noisy_draft) -> ChatSession:
    return ChatSession(
        long_model(),
        draft,
        DecodeOptions(drafter=drafter, k=k, max_tokens=8),
        pair="fake-pair",
    )  # fmt: skip


def controller(drafter: str = "auto", k: int | None = None, draft=noisy_draft) -> ChatController:
    chat = ChatController(Conversation(None, warn=print), drafter, k)
    chat.attach(session(drafter, chat.k_to_open(), draft))
    return chat


def test_each_drafter_runs_at_its_own_k_until_one_is_chosen():
    chat = controller("draft")
    assert chat.session.k == 4
    assert chat.cycle_drafter() == Notice("drafter: hybrid; the draft model loads on its first use")
    assert (chat.drafter, chat.session.k) == ("hybrid", 4)
    chat.cycle_drafter()
    assert (chat.drafter, chat.session.k) == ("grammar", 16)
    assert chat.change_k(-1) is None and chat.k_for == {"grammar": 15}  # picked for grammar alone
    for _ in range(5):
        chat.cycle_drafter()
    assert (chat.drafter, chat.session.k) == ("draft", 4)  # draft keeps its own
    assert chat.status("").k == 4 and chat.status("").drafter == "draft"
    chat.cycle_drafter()
    chat.cycle_drafter()
    assert (chat.drafter, chat.session.k) == ("grammar", 15)  # and grammar the one picked for it


def test_a_k_given_for_every_drafter_holds_until_one_is_picked_for_a_drafter():
    chat = controller("draft", k=9)  # --k 9, or k = 9 in settings.toml
    assert chat.session.k == 9
    chat.change_k(+1)
    chat.cycle_drafter()
    assert (chat.drafter, chat.session.k) == ("hybrid", 9)
    chat.cycle_drafter()
    chat.cycle_drafter()  # hybrid -> grammar -> memory
    for _ in range(4):  # memory -> auto -> off -> ngram -> draft
        chat.cycle_drafter()
    assert (chat.drafter, chat.session.k) == ("draft", 10)


def test_a_pair_opens_at_the_chosen_k_or_the_drafters_own():
    chat = ChatController(Conversation(None, warn=print), "draft", None)
    assert chat.k_to_open() is None and session("draft", chat.k_to_open()).k == 4  # the session knows its own
    chat = ChatController(Conversation(None, warn=print), "ngram", None)
    assert chat.k_to_open() is None and session("ngram", chat.k_to_open()).k == 16
    chat = ChatController(Conversation(None, warn=print), "ngram", 7)
    assert chat.k_to_open() == 7
    chat.attach(session("ngram", 9))
    assert chat.k_to_open() == 9  # a switch keeps the k the chat runs at


def test_the_cycle_skips_what_the_pair_cannot_run_and_says_what_a_switch_means():
    chat = controller("off", draft=None)
    seen = []
    for _ in range(len(NAMES) - 3):
        chat.cycle_drafter()
        seen.append(chat.drafter)
    assert seen == [n for n in NAMES if n not in ("off", "draft", "mtp", "hybrid")] + ["off"]  # no draft, no MTP head
    chat = controller("hybrid")
    chat.generating = True
    while chat.drafter != "grammar":
        notice = chat.cycle_drafter()
    assert notice == Notice(
        "drafter: grammar (from the next round); it drafts only while replies are constrained "
        "(F8 or /schema FILE): plain steps until then"
    )


def test_a_draft_model_not_loaded_yet_is_said_to_load_on_first_use():
    from tests.support.fake_model import FakeModel

    loaded = []

    def load():
        loaded.append(1)
        return FakeModel()

    chat = controller("ngram", draft=load)
    assert chat.cycle_drafter() == Notice("drafter: draft; the draft model loads on its first use")
    assert not loaded


def test_while_a_reply_or_a_binding_runs_other_work_waits():
    chat = controller()
    assert chat.busy() is None
    cancel = chat.begin_turn()
    assert chat.busy() == Notice("still generating: Esc stops it", "warning")
    assert not chat.can_regenerate() and chat.start_editing() is None
    assert chat.cancel() == "stopping" and cancel.is_set()
    chat.end_turn()
    chat.binding_started("person.json")
    assert chat.busy() == Notice("still binding person.json: a moment", "warning")
    chat.binding_ended()
    assert chat.busy() is None


def test_a_branch_asks_again_for_one_reply_whether_it_ends_or_fails():
    chat = controller()
    chat.ask_again({"tok_s": 20.0})
    chat.begin_turn()
    assert chat.branched_from == {"tok_s": 20.0}  # the reply under way compares with it
    chat.end_turn()  # ended, or failed: the next reply is no branch's
    assert chat.branched_from is None


def test_escape_leaves_an_edit_and_an_edit_resends_in_place():
    chat = controller()
    assert chat.start_editing() is None and not chat.editing  # nothing sent yet
    chat.session.reply("first")
    assert chat.start_editing() == "first" and chat.editing
    assert chat.cancel() == "unediting" and not chat.editing
    assert chat.cancel() is None
    chat.start_editing()
    assert chat.send_kind() == "edit" and chat.send_kind() == "reply"


def test_memory_on_and_off():
    chat = controller()
    assert chat.toggle_memory() == Notice("memory off: emptied for this chat")
    assert chat.toggle_memory() == Notice("memory on: drafting from your earlier replies")


class Holder:
    """Just what carry_constraint reads of a session: its constraint, and
    whether it can take another (a pair whose vocabulary cannot)."""

    def __init__(self, spec: GrammarSpec | None = None, refuse: str = "") -> None:
        self.constraint_spec, self.refuse = spec, refuse

    def set_constraint(self, spec: GrammarSpec | None) -> None:
        if self.refuse:
            raise SpecchatError(self.refuse)
        self.constraint_spec = spec


def test_a_pair_switch_carries_the_schema_or_says_why_not():
    spec = GrammarSpec('root ::= "yes" | "no"', "yes-no.gbnf")
    new = Holder()
    assert ChatController.carry_constraint(Holder(spec), new) == "" and new.constraint_spec is spec
    assert ChatController.carry_constraint(Holder(spec), Holder(refuse="no token spells 'yes'")) == (
        "no token spells 'yes'")  # fmt: skip
    assert ChatController.carry_constraint(None, Holder(refuse="never asked")) == ""
    chat = controller()
    old, replacement = chat.session, session()
    assert chat.attach(replacement) is old and chat.session is replacement


@pytest.mark.parametrize("generating", [False, True])
def test_the_status_shows_the_session_and_the_live_figures(generating):
    chat = controller("ngram", 6)
    if generating:
        chat.begin_turn()
        chat.live_tok_s, chat.auto_choice = 12.5, "ngram k=6"
    s = chat.status("a note")
    assert (s.pair, s.drafter, s.k, s.note) == ("fake-pair", "ngram", 6, "a note")
    assert (s.live_tok_s, s.choice) == ((12.5, "ngram k=6") if generating else (None, ""))
    assert ChatController(Conversation(None, warn=print), "auto").status("loading…").note == "loading…"


def test_a_switch_mid_reply_says_the_draft_model_is_loading_until_it_has():
    from specchat.tui.state.controller import DRAFT_LOADING

    chat = controller("ngram")
    chat.begin_turn()
    chat.cycle_drafter()  # ngram -> draft, mid-reply, the draft model not loaded yet
    assert chat.drafter == "draft" and chat.status("").note == DRAFT_LOADING
    chat.session.drafters.draft_model().model  # the engine's next round loads it
    assert chat.status(DRAFT_LOADING).note == "" and not chat.draft_loading
    chat.end_turn()
    idle = controller("ngram")
    idle.cycle_drafter()  # between replies nothing waits: the notice says it loads on first use
    assert not idle.draft_loading and idle.status("").note == ""
