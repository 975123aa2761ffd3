"""What the MCP tools return. Each model is also its tool's output schema: the app's model reads its field
descriptions to know what a value means."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class RecalledTurnOut(BaseModel):
    page: int = Field(description="the page (a run of turns) the turn is on")
    turn: int = Field(description="the turn's number in the conversation, from 0")
    time: str | None = Field(description="when it was said (ISO 8601), if known")
    dates: list[str] = Field(description="what its relative dates mean ('yesterday' said on 8 May 2023: 7 May 2023)")
    speaker: str = Field(description="who said it: a name, or 'user' / 'assistant'")
    role: str = Field(description="'user' or 'assistant'")
    text: str
    score: float = Field(description="how well it matches the question (higher is better)")
    label: str = Field(description="'latest': the newest statement of something that changed; 'changed later' or "
                                   "'changed': a later turn corrected it; empty otherwise")
    injected: bool = Field(description="true for the turns localpager's own recall would show its model; false for "
                                       "the ranking's next best")
    conversation: str | None = Field(None, description="the conversation the turn is in, when another of the user's "
                                                       "than the one asked (it matched the question better)")


class RecalledFactOut(BaseModel):
    fact_id: int = Field(description="the standing fact's number (the `facts` resource lists them all)")
    turn: int = Field(description="the turn that stated it")
    text: str = Field(description="what the user said, in their words")
    probability: float = Field(description="how likely it bears on the question")
    conversation: str | None = Field(None, description="the conversation it was said in, when another of the user's")


class RecallOut(BaseModel):
    conversation: str
    question: str
    relevant: bool = Field(description="whether memory bears on the question: false when nothing about it is "
                                       "remembered")
    probability: float = Field(description="the recall gate's probability that the question is about something said "
                                           "before")
    facts: list[RecalledFactOut] = Field(description="standing facts about the user that bear on the question (an "
                                                     "allergy, a schedule, a preference), even when it does not ask "
                                                     "about the past")
    turns: list[RecalledTurnOut] = Field(description="remembered turns, best first")
    note: str


class SearchHitOut(BaseModel):
    turn: int
    page: int
    score: float
    text: str
    role: str
    speaker: str
    time: str | None
    evicted: bool = Field(description="the turn's page is out of localpager's own prompt (kept in the store)")
    label: str = Field(description="'changed': a later turn corrected it (see superseded_by)")
    superseded_by: int | None
    conversation: str | None = Field(None, description="the conversation the turn is in, in a search over all of "
                                                       "the user's conversations")


class SearchOut(BaseModel):
    conversation: str | None = Field(description="the conversation searched; null: all of the user's")
    query: str
    hits: list[SearchHitOut]


class BookmarkOut(BaseModel):
    page: int
    bookmark: str = Field(description="the page's bookmark: its number and keywords")
    first_turn: int
    last_turn: int
    evicted: bool
    pinned: bool


class BookmarksOut(BaseModel):
    conversation: str
    bookmarks: list[BookmarkOut]


class ConversationOut(BaseModel):
    id: str
    turns: int
    pages: int
    evicted: int = Field(description="pages out of localpager's own prompt (kept in the store)")


class ConversationsOut(BaseModel):
    conversations: list[ConversationOut]


class FactOut(BaseModel):
    fact_id: int = Field(description="the fact's number in its conversation (edit_fact and delete_fact take it)")
    conversation: str = Field(description="the conversation it was said in (edit_fact and delete_fact take it)")
    turn: int = Field(description="the turn that stated it")
    kind: str = Field(description="what sort of fact: 'avoid' (an allergy, a diet), 'family', 'stated' (kept as said), …")
    text: str = Field(description="what the user said, in their words")
    time: str | None = Field(None, description="when it was said (ISO 8601), if known")
    pinned: bool = Field(False, description="always in localpager's own prompt")


class FactsOut(BaseModel):
    conversation: str | None = Field(description="the conversation listed; null: all of the user's")
    facts: list[FactOut] = Field(description="what the user said about themselves that stays true, in the order "
                                             "it was said; a newer value replaces an older one")
    note: str


class RememberOut(BaseModel):
    conversation: str
    created: bool = Field(description="the conversation did not exist and was created")
    turn: int
    page: int
    role: str
    time: str | None
    facts: list[FactOut] = Field(default_factory=list, description=(
        "the standing facts it made (said as the user: at least one, the words as said when no known kind of fact "
        "is found in them)"))
    note: str


class ForgottenTurnOut(BaseModel):
    turn: int
    text: str = Field(description="the start of the turn")


class ForgetOut(BaseModel):
    conversation: str
    status: Literal["nothing", "preview", "confirm", "changed", "forgotten"] = Field(
        description="nothing: no turn matches; preview: a dry run; confirm: nothing erased yet, call again with "
                    "confirm set to the token; changed: what the arguments select changed since the token was "
                    "issued, nothing erased, a new token is given; forgotten: erased")
    turns: list[ForgottenTurnOut]
    pages: list[int]
    confirm_token: str | None = None
    expires_in_seconds: int | None = None
    erased: bool = Field(False, description="the text is gone from the store's files too")
    rewrite_pending: bool = Field(False, description="the files still hold it: another process is reading the store")
    message: str


class ErasedTurnOut(BaseModel):
    conversation: str
    turn: int
    text: str = Field(description="the start of the turn")


class FactChangeOut(BaseModel):
    conversation: str = Field(description="the conversation of the fact")
    status: Literal["preview", "confirm", "changed", "edited", "deleted"] = Field(
        description="preview: a dry run; confirm: nothing erased yet, call again with confirm set to the token; "
                    "changed: what the call would erase changed since the token was issued, nothing erased, a new "
                    "token is given; edited or deleted: done")
    fact: FactOut = Field(description="the fact as it was")
    text: str | None = Field(description="its new words (null: deleted)")
    facts: list[FactOut] = Field(description="the standing facts the new words made (once edited)")
    kept: list[FactOut] = Field(description="other facts of the same turn, stated again so that they stay")
    turns: list[ErasedTurnOut] = Field(description="the turns erased (or that would be): the one that stated the "
                                                   "fact and any that repeat its words, such as an answer quoting it")
    confirm_token: str | None = None
    expires_in_seconds: int | None = None
    erased: bool = Field(False, description="the old words are gone from the store's files too")
    rewrite_pending: bool = Field(False, description="the files still hold them: another process is reading the store")
    message: str


class CorrectOut(BaseModel):
    conversation: str
    corrected_turn: int
    new_turn: int = Field(description="the correction, appended as a new turn; recall shows it instead of the old one")
    page: int
    text: str

