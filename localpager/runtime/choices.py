"""The runtime's choices: recall modes, answer layouts, triggers, and what the trace says started a recall.

Standard library only (see ``core.choices``): the CLI offers these without loading the runtime.
"""

from __future__ import annotations

from enum import StrEnum


class RecallMode(StrEnum):
    """Who decides whether an answer recalls (``RecallSettings.mode``, ``--recall``)."""

    AUTO = "auto"  # the model decides, under a grammar, after the trigger had its say
    ALWAYS = "always"  # the model must name pages (when any page is evicted)
    NEVER = "never"  # no recall, no bookmarks in the prompt
    # Internal, never offered: the selector's trigger alone decides and the model is not asked (the lab's
    # baselines and oracle runs; a served model whose output cannot be constrained).
    SELECTOR = "selector"


OFFERED_RECALL_MODES = (RecallMode.AUTO, RecallMode.ALWAYS, RecallMode.NEVER)


class Layout(StrEnum):
    """How a recall is answered (``runtime.prompts``)."""

    FOCUSED = "focused"  # a prompt of its own: a system line, the recalled turns, the question
    FOCUSED_RECENT = "focused+recent"  # the same after the chat's last exchange
    NOTES_SYSTEM = "notes-system"  # the recalled turns as notes in the system message
    INLINE = "inline"  # the chat's whole prompt, the recalled turns after the question (the layout before 0.2)


DEFAULT_LAYOUT = Layout.FOCUSED


class Trigger(StrEnum):
    """When a message pages in although the model did not ask (``RerankSettings.trigger``, ``--trigger``)."""

    GATE = "gate"  # the recall gate says it asks about something said before (``retrieval.gate``)
    QUESTION = "question"  # any message with a question's form while pages are evicted (the rule before the gate)
    OFF = "off"  # only when the model asks


DEFAULT_TRIGGER = Trigger.GATE


class Fired(StrEnum):
    """What started a recall, as a trace says it (``Trace.trigger``): the trigger that fired, in the words of
    its setting, or the model."""

    NONE = "none"  # no recall was started
    GATE = Trigger.GATE.value
    QUESTION = Trigger.QUESTION.value
    MODEL = "model"  # the model asked (recall mode auto)
    FORCED = "forced"  # the model had to name pages (recall mode always)
    SELECTOR = "selector"  # a selector with a rule of its own, not a Trigger (the lab's baselines and oracle)
    PERSONAL = "personal"  # about the user's own life, or what a transcript's person told, no standing fact answered
