"""The memory endpoints at a user's scope, ``/v1/users/{user}/...`` (issue 40): a person's memory across all of
their conversations (``memory.users.User``), in the request's namespace only: their conversations, their standing
facts (the newest value winning across conversations), a search over all of them, a forget that reaches every
one of theirs and no one else's, an export. Each fact, hit and report names its conversation."""

import json
from typing import Any, Callable

import anyio.to_thread
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from ...core.checks import did_you_mean
from ...memory.users import User
from ...store.base import check_user
from ..errors import failure
from ..jobs import owned
from ..protocol import ApiError, content_disposition, resolve_user, user_header
from ..state import Served, ServedDep, served
from .conversations import change_body, conversation_row, forget_body, in_turns, require


async def header_scope(request: Request) -> None:
    """A request that sends ``X-Localpager-User`` (or a header ``--user-header`` names) reaches that user's memory
    only: another user's endpoints are a 403, as another user's conversation is (``conversations.header_scope``).
    Without the header, any user's."""
    user, names = request.path_params.get("user"), (await served(request)).options.user_headers
    if user is None or (header := user_header(request.headers, names)) is None:
        return
    sent = resolve_user(request.headers, names=names)
    if sent != user:
        raise ApiError(403, f"these are user {user!r}'s memory endpoints, not user {sent!r}'s: a request may reach "
                            "the memory of the user it names only", type="permission_error",
                       code="memory_of_another_user", param=header)


router = APIRouter(dependencies=[Depends(header_scope)])


class UserForgetRequest(BaseModel):
    match: str | None = Field(default=None, min_length=1)
    conversation: str | None = Field(default=None, min_length=1)
    dry_run: bool = False


class UserRememberRequest(BaseModel):
    text: str = Field(min_length=1)
    conversation: str | None = Field(default=None, min_length=1)  # default: their memory conversation


class UserFactRequest(BaseModel):
    """A fact of theirs: its conversation (``conv_id`` in a listing) and its number there (``fact_id``)."""

    conversation: str = Field(min_length=1)
    fact_id: int
    text: str | None = Field(default=None, min_length=1)  # an edit's new words
    dry_run: bool = False


def user_of(s: Served, name: str) -> User:
    """``name``'s memory in this app's store (its namespace's): a 400 for a name the store would refuse, a 404
    naming the close ones for a user no conversation belongs to."""
    try:
        check_user(name)
    except ValueError as exc:
        raise ApiError(400, str(exc), code="invalid_user", param="user") from None
    if not s.lp.store.list_conversations(name):
        close = did_you_mean(name, s.lp.store.users())
        raise ApiError(404, f"no user {name!r}: no conversation belongs to them{close}", code="user_not_found")
    return s.lp.user(name)


async def read(s: Served, fn: Callable[[], Any]) -> Any:
    """``fn`` in a worker thread; a store's refusal as the server words errors (``failure``)."""
    def run():
        try:
            return fn()
        except ApiError:
            raise
        except Exception as exc:
            raise failure(exc) from None

    return await anyio.to_thread.run_sync(run)


@router.get("/v1/users")
async def users(s: ServedDep):
    """The users some conversation of this namespace belongs to, with how many conversations each has."""
    def listing():
        infos = s.lp.store.list_conversations()
        return [{"id": name, "conversations": sum(i.user == name for i in infos)} for name in s.lp.store.users()]

    return {"object": "list", "data": await read(s, listing)}


@router.get("/v1/users/{user:path}/conversations")
async def conversations(user: str, s: ServedDep):
    infos = await read(s, lambda: user_of(s, user).conversations())
    return {"object": "list", "data": [conversation_row(i) for i in infos]}


@router.get("/v1/users/{user:path}/facts")
async def facts(user: str, s: ServedDep, all: bool = False):
    """Their standing facts across their conversations, each naming its conversation (``all``: the replaced and
    corrected ones too)."""
    return {"object": "list", "data": [f.to_dict() for f in await read(s, lambda: user_of(s, user).facts(all=all))]}


@router.get("/v1/users/{user:path}/search")
async def search(user: str, q: str, s: ServedDep, limit: int = 10):
    """What their conversations remember about ``q``, best first, each hit naming its conversation (loads the
    embedder, not the chat model)."""
    if not q.strip():
        raise ApiError(400, "search needs some words", param="q")
    hits = await read(s, lambda: user_of(s, user).search(q, limit=max(1, min(limit, 100))))
    return {"object": "list", "data": [h.to_dict() for h in hits]}


@router.post("/v1/users/{user:path}/forget")
async def forget(user: str, body: UserForgetRequest, s: ServedDep):
    """Forget every turn containing ``match`` in each of their conversations, or one whole ``conversation`` of
    theirs (another's is a 403); ``dry_run`` only lists what would go."""
    if (body.match is None) == (body.conversation is None):
        raise ApiError(400, "give exactly one of match or conversation", param="match")
    def chosen() -> tuple[User, list[str]]:
        person = user_of(s, user)
        if body.conversation is None:
            return person, [i.id for i in person.conversations()]
        require(s, body.conversation)
        owned(s.lp.store, body.conversation, user, "conversation")
        return person, [body.conversation]

    person, targets = await read(s, chosen)

    def erase():
        report = person.forget(match=body.match, conversation=body.conversation, dry_run=body.dry_run)
        if body.conversation is not None and not body.dry_run:
            s.runner.drop(body.conversation)
        return report

    report = await in_turns(s, targets, erase)
    out = report.to_dict()
    out["conversations"] = [forget_body(r) for r in report.reports]  # a dry run never says erased
    return out


@router.post("/v1/users/{user:path}/remember")
async def remember(user: str, body: UserRememberRequest, s: ServedDep):
    """Keep ``text`` as their own statement without a reply, in ``conversation`` (one of theirs; another's is a
    403) or their memory conversation (``NAME-memory``, made theirs on first use, so a user with no conversation
    yet gets one). Returns the facts it made, each naming its conversation."""
    from ...memory.users import memory_conversation

    def target() -> str:
        try:
            check_user(user)
        except ValueError as exc:
            raise ApiError(400, str(exc), code="invalid_user", param="user") from None
        conv_id = body.conversation or memory_conversation(user)
        if body.conversation is not None:
            require(s, conv_id)
        if s.lp.store.has_conversation(conv_id):
            owned(s.lp.store, conv_id, user, "conversation")
        return conv_id

    conv_id = await read(s, target)
    made = await in_turns(s, [conv_id], lambda: s.lp.user(user, create=True).remember(body.text, body.conversation))
    return {"object": "list", "conversation": conv_id, "data": [f.to_dict() for f in made]}


async def change_fact(s: Served, user: str, body: UserFactRequest, edit: bool) -> dict:
    """An edit (``edit``) or a delete of their fact ``body.conversation``/``body.fact_id``, in the turn of each of
    their conversations (the words are erased from all of them); a fact of another user's conversation is a 403, an
    unknown one a 404."""
    if edit and body.text is None:
        raise ApiError(400, "an edit needs the fact's new words: text", param="text")
    if not edit and body.text is not None:
        raise ApiError(400, "a delete takes no text: to change a fact's words, POST .../facts/edit", param="text")

    def chosen() -> tuple[User, list[str]]:
        person = user_of(s, user)
        require(s, body.conversation)
        owned(s.lp.store, body.conversation, user, "conversation")
        return person, [i.id for i in person.conversations()]

    person, targets = await read(s, chosen)

    def change():
        fact = (body.conversation, body.fact_id)
        try:
            done = (person.edit_fact(fact, body.text, body.dry_run) if edit
                    else person.delete_fact(fact, body.dry_run))
        except ValueError as exc:
            if str(exc).startswith("no standing fact"):
                raise ApiError(404, str(exc), code="fact_not_found") from None
            raise
        return change_body(done)

    return await in_turns(s, targets, change)


@router.post("/v1/users/{user:path}/facts/edit")
async def edit_fact(user: str, body: UserFactRequest, s: ServedDep):
    """Replace a fact of theirs with ``text``: its old words erased from every one of their conversations (an
    answer there may have quoted it), the new ones remembered where it was; ``dry_run`` says what would go."""
    return await change_fact(s, user, body, edit=True)


@router.post("/v1/users/{user:path}/facts/delete")
async def delete_fact(user: str, body: UserFactRequest, s: ServedDep):
    """Erase a fact of theirs from every one of their conversations, with nothing in its place."""
    return await change_fact(s, user, body, edit=False)


@router.get("/v1/users/{user:path}/export")
async def export(user: str, s: ServedDep):
    """Their conversations in localpager's export format, one line each, each naming the user (``localpager
    import`` reads it)."""
    from ...memory.interchange import conversation_line

    def lines():
        return [conversation_line(s.lp.store, i.id) for i in user_of(s, user).conversations()]

    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in await read(s, lines))
    return Response(text, media_type="application/x-ndjson",
                    headers={"Content-Disposition": content_disposition(f"{user}.jsonl")})
