"""A GGUF whose chat template is strict (no system role, user and assistant strictly alternating, as Gemma's and
Mistral's are) answers through localpager: the real SmolLM2 file with such a template named by --chat-template
stands in for one. Before, its prompt (a system message; a remembered statement, then a question: two user
messages in a row) was refused by the template and the chat failed."""

from __future__ import annotations

import pytest
from helpers import Recording

from localpager.memory.api import LocalPager

pytestmark = [pytest.mark.model, pytest.mark.embedder]

STRICT = (
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def test_a_strict_template_gets_one_user_message_holding_the_system_words_the_statement_and_the_question(tmp_path):
    from localpager.backends.llama import LlamaCppBackend
    from localpager.core.modelpaths import chat_model_path

    path = tmp_path / "strict.jinja"
    path.write_text(STRICT)
    backend = Recording(LlamaCppBackend(chat_model_path(), n_ctx=1024, n_threads=1, chat_template=str(path)))
    lp = LocalPager(tmp_path / "s.db", backend=backend)
    chat = lp.conversation("c", create=True)
    chat.remember("My goldfish is called Bubbles.")
    result = chat.ask("Suggest a fun weekend activity.")
    assert result.trace.decision == "answer" and result.answer.strip()
    prompt = backend.inner.detokenize(backend.prompts[-1])  # the control tokens read as nothing
    # one user message: the system words, the remembered statement and the question, then the reply's turn
    assert prompt.startswith("user\n") and prompt.endswith("Suggest a fun weekend activity.\nassistant\n")
    assert prompt.count("\nuser\n") == 0 and prompt.index("Bubbles") < prompt.index("Suggest a fun")
    lp.close()
