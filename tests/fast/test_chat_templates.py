"""Strict chat templates: many GGUF models' own templates refuse what a memory's prompt holds (Mistral's and
Llama 2's demand that user and assistant alternate, Gemma's refuses a system message), and a remembered statement
followed by a question is two user messages in a row. ``backends.template`` shapes the messages as the template
takes them. The templates here are written after the published ones' rules, with stand-in tokenizers; the real
model with a strict template is tests/model/test_strict_template.py."""

from __future__ import annotations

import pytest

from localpager.backends.base import BackendError, Message
from localpager.backends.template import CHATML, ChatTemplate

ALTERNATE = ("{% for message in messages %}{% if message['role'] != 'system' and (message['role'] == 'user') != "
             "(loop.index0 % 2 == (1 if messages[0]['role'] == 'system' else 0)) %}"
             "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
             "{% endif %}{{ '<' + message['role'] + '>' + message['content'] + '</>' }}{% endfor %}")
NO_SYSTEM = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}" + (
    ALTERNATE.replace("1 if messages[0]['role'] == 'system' else 0", "0"))
REFUSES_ALL = "{{ raise_exception('This template renders nothing') }}"


def template(text: str) -> ChatTemplate:
    chars = lambda s: [ord(c) for c in s]  # noqa: E731
    return ChatTemplate(text, chars, chars, [])


PROMPT = [Message("system", "Facts: I live in Porto."), Message("user", "Remember: my dog is Rex."),
          Message("user", "What is my dog called?")]


def test_a_template_that_takes_the_messages_gets_them_as_they_are():
    text = template(CHATML).render_text(PROMPT)[1]
    assert text.count("<|im_start|>user") == 2 and "<|im_start|>system\nFacts: I live in Porto." in text


def test_two_user_messages_in_a_row_are_joined_for_a_template_that_demands_alternation():
    strict = template(ALTERNATE)
    text = strict.render_text(PROMPT)[1]
    assert text == ("<system>Facts: I live in Porto.</><user>Remember: my dog is Rex.\n\nWhat is my dog called?</>")
    # the shape it took is kept: the next prompt, one exchange longer, begins with the same text (llama.cpp's cache)
    longer = strict.render_text(PROMPT + [Message("assistant", "Rex."), Message("user", "Thanks!")])[1]
    assert longer.startswith(text) and strict._level == 1


def test_a_template_without_a_system_role_gets_its_words_in_the_first_user_message():
    text = template(NO_SYSTEM).render_text(PROMPT)[1]
    assert text == "<user>Facts: I live in Porto.\n\nRemember: my dog is Rex.\n\nWhat is my dog called?</>"
    reply_first = [Message("system", "S"), Message("assistant", "Hello!"), Message("user", "Hi")]
    assert template(NO_SYSTEM).render_text(reply_first)[1] == "<user>S</><assistant>Hello!</><user>Hi</>"


def test_user_text_stays_plain_text_in_a_joined_message():
    """Joined contents are still the users' words: a control token typed by the user is not one."""
    special = lambda s: [-1] if s == "</>" else [ord(c) for c in s]  # noqa: E731
    strict = ChatTemplate(ALTERNATE, special, lambda s: [ord(c) for c in s], [])
    tokens = strict.render([Message("user", "a</>"), Message("user", "b")])
    assert tokens.count(-1) == 1 and tokens[-1] == -1  # the template's own closing mark only


def test_a_template_that_refuses_every_shape_is_one_error_in_its_own_words():
    with pytest.raises(BackendError, match="refused the messages: This template renders nothing"):
        template(REFUSES_ALL).render(PROMPT)
