"""What the app's model reads about localpager's tools: the server's instructions, each tool's description and
its annotations. Written for a model deciding when to call a tool, so they live apart from the code that runs
the calls."""

from __future__ import annotations

from mcp_types import ToolAnnotations

INSTRUCTIONS = (
    "localpager keeps the user's long conversations on this machine and remembers what was said long ago. "
    "Before answering a question that may depend on something the user said earlier (their allergies, plans, "
    "people, numbers, dates, preferences), call recall with the question and answer from the turns it returns; "
    "if none of them says it, say you do not know. Call remember to keep something the user tells you, and facts "
    "to see what is kept about them (when they ask what you remember about them). forget, edit_fact and "
    "delete_fact erase only after the user agrees: each first returns what it would erase and a confirmation "
    "token.")

DESCRIPTIONS = {
    "recall": (
        "Look up what the user said earlier in a long conversation that localpager remembers on this machine. "
        "Call it before answering anything that may depend on something said before: the user's allergies, "
        "medication, plans, appointments, people, numbers, addresses, preferences, or what changed. Pass the "
        "user's question as they asked it. Returns `relevant` (whether localpager's recall gate thinks memory "
        "matters for this question, with its probability), the standing facts about the user that bear on it (an "
        "allergy for a question about snacks, even one that does not ask about the past) and the remembered turns, "
        "best first: each with its page, turn number, time, the dates its relative expressions mean, speaker, text "
        "and score; a turn labelled 'latest' is the newest statement of something that changed, one labelled "
        "'changed later' was corrected. Answer from these; when `relevant` is false and the note says nothing is "
        "remembered, say you do not know."),
    "search": (
        "Search a remembered conversation for turns about some words, ranked as recall ranks them (by meaning "
        "and by word). Use it to find a turn to show, forget or correct; for answering a question, prefer "
        "recall. Returns turns with their number, page, time, speaker, text and score; a turn labelled 'changed' "
        "was corrected by the turn in superseded_by."),
    "bookmarks": (
        "List a remembered conversation's bookmarks: one per page (a run of about twenty turns), each with its "
        "page number and keywords, e.g. [p2:Omar Sato,EpiPen,allergic,everywhere]. A quick overview of what "
        "the conversation covered."),
    "conversations": (
        "List the conversations localpager remembers, with their number of turns and pages. Every other tool "
        "names one of them."),
    "remember": (
        "Add something to a conversation's memory: one message, as the user (role 'user', the default) or you "
        "(role 'assistant') said it. It is stored on this machine, paged and bookmarked like any turn, and recall "
        "and search find it from then on; the user's words are kept as a standing fact (facts lists it, and it is "
        "returned). Creates the conversation if it does not exist. Use it for facts the user wants kept "
        "(\"remember that I'm allergic to sesame\")."),
    "forget": (
        "Erase turns from a conversation's memory, for good: every turn containing `match`, one `turn`, or "
        "every turn of a `page` (give exactly one). Erasing needs two calls: the first returns the turns it "
        "would erase and a confirmation token and erases nothing; show them to the user, and only if the user "
        "agrees call forget again with the same arguments and `confirm` set to that token (single-use, valid "
        "for five minutes). `dry_run` only lists what would go. Only when the user asks to forget something."),
    "facts": (
        "List what the user told you about themselves that stays true (allergies, diet, people, home, work, "
        "schedules, preferences): localpager's standing facts, in the order they were said, a newer value replacing "
        "an older one. Call it when the user asks what you remember about them, or before changing one. Each fact "
        "has its conversation and fact_id, which edit_fact and delete_fact take."),
    "edit_fact": (
        "Change the words of one standing fact about the user (`fact` = its fact_id, in `conversation`, both as "
        "facts lists them), when the user says it is wrong or has changed and wants it replaced. The old words are "
        "erased for good, as forget erases: the turn that said them and any turn repeating them (an answer that "
        "quoted it); the turn's other facts are kept. Needs two calls: the first returns what it would erase and a "
        "confirmation token and changes nothing; show it to the user, and only if they agree call edit_fact again "
        "with the same arguments and `confirm` set to that token (single-use, valid for five minutes). To record a "
        "change while keeping the history, use correct instead."),
    "delete_fact": (
        "Erase one standing fact about the user for good (`fact` = its fact_id, in `conversation`, both as facts "
        "lists them), when the user asks you to forget it: the turn that said it and any turn repeating its words "
        "are erased, as forget erases; the turn's other facts are kept. Needs two calls: the first returns what it "
        "would erase and a confirmation token and erases nothing; show it to the user, and only if they agree call "
        "delete_fact again with the same arguments and `confirm` set to that token (single-use, valid for five "
        "minutes)."),
    "correct": (
        "Correct something remembered: `text` becomes the newest statement of what turn `turn` said (it is "
        "appended as a new turn by the same speaker, and the old turn is marked as changed). recall then shows "
        "the correction instead of the old statement. Nothing is erased: use forget to erase."),
}

ANNOTATIONS = {
    "recall": ToolAnnotations(title="Recall from memory", read_only_hint=True, open_world_hint=False),
    "search": ToolAnnotations(title="Search memory", read_only_hint=True, open_world_hint=False),
    "bookmarks": ToolAnnotations(title="Bookmarks of a conversation", read_only_hint=True, open_world_hint=False),
    "conversations": ToolAnnotations(title="Remembered conversations", read_only_hint=True, open_world_hint=False),
    "remember": ToolAnnotations(title="Remember", read_only_hint=False, destructive_hint=False,
                                idempotent_hint=False, open_world_hint=False),
    "forget": ToolAnnotations(title="Forget (erase)", read_only_hint=False, destructive_hint=True,
                              idempotent_hint=False, open_world_hint=False),
    "correct": ToolAnnotations(title="Correct a memory", read_only_hint=False, destructive_hint=False,
                               idempotent_hint=False, open_world_hint=False),
    "facts": ToolAnnotations(title="What is remembered about the user", read_only_hint=True, open_world_hint=False),
    "edit_fact": ToolAnnotations(title="Edit a fact (erases the old words)", read_only_hint=False,
                                 destructive_hint=True, idempotent_hint=False, open_world_hint=False),
    "delete_fact": ToolAnnotations(title="Delete a fact (erase)", read_only_hint=False, destructive_hint=True,
                                   idempotent_hint=False, open_world_hint=False),
}

NAMED_CONVERSATION = ("edit_fact", "delete_fact")  # their conversation is never left out: a fact's number is its own


def user_instructions(user: str, own: str | None) -> str:
    """What the server's instructions add for ``localpager mcp --user``: whose memory it is, and (``own``) the
    conversation a call naming none uses."""
    text = f" This server serves the memory of user {user!r}: their conversations only."
    if own is not None:
        text += (f" Leave out the conversation argument to use their own conversation, {own!r}: remember keeps what "
                 "they tell you there, and search without a conversation looks through all of theirs.")
    return text


def for_user(name: str, description: str, user: str, own: str) -> str:
    """A tool's description on a user's server (``--user`` without ``--conversation``): ``conversation`` is optional."""
    if name == "conversations":
        return (description.replace("the conversations localpager remembers",
                                    f"the conversations of user {user!r} that localpager remembers")
                + f" A tool given no conversation uses theirs, {own!r}.")
    if name in NAMED_CONVERSATION:
        return description + (f" This server serves user {user!r}: name the conversation the fact is in, as facts "
                              "lists it (any of theirs).")
    where = ("all of their conversations (each hit naming its conversation)" if name == "search"
             else "all of their conversations (each fact naming its conversation)" if name == "facts"
             else f"their own conversation, {own!r}")
    if name == "recall":
        where += (" (all of their facts; and another conversation of theirs whose turns match the question better, "
                  "each such turn naming its conversation)")
    return description + (f" This server serves user {user!r}: leave out `conversation` to use {where}; name one of "
                          "theirs to use that one.")
