"""What is not the user's own claim never becomes a standing fact and never replaces one (issues 38 and 39):
a quotation, a request or instruction, a translation, a hypothetical, a doubt, a question.

The hostile sentences here are the issue's trial and more of their kinds; the claim model (``core.claims``) was
fitted on other sentences (``lab/data/claims_train.json``), never on these.
"""

from __future__ import annotations

import pytest

from localpager.core.claims import (QUOTE, ClaimModel, asks_own, default_model, features, is_request, mask_quotes,
                                    states_fact)
from localpager.core import facts as facts_module
from localpager.core.facts import extract, facts_of
from localpager.core.records import Turn
from localpager.core.syntax import introduces_speech, relays_listener, relays_other
from localpager.retrieval.gate import message_features

TRUE_ALLERGY = "I'm badly allergic to sesame and carry an EpiPen everywhere."

HOSTILE = [
    "Translate to French: 'Actually I am no longer allergic to sesame.'",
    'My friend said: "Actually I\'m no longer allergic to sesame."',
    "Imagine I'm not allergic to sesame anymore.",
    "Pretend I'm no longer allergic to sesame and plan my dinner.",
    "If I were no longer allergic to sesame, what could I eat",
    "I'm not sure whether I'm still allergic to sesame.",
    "Translate into Spanish: I am no longer allergic to sesame.",
    "Write a story where I'm not allergic to sesame anymore.",
    "Help me write a note saying I'm no longer allergic to sesame.",
    "Summarize this: actually I am no longer allergic to sesame.",
    "Am I still allergic to sesame",
    "She wrote \u201cI'm not allergic to sesame anymore\u201d on the form by mistake.",
    "Suppose I'm not allergic to sesame anymore.",
    # a label before the colon hides the frame from a reading of the whole
    "Update: imagine I'm not allergic to sesame anymore.",
    "Correction: pretend I'm no longer allergic to sesame.",
    "Actually, translate this: I am no longer allergic to sesame.",
]


def user(text: str, index: int = 0) -> Turn:
    return Turn(role="user", text=text, index=index)


@pytest.mark.parametrize("sentence", HOSTILE)
def test_a_sentence_that_claims_nothing_becomes_no_fact(sentence):
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("sentence", HOSTILE)
def test_a_sentence_that_claims_nothing_replaces_no_fact(sentence):
    facts = facts_of([user(TRUE_ALLERGY, 0), user(sentence, 1)])
    (allergy,) = [f for f in facts if "sesame" in f.text.lower()]
    assert allergy.turn == 0 and allergy.current


def test_the_same_words_said_as_a_claim_do_replace_it():
    """The control: the correction itself, said by the user, is a fact and replaces the older one."""
    facts = facts_of([user(TRUE_ALLERGY, 0), user("Actually I am no longer allergic to sesame.", 1)])
    assert [f.turn for f in facts if f.current and "sesame" in f.text.lower()] == [1]


TRUE_CODE = "The door code is 4471."
# a value supposed of a thing, not of the speaker: the claim model had learned "imagine" only before "I" and "my"
SUPPOSED = [
    "Imagine the door code is 9083.",
    "Suppose the door code were 2210 from now on.",
    "Let's pretend the code is 5150.",
    "Picture the door code being 3308.",
    "Hypothetically, my budget is $2,000.",  # not asserted: a hypothetical without "imagine" or "suppose"
]


@pytest.mark.parametrize("sentence", SUPPOSED)
def test_a_value_supposed_of_a_thing_becomes_no_fact_and_replaces_none(sentence):
    assert extract(user(sentence)) == []
    facts = facts_of([user(TRUE_CODE, 0), user(sentence, 1)])
    assert [f.turn for f in facts if f.current] == [0]


@pytest.mark.parametrize("said", ["The wifi password is greenfrog9.", "Wifi password: greenfrog9.",
                                  "The garage PIN is plum42."])
def test_a_code_that_is_a_word_ending_in_digits_is_a_fact(said):
    # "greenfrog9" was no number to the lexicon: the sentence stated no fact, and no password could be recalled
    (fact,) = extract(user(said))
    assert fact.text == said


# Reported speech has no quotation marks to mask, and the verb that reports it may be any: the parse tells it
RELAYED = [
    "My friend said she's no longer allergic to sesame.",
    "Tom reckons I'm not allergic to sesame anymore.",
    "My brother swears I grew out of the sesame allergy, but I doubt it.",
    "You said I'm not allergic to sesame anymore.",  # the assistant's words, relayed: no evidence either
    "The waiter insisted the sauce has no sesame in it.",
]


@pytest.mark.parametrize("sentence", RELAYED)
def test_someone_elses_claim_relayed_replaces_no_fact(sentence):
    assert relays_other(sentence)
    facts = facts_of([user(TRUE_ALLERGY, 0), user(sentence, 1)])
    (allergy,) = [f for f in facts if f.turn == 0]
    assert allergy.current


@pytest.mark.parametrize("sentence", [
    "It turns out I'm no longer allergic to sesame.",  # a dummy "it": the speaker's own claim
    "I think I'm no longer allergic to sesame, the tests were clear.",
    "My new accountant is Ravi Shah; the old one retired.",  # the clause before "retired" is no one's saying
    "The problem is that I can't eat gluten.",  # "be" reports nothing
    "Apparently I'm allergic to penicillin, according to my GP.",
    "My wife and I decided the budget is $400.",  # the speaker is one of the subjects
])
def test_the_speakers_own_claim_relays_no_one(sentence):
    assert not relays_other(sentence)


# What the assistant said, passed back by the user: no evidence of a fact about them (issue 38, item 5)
ASSISTANT_RELAYED = [
    "You said my husband's name is Ethan.",
    "Earlier you told me I'm allergic to peanuts.",
    "You mentioned my door code is 4471.",
    "You reckon my flight is at 6am.",
]


@pytest.mark.parametrize("sentence", ASSISTANT_RELAYED)
def test_what_the_assistant_said_passed_back_is_no_fact(sentence, monkeypatch):
    assert relays_listener(sentence)
    assert extract(user(sentence)) == []
    monkeypatch.setattr(facts_module, "relays_listener", lambda s: False)
    facts_module._extract.cache_clear()
    try:
        assert extract(user(sentence))  # a fact by every other reading: the test could fail
    finally:
        facts_module._extract.cache_clear()


@pytest.mark.parametrize("sentence", ["As you said, my blood type is O negative.",  # the speaker's own claim
                                      "I told you my husband is Ethan.",
                                      "Tom reckons I'm not allergic to sesame anymore."])  # relayed, not the assistant's
def test_a_claim_of_the_speakers_own_or_a_third_persons_relays_no_listener(sentence):
    assert not relays_listener(sentence)


def test_a_correction_the_user_tells_after_a_relayed_one_still_replaces():
    facts = facts_of([user("My accountant is Nadia Perez.", 0), user("Tom says Nadia is great with receipts.", 1),
                      user("Small change: my new accountant is Ravi Shah; the old one retired.", 2)])
    assert [f.turn for f in facts if f.current and "accountant" in f.text] == [2]


def test_an_assistant_turn_is_never_evidence_of_a_fact():
    assert extract(Turn(role="assistant", text="Your husband's name is Ethan, and you are allergic to sesame.",
                        index=0)) == []


@pytest.mark.parametrize("text, masked", [
    ("He said \"I'm moving to Cork\" yesterday.", f"He said {QUOTE} yesterday."),
    ("Translate: 'I live in Lyon.'", f"Translate: {QUOTE}"),
    ("Our puppy is called \"Noodle\".", "Our puppy is called \"Noodle\"."),  # a quoted name stays
    ("My favourite book is 'The Name of the Wind'.", "My favourite book is 'The Name of the Wind'."),  # a title
    ("I'm sure it's James' car, I'm not kidding.", "I'm sure it's James' car, I'm not kidding."),  # apostrophes
    ('My neighbour wrote: "the vet is 555-0133"', f"My neighbour wrote: {QUOTE}"),  # after a colon: said, whatever
    ('Her note: \u201cthe dog walker comes on Mondays\u201d', f"Her note: {QUOTE}"),
])
def test_quoted_utterances_are_masked_and_names_kept(text, masked):
    assert mask_quotes(text) == masked


@pytest.mark.parametrize("sentence", ['My neighbour wrote: "the vet is 555-0133"',
                                      'Her voicemail said: "call the garage on 555-0178 tomorrow"'])
def test_a_quotation_after_a_colon_is_no_fact_whatever_its_words(sentence):
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("sentence", ["My mum wants me to translate this: 'I have a cat named Felix.'",
                                      'My brother keeps saying "I am moving to Spain".',
                                      "My friend wrote: I have two dogs and a cat.",
                                      "Here is the text my teacher gave me: My name is Tom and I live in Paris.",
                                      "My daughter asked me to proofread this: our cat is called Felix."])
def test_a_sentence_that_only_frames_words_said_or_written_is_no_fact(sentence):
    """Found by a new user's check: the frame of a translation request became a family fact, which then answered
    "What's my sister's name?"; words handed over after a colon have their writer's "I", as inside quotes."""
    assert extract(user(sentence)) == []
    facts = facts_of([user("My sister is called Mira.", 0), user(sentence, 1)])
    assert [f.text for f in facts if f.current] == ["My sister is called Mira."]


@pytest.mark.parametrize("sentence", ["Quick update: I moved to Lyon last week.",
                                      "Just so you know: I'm allergic to peanuts.",
                                      "My allergist confirmed it last spring: no strawberries for me, ever.",
                                      "Ever since the kids left home: we keep the spare room for guests.",
                                      "I've got news: we're moving to Lyon."])
def test_a_colon_after_the_speakers_own_frame_still_states_its_fact(sentence):
    assert extract(user(sentence)) != []


@pytest.mark.parametrize("head, hands_over", [
    ("My friend wrote", True), ("For the record, my wife says", True), ("My boss sent me this", True),
    ("Here is the text my teacher gave me", True), ("My mum wants me to translate this", True),
    ("Quick update", False), ("Just so you know", False), ("I've got news", False), ("You told me", False),
    ("My allergist confirmed it last spring", False), ("Since my partner retired", False),
    ("When my husband retired", False), ("The thing is", False),
])
def test_a_head_hands_over_to_someone_elses_words_by_its_parse(head, hands_over):
    assert introduces_speech(head) is hands_over


@pytest.mark.parametrize("sentence", ["The piano tuner, Olek Nowak, is on 555-0188.",
                                      "From April the allotment fees go to Sunita Rao, sunita.rao@example.org."])
def test_a_contact_the_user_gives_is_a_fact_without_a_first_person(sentence):
    assert states_fact(sentence)  # the fact model says it stays true; a first person was all it lacked
    (fact,) = extract(user(sentence))
    assert fact.text == sentence


@pytest.mark.parametrize("sentence", ["Can you ring 555-0147 and ask if they're open?",
                                      "Imagine my number were 555-0101.",
                                      "Is 555-0123 the dentist's number?"])
def test_a_contact_in_a_question_request_or_hypothetical_is_no_fact(sentence):
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("sentence", ["Translate to French: my number is 555-0100.",
                                      "Rewrite politely: my landlord is Ravi Mensah, 555-0906.",
                                      "Summarise for my boss: I'm off every Friday from now on."])
def test_what_follows_a_label_asking_for_work_is_no_fact_and_replaces_none(sentence):
    assert extract(user(sentence)) == []
    facts = facts_of([user("My number is 555-0199.", 0), user(sentence, 1)])
    assert [f.text for f in facts if f.current] == ["My number is 555-0199."]


@pytest.mark.parametrize("sentence", ["Let me see a recipe for my vegan sister.",
                                      "Let me know if you need anything else."])
def test_a_request_let_acts_on_is_no_fact(sentence):
    # "me" is the subject of "see" by the parse, in the object case: before, the clause read as a statement of its
    # own under "let", so the request was no request and the claim model took it for a fact
    assert extract(user(sentence)) == []
    assert extract(user("Let me tell you, my favourite colour is teal.")) != []  # the statement under it counts


@pytest.mark.parametrize("sentence", ["Worth knowing before any recipe ideas: I keep kosher.",
                                      "Note for the translation work later: I live in Ghent."])
def test_a_note_s_label_that_only_mentions_work_still_states_its_fact(sentence):
    (fact,) = extract(user(sentence))
    assert fact.text == sentence


def test_a_quoted_name_still_states_its_fact():
    (fact,) = extract(user('Our puppy is called "Noodle", and he is the sweetest thing.'))
    assert "Noodle" in fact.text


def test_the_shipped_model_is_fitted_and_its_threshold_holds_real_claims():
    model = default_model()
    assert len(model.weights) > 1000 and 0 < model.threshold <= 0.5
    for claim in ("I live in Utrecht.", "My blood type is O negative.", "I work at Halcyon Bank.",
                  "Note that I'm vegetarian.", "Remember that our flat is on the fifth floor, no lift."):
        assert model.is_claim(claim), claim


def test_features_fold_digits_and_mark_the_frame():
    found = features("Paraphrase: I live at 42 Elm Road")
    assert {"s:paraphrase", "s2:paraphrase_:", "w:C", "b:C_at", "f2:C_:"} <= found
    assert not {"w:live", "w:42", "w:elm"} & found  # what a sentence is about weighs nothing: its frame does


def test_a_model_without_weights_decides_by_its_bias():
    assert ClaimModel({}, bias=2.0).is_claim("anything") and not ClaimModel({}, bias=-2.0).is_claim("anything")


# -- facts the cues have no words for (the fact model) ----------------------------------------------------------
@pytest.mark.parametrize("sentence", ["My blood type is O negative.", "Our boiler is serviced every October."])
def test_a_claim_that_stays_true_is_a_fact_whatever_it_is_about(sentence):
    (fact,) = extract(user(sentence))
    assert fact.kind == "stated" and fact.text == sentence


@pytest.mark.parametrize("sentence", ["I repaired the garden fence yesterday.", "I'm making risotto tonight.",
                                      "The weather is lovely today."])
def test_an_event_or_a_passing_state_is_no_fact(sentence):
    assert extract(user(sentence)) == []


def test_a_greeting_before_a_fact_does_not_hide_it():
    allergy, tea = extract(user("Hi, I'm allergic to shellfish and I only drink mint tea."))  # two things, two facts
    assert "shellfish" in allergy.text and not allergy.text.startswith("Hi") and tea.text == "I only drink mint tea."
    assert extract(user("Hi, how are you?")) == [] and extract(user("Thanks, that helps.")) == []


def test_a_newer_statement_of_the_same_thing_replaces_a_stated_fact():
    facts = facts_of([user("Our boiler is serviced every October.", 0), user("Our boiler is serviced every March now.", 1)])
    assert [(f.turn, f.current) for f in facts] == [(0, False), (1, True)]


@pytest.mark.parametrize("line", ["Family is everything in the end.", "Hard work always pays off.",
                                  "Agreed, Priya.", "Stay positive and take care of yourself."])
def test_a_transcript_saying_that_names_nothing_is_no_fact(line):
    assert extract(Turn("user", line, 0, speaker="Marcus")) == []


def test_a_transcript_fact_of_the_speaker_s_world_needs_no_first_person_when_it_names_something():
    (fact,) = extract(Turn("user", "The van's MOT is due on 14 June.", 0, speaker="Marcus"))
    assert "14 June" in fact.text


def test_the_name_a_transcript_line_addresses_is_left_out_of_its_fact():
    (fact,) = extract(Turn("user", "Yeah, Priya, pottery is my favourite way to unwind.", 0, speaker="Marcus"))
    assert fact.text == "Pottery is my favourite way to unwind."
    (fact,) = extract(Turn("user", "I've run the bakery on Mill Lane for ten years now, Priya.", 1, speaker="Marcus"))
    assert "Priya" not in fact.text and "Mill Lane" in fact.text


def test_a_chat_user_s_stated_fact_is_about_them():
    """Text an app puts in a user turn ("Turn 2 is about topic0.") says nothing about the user."""
    assert extract(user("The report template is stored on the shared drive.")) == []


@pytest.mark.parametrize("message", [
    "Put together a meal plan for my coming week that suits me.",
    "Plan my weekend around the farmers market.",
    "Recommend a podcast about history.",
    "Tell me my rent ceiling.",
])
def test_a_request_in_words_the_task_lexicon_lacks_is_read_as_one(message):
    assert not message_features(message).task  # no word the lexicon lists
    assert is_request(message)


@pytest.mark.parametrize("message", [
    "I keep a strict vegetarian diet.", "My new door code is 7730.", "Took the dog to the park at dawn.",
    "What should I cook tonight?", "Remind me of my locker.",
])
def test_a_statement_or_a_question_is_no_request(message):
    assert not is_request(message)


# Requests with the user's own details in them, in verbs the claim model reads as claims (it took each for one on
# main: the cues found a schedule, a diet, a family member, a plan in them). Written for these tests.
REQUESTS = [
    "Schedule my piano lesson for Tuesdays at 5pm.",
    "Put my dentist appointment on Thursday at 3pm into a reminder.",
    "Make a shopping list for my vegan dinner party on Saturday.",
    "Change the greeting to mention my wife Ana.",
    "Count how many days until my wedding on 12 October.",
    "Check whether my train at 7:40 is still on time.",
]


@pytest.mark.parametrize("sentence", REQUESTS)
def test_a_request_read_from_its_parse_is_no_fact(sentence):
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("sentence", [
    "Don't forget I'm in Singapore, eight hours ahead of you.",  # a request that wraps a statement of its own
    "Save this instead of the old one: plumber Ingrid Mensah, 555-0177.",  # what follows the colon is told
    "I keep my piano lesson on Tuesdays at 5pm.",  # the control: the same details, told
    "Never put me on a middle seat.",  # a request that says it stands is a standing rule
    "From now on, answer me in French.",
])
def test_a_statement_a_request_wraps_is_still_a_fact(sentence):
    assert extract(user(sentence)) != []


def test_a_request_the_parse_reads_is_a_task_though_the_claim_model_reads_a_claim():
    message = "Compare the two phone contracts on price."
    assert default_model().is_claim(message) and is_request(message)


@pytest.mark.parametrize("message, asks", [
    ("Tell me the airline I boycott.", True),  # a request for something of the speaker's own
    ("Give me the code for my bike lock.", True),
    ("What is my blood type?", True),
    ("Tell me something.", False),  # it names nothing of theirs
    ("Suggest a gift for my mum.", False),  # a request for work
    ("I keep a strict vegetarian diet.", False),
])
def test_a_request_for_the_speakers_own_thing_asks_as_a_question_does(message, asks):
    assert asks_own(message) == asks


def test_the_written_training_statements_are_labelled_and_share_no_sentence_with_a_check_set():
    """``statements_train.json`` (the fact model's written training statements) holds facts and non-facts of a
    chat's user, and none of its messages is in a set the models are checked on: a shared one would count as
    found on data never seen."""
    import json
    from importlib import resources

    data_dir = resources.files("localpager.lab").joinpath("data")

    def load(name: str) -> dict:
        return json.loads(data_dir.joinpath(f"{name}.json").read_text(encoding="utf-8"))

    chat = load("statements_train")["chat"]
    assert all(set(item) == {"text", "fact"} and isinstance(item["fact"], bool) for item in chat)
    facts = sum(item["fact"] for item in chat)
    assert facts >= 50 and len(chat) - facts >= 40
    checked = {item["text"] for name in ("statements_heldout", "statements_plain_check")
               for part in ("chat", "transcript") for item in load(name).get(part, [])}
    check = load("claims_check")
    checked |= set(check["claims"]) | set(check["not_claims"])
    assert not {item["text"] for item in chat} & checked
