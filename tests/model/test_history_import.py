"""Issue 41 with the real SmolLM2 GGUF and the real embedder: a ChatGPT export with facts planted across several
conversations of one person is imported as that user's; a new conversation of theirs answers a planted fact.
Checked on the answer or the fact it cites, never on one generated string."""

from __future__ import annotations

import json

import pytest
from helpers import Recording

from localpager.memory.api import LocalPager
from localpager.runtime.settings import RecallSettings

pytestmark = [pytest.mark.model, pytest.mark.embedder]

DAY = 86_400.0
PLANTED = [  # (the person's message, the assistant's reply), one conversation each, a day apart
    [("Any tips for keeping basil alive on a windowsill?", "Water it when the top of the soil is dry."),
     ("I'm seriously allergic to sesame, even a trace sets me off.", "Noted, I will keep that in mind.")],
    [("My sister Amara lives in Porto and I visit her every spring.", "Porto in spring sounds lovely."),
     ("Pancakes or waffles for a lazy Sunday?", "Pancakes: no special iron needed.")],
    [("What is a good stretch after running?", "Try a standing quad stretch."),
     ("My car is a red Skoda Octavia from 2016.", "A dependable car.")],
]


def export(path):
    conversations = []
    for n, messages in enumerate(PLANTED):
        start = 1_709_467_200.0 + n * DAY
        mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
        parent = "root"
        for i, (role, text) in enumerate(m for pair in messages for m in zip(("user", "assistant"), pair)):
            node = f"c{n}-{i}"
            mapping[node] = {"id": node, "parent": parent, "children": [],
                             "message": {"id": node, "author": {"role": role}, "create_time": start + 60 * i,
                                         "content": {"content_type": "text", "parts": [text]}, "metadata": {},
                                         "recipient": "all"}}
            mapping[parent]["children"].append(node)
            parent = node
        conversations.append({"title": f"Chat {n}", "create_time": start, "mapping": mapping, "current_node": parent,
                              "conversation_id": f"planted-{n}", "id": f"planted-{n}"})
    path.write_text(json.dumps(conversations))
    return path


@pytest.fixture
def lp(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), recall=RecallSettings(max_answer_tokens=24))
    report = lp.ingest(export(tmp_path / "conversations.json"), user="alice")
    assert report.conversations == 3 and report.turns == 12
    yield lp
    lp.close()


def test_a_new_chat_of_the_user_answers_a_fact_from_the_imported_history(lp):
    chat = lp.conversation("new-chat", create=True, user="alice")
    t = chat.ask("I'm packing snacks for a long flight. Anything I should stay away from?").trace
    cited = [lp.store.turns(c.conversation)[c.turn].text for c in t.citations]
    assert "sesame" in t.answer.lower() or any("sesame" in text.lower() for text in cited)
    assert any(c.conversation == "chatgpt-planted-0" for c in t.citations)
