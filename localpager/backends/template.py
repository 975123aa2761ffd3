"""The model's own chat template, rendered so that user text can never become control tokens.

Both backends render here: the in-process llama.cpp one, and the HTTP one, which also needs the text
the tokens stand for (servers that take a text prompt get exactly that text).
"""

from __future__ import annotations

import uuid
from typing import Callable, Sequence

from .base import BackendError, Message

Tokenize = Callable[[str], Sequence[int]]

# For a GGUF file without a template of its own, when asked for (``--chat-template chatml``).
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CHAT_TEMPLATE_ENV = "LOCALPAGER_CHAT_TEMPLATE"  # a user's choice: the default of --chat-template and of the library
NAMED_TEMPLATES = {"chatml": CHATML}


def chosen_template(own: str | None, model: str, choice: str | None = None) -> str:
    """The chat template to render with: ``choice`` (the ``--chat-template`` option, ``ModelOptions.chat_template``;
    default ``$LOCALPAGER_CHAT_TEMPLATE``) when given, a name of ``NAMED_TEMPLATES`` or a Jinja file; else the
    model's ``own``. A model without one is refused in one line: it is most likely a base model, which answers a
    chat with garbage (gemma-3-270m's base GGUF answered ``<|im_end|>`` to a ChatML prompt); ``--chat-template``
    says otherwise."""
    import os

    choice = (choice or os.environ.get(CHAT_TEMPLATE_ENV) or "").strip() or None
    if choice is None:
        if own:
            return own
        raise BackendError(f"{model} has no chat template: it looks like a base model, not a chat (instruct) model, "
                           "and would answer with garbage; use a chat model, or give a template with --chat-template "
                           f"chatml (or a Jinja file; env {CHAT_TEMPLATE_ENV})")
    if choice.lower() in NAMED_TEMPLATES:
        return NAMED_TEMPLATES[choice.lower()]
    try:
        with open(choice, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise BackendError(f"--chat-template {choice}: not one of {', '.join(NAMED_TEMPLATES)} and not a readable "
                           f"Jinja file ({why})") from None


class ChatTemplate:
    """Renders messages with the model's Jinja chat template, but tokenizes their contents as plain text,
    so that a user typing ``<|im_end|>`` gets those characters, not a control token.

    The template is rendered with a unique marker in place of each message's content; the text between
    markers is template (tokenized with ``special``: control tokens on), the contents are user data
    (``plain``: control tokens off). Both tokenizers are called often with the same strings: pass cached
    ones."""

    def __init__(self, template: str, special: Tokenize, plain: Tokenize, bos: Sequence[int]):
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):  # what chat templates call on messages they cannot render
            raise BackendError(f"the model's chat template refused the messages: {message}")

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        self._template = env.from_string(template)
        self._special, self._plain, self._bos = special, plain, list(bos)
        self._level = 0  # the first of ``SHAPES`` the template took

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        return self.render_text(messages, add_generation_prompt)[0]

    def render_text(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> tuple[list[int], str]:
        """The prompt's tokens and the text they stand for. A strict template (Mistral's and Llama 2's demand
        that user and assistant alternate; Gemma's refuses a system message) gets the messages as it takes them
        (``alternating``): the first shape it renders is kept for the next prompts, so their prefix stays the
        same (llama.cpp's cache)."""
        level = self._level
        while True:
            try:
                done = self._render(SHAPES[level](messages), add_generation_prompt)
            except BackendError:
                if level + 1 == len(SHAPES):
                    raise  # the template refuses even that: its own words say why
                level += 1
                continue
            self._level = level
            return done

    def _render(self, messages: Sequence[Message], add_generation_prompt: bool) -> tuple[list[int], str]:
        markers = [f"\x00{uuid.uuid4().hex}\x00" for _ in messages]
        rest = self._template.render(
            messages=[{"role": m.role, "content": mark} for m, mark in zip(messages, markers)],
            add_generation_prompt=add_generation_prompt, bos_token="", eos_token="",
        )
        tokens, text = list(self._bos), ""
        for message, mark in zip(messages, markers):
            head, sep, rest = rest.partition(mark)
            if not sep:
                raise BackendError("the model's chat template dropped a message; use a chat model")
            tokens += self._special(head) if head else ()
            tokens += self._plain(message.content) if message.content else ()
            text += head + message.content
        tokens += self._special(rest) if rest else ()
        return tokens, text + rest


def joined(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with each run of one role's messages joined into one, a blank line between: two user turns in a
    row (a remembered statement and the next question, an imported chat whose reply failed) alternate then."""
    out: list[Message] = []
    for message in messages:
        if out and out[-1].role == message.role:
            out[-1] = Message(message.role, f"{out[-1].content}\n\n{message.content}")
        else:
            out.append(message)
    return out


def alternating(messages: Sequence[Message]) -> list[Message]:
    """``joined``, with the system message's words opening the first user message (a template without a system
    role), and a user message of them alone when a reply would come first."""
    out = joined(messages)
    if out and out[0].role == "system":
        system = out.pop(0).content
        if out and out[0].role == "user":
            out[0] = Message("user", f"{system}\n\n{out[0].content}")
        else:
            out.insert(0, Message("user", system))
    return out


# How messages are shaped for the template, tried in order until it renders them: as they are, then ``joined``,
# then ``alternating``.
SHAPES: tuple[Callable[[Sequence[Message]], Sequence[Message]], ...] = (lambda messages: messages, joined,
                                                                      alternating)
