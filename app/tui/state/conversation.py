"""The chat's conversation: the one owner of its messages (in the session,
for the prompt), its record in the history database and the stats of each
reply. The app asks it to change; the widgets only render what it holds.

Every write goes to the history on a thread of its own (`Writer`), in
order, so the chat never waits on the disk. A history that another process
holds locked is tried again until it frees, with one warning; a
conversation deleted while it is open (F3, or another process) goes on as
a new one; any other failure costs that one message, with a warning, and
the next message is saved as usual. A turn that fails leaves no message
behind, and a message that never got its reply (the process was killed
mid-reply) is shown but left out of the prompt, so the user and the
assistant always alternate there.

It also keeps a local session's memory (drafters/memory.py) in step with
the history: filled from the stored replies when a pair loads, on a thread
of its own so the first reply never waits; told which conversation each
reply belongs to, and which conversation was deleted; emptied while the
chat's memory is off.

The files attached to each message (attach.Attachment: which file, as it
was read) are kept beside the messages, in memory only: F9 writes a reply
back to them alone. A conversation reopened from the history has none.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from specchat.history.database import Conversation as StoredConversation
from specchat.history.database import History, title_for
from specchat.history.database import Message as Stored
from specchat.message.attach import Attachment

if TYPE_CHECKING:
    from specchat.tui.state.models import Session


class Record:
    """One conversation as the history keeps it: its id once the writer has made its row."""

    def __init__(self, conv_id: int | None = None) -> None:
        self.id = conv_id


class Conversation:
    def __init__(self, history: History | None, warn: Callable[[str], None]) -> None:
        self.history = history
        self.warn = warn  # called from the writer's thread too: it must be thread-safe (App.notify is)
        self.writer = Writer(history, warn) if history is not None else None
        self.session: Session | None = None
        self.record = Record()  # the conversation on screen; a new one has no row until its first message
        self.records = [self.record]  # every conversation this chat wrote to (the memory knows them by these)
        self.turns: list[dict] = []  # stats of each reply, for the stats panel
        self.memory_on = True  # the chat's setting: draft from this user's earlier replies
        self.default_system: str | None = None  # a new conversation's system prompt (the settings')
        self.system: str | None = None  # this conversation's (/system), stored with it
        self.branch = ""  # "branch 2/3" where the conversation has branches (history/tree.py)
        self.files: list[list[Attachment]] = []  # the files of each message sent here, in order
        self.reopened = False  # opened from the history: files attached before are not known
        self._edited: list[Attachment] = []  # the files of a message taken back to be edited
        if history is not None:
            history.on_delete.append(self._forget)
            history.on_note.append(warn)  # the search index was rebuilt, or is off

    @property
    def id(self) -> int | None:
        """The history's id of the conversation on screen, once its row is written."""
        return self.record.id

    def close(self, wait: float = 3.0) -> int:
        """Finish the writes still queued, waiting at most `wait` seconds; how many are left unsaved."""
        return self.writer.close(wait) if self.writer is not None else 0

    # --- the session follows the conversation ----------------------------------------

    def attach(self, session: Session) -> None:
        """A newly loaded session (another pair) continues this conversation."""
        if self.session is not None:
            session.replace_messages(self.session.messages)
        self.session = session
        self._use_system(self.system)
        self.set_memory(self.memory_on)  # the chat's setting carries over to the new session

    @property
    def last_is_reply(self) -> bool:
        msgs = self.session.messages if self.session else []
        return bool(msgs) and msgs[-1]["role"] == "assistant"

    def last_user_text(self) -> str | None:
        return self.session.last_user_text() if self.session else None

    # --- changes ------------------------------------------------------------------------

    def user_sent(self, text: str, files: list[Attachment] | None = None) -> None:
        """The session adds the message itself when it replies; here it is
        saved, with the files attached to it (an edited message keeps those
        of its files whose text it still holds as it was attached)."""
        kept = [f for f in self._edited if f.block() in text]
        self.files.append(kept + list(files or []))
        self._edited = []
        self._save(Stored("user", text), title=text)
        self._own()

    def attached(self) -> list[Attachment]:
        """The files attached to this conversation's messages, most recent
        last; a file attached again counts as it was read the last time."""
        latest: dict[Path, Attachment] = {}
        for f in (f for files in self.files for f in files):
            latest.pop(f.path, None)
            latest[f.path] = f
        return list(latest.values())

    def rewritten(self, old: Attachment, new: Attachment) -> None:
        """A reply was written back to `old`: the file attached is now `new`."""
        self.files = [[new if f is old else f for f in files] for files in self.files]

    def turn_failed(self, sent: bool) -> None:
        """A turn ended in an error: a failed turn is not a turn, so the
        message that started it (`sent`: it was saved) leaves the history."""
        if sent and self.files:
            self.files.pop()
        if sent and self.writer is not None:
            self.writer.put(partial(_drop_failed, record=self.record))

    def replied(self, text: str, finish: str, stats: dict, spans: list[dict]) -> None:
        self._save(Stored("assistant", text, finish, stats, spans))
        self.turns.append(stats)

    def regenerating(self) -> None:
        """A regenerate begins: its reply joins the memory as this conversation's."""
        self._own()

    def drop_last_reply(self, had_reply: bool) -> None:
        """A regenerate's new reply is here (or there was no reply to keep):
        the last one leaves the history; the session dropped it itself."""
        if had_reply and self.turns:
            self.turns.pop()
        self._drop_last("assistant")
        self._own()

    def drop_last_exchange(self, had_reply: bool) -> None:
        """Before an edit: the last user message and its reply go."""
        if had_reply and self.turns:
            self.turns.pop()
        self._edited = self.files.pop() if self.files else []
        self._drop_last("user")

    def open(self, conv_id: int) -> StoredConversation:
        """Reopen a stored conversation; returns it for the widgets to render.
        A message that could not be read is shown marked, and left out of the prompt."""
        assert self.history is not None  # the chat offers stored conversations only while it has a history
        conv = self.history.load(conv_id)
        self._begin(Record(conv.id))
        self._use_system(conv.system if conv.system is not None else self.default_system)
        family = self.history.tree.family(conv.id)
        self.branch = f"branch {family.index(conv.id) + 1}/{len(family)}" if len(family) > 1 else ""
        readable = [m for m in conv.messages if not m.problem]
        self.files, self.reopened = [], True
        self.turns = [m.stats for m in readable if m.role == "assistant" and m.stats]
        if self.session is not None:
            self.session.replace_messages([{"role": m.role, "content": m.content} for m in readable])
        return conv

    def open_stored(self, conv_id: int) -> tuple[StoredConversation | None, str]:
        """`open`, or (None, why) where it cannot be: another process deleted
        it meanwhile, or the history cannot be read."""
        try:
            return self.open(conv_id), ""
        except KeyError:
            return None, "that conversation was deleted meanwhile: nothing to open"
        except sqlite3.Error as err:
            return None, f"cannot read the history ({err})"

    def new(self) -> None:
        self.branch = ""
        if self.session is not None:
            self.session.clear()
        self._use_system(self.default_system)
        self._begin(Record())
        self.turns = []
        self.files, self.reopened = [], False

    def set_system(self, text: str | None) -> None:
        """This conversation's system prompt from the next turn on (None: none), stored with it."""
        self._use_system(text)
        if self.writer is not None:
            record = self.record
            self.writer.put(lambda history: history.tree.set_system(record.id, text) if record.id is not None else None)

    def _use_system(self, text: str | None) -> None:
        """The conversation's system prompt is the session's: the next turns are built with it."""
        self.system = text
        if self.session is not None:
            self.session.system = text

    # --- branches ----------------------------------------------------------------------

    def stored_messages(self) -> list[Stored]:
        """The conversation's messages as the history holds them, once the
        writes queued before are done (none: nothing saved yet, or no history)."""
        if self.writer is None or not self.writer.flush(3.0) or self.record.id is None:
            return []
        assert self.history is not None  # a writer writes to a history
        return self.history.load(self.record.id).messages

    def fork(self, upto: int) -> int:
        """A branch holding this conversation's first `upto` messages; its id (history/tree.py)."""
        assert self.history is not None and self.record.id is not None  # stored_messages found it saved
        return self.history.tree.fork(self.record.id, upto)

    def family(self) -> list[int]:
        """This conversation and its branches, oldest first (none before it is saved)."""
        if self.history is None or self.record.id is None:
            return []
        return self.history.tree.family(self.record.id)

    def _begin(self, record: Record) -> None:
        self.record = record
        self.records.append(record)

    # --- the memory ----------------------------------------------------------------------

    def set_memory(self, on: bool) -> None:
        """Draft from this user's earlier replies, or not (off empties the memory)."""
        self.memory_on = on
        if self.session is not None:
            self.session.set_memory(on)
            self._fill_memory()

    def _fill_memory(self) -> None:
        session = self.session
        if session is None or session.memory is None or self.history is None or not self.memory_on:
            return  # a server keeps no memory
        ticket = session.memory.ticket()  # a conversation deleted from here on stays out
        try:
            replies = self.history.replies()
        except sqlite3.Error as err:
            self.warn(f"cannot read the history for the memory ({err})")
            return
        threading.Thread(target=session.remember, args=(replies, ticket), name="memory-fill", daemon=True).start()

    def _own(self) -> None:
        """The next reply joins the memory as this conversation's (its Record:
        a new conversation gets its id only once the writer has saved it)."""
        if self.session is not None:
            self.session.memory_owner = self.record

    def _forget(self, conv_id: int) -> None:
        """A conversation was deleted (F3): out of the memory, and if it is
        the one on screen, the next message starts a new one."""
        memory = self.session.memory if self.session is not None else None
        ours = [r for r in self.records if r.id == conv_id]
        if memory is not None:
            memory.forget(conv_id)  # what the history fill put in
            for record in ours:
                memory.forget(record)
        if self.record in ours:
            self._begin(Record())

    # --- the history ---------------------------------------------------------------------

    def _save(self, msg: Stored, title: str = "") -> None:
        if self.writer is None:
            return
        record, pair, system = self.record, self.session.pair if self.session else "", self.system
        self.writer.put(lambda history: _append(history, record, msg, title_for(title or msg.content), pair, system))

    def _drop_last(self, role: str) -> None:
        if self.writer is None:
            return
        record = self.record
        self.writer.put(lambda history: history.drop_last(record.id, role) if record.id is not None else None)


def _drop_failed(history: History, record: Record) -> None:
    """Take back the message of a failed turn; a conversation it leaves empty goes too."""
    if record.id is not None:
        history.drop_last(record.id, "user")
        if history.delete_if_empty(record.id):
            record.id = None  # the next message makes the conversation's row again


def _append(history: History, record: Record, msg: Stored, title: str, pair: str, system: str | None) -> str | None:
    """Add one message to the record's conversation, making its row first
    (with its system prompt); a conversation deleted meanwhile goes on as a
    new one (and says so)."""
    if record.id is None:
        record.id = history.new_conversation(title, pair, system)
    try:
        history.add_message(record.id, msg)
    except sqlite3.IntegrityError:  # its row is gone: another process (or F3) deleted it
        record.id = history.new_conversation(title, pair, system)
        history.add_message(record.id, msg)
        return "this conversation was deleted meanwhile; it goes on as a new one in the history"
    return None


class Writer:
    """The chat's history writes, in order, on a thread of their own.

    A write that finds the file locked by another process is tried again,
    waiting longer each time (at most RETRY_MAX seconds), until it goes
    through: one warning when it first waits, one when it is saved. Any
    other failure costs that write alone, with one warning."""

    RETRY_MAX = 2.0

    def __init__(self, history: History, warn: Callable[[str], None]) -> None:
        self.history, self.warn = history, warn
        self.jobs: queue.Queue[Callable[[History], str | None] | None] = queue.Queue()
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._run, name="history-writer", daemon=True)
        self.thread.start()

    def put(self, job: Callable[[History], str | None]) -> None:
        """Queue one write (a function of the history; what it returns is said to the user)."""
        self.jobs.put(job)

    def flush(self, wait: float) -> bool:
        """Wait (at most `wait` seconds) until every queued write is done."""
        deadline = time.monotonic() + wait
        while self.jobs.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self.jobs.unfinished_tasks

    def close(self, wait: float) -> int:
        self.flush(wait)
        left = self.jobs.unfinished_tasks
        self.closing.set()  # a write still waiting on a lock gives up
        self.jobs.put(None)
        return left

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            try:
                self._do(job)
            finally:
                self.jobs.task_done()
        self.jobs.task_done()

    def _do(self, job: Callable[[History], str | None]) -> None:
        delay, waited = 0.05, False
        while True:
            try:
                note = job(self.history)
            except sqlite3.OperationalError as err:
                if not _busy(err) or self.closing.is_set():
                    self.warn(f"cannot save to the history ({err}); this message is not saved")
                    return
                if not waited:
                    self.warn(f"the history is locked by another program ({err}); saving as soon as it is free")
                    waited = True
                self.closing.wait(delay)
                delay = min(delay * 2, self.RETRY_MAX)
                continue
            except sqlite3.Error as err:
                self.warn(f"cannot save to the history ({err}); this message is not saved")
                return
            if waited:
                self.warn("the history is free again: saved")
            if note:
                self.warn(note)
            return


def _busy(err: sqlite3.OperationalError) -> bool:
    """Another connection holds the lock: worth waiting for (a full disk or a read-only file is not)."""
    text = str(err).lower()
    return "locked" in text or "busy" in text
