"""The memory endpoints at a user's scope, ``/v1/users/{user}/...`` (issue 40): a person's memory across all of
their conversations (``memory.users.User``), in the request's namespace only: their conversations, their standing
facts (the newest value winning across conversations), a search over all of them, a forget that reaches every
one of theirs and no one else's, an export. Each fact, hit and report names its conversation."""

import asyncio
import json
from typing import Any, Callable

import anyio.to_thread
from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import BaseModel, Field

from ...core.checks import did_you_mean
from ...memory.users import User
from ...store.base import check_user
from ..errors import failure
from ..jobs import owned
from ..protocol import ApiError, content_disposition
from ..state import Served, ServedDep
from .conversations import conversation_row, forget_body, require

router = APIRouter()


class UserForgetRequest(BaseModel):
    match: str | None = Field(default=None, min_length=1)
    conversation: str | None = Field(default=None, min_length=1)
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


async def in_turns(s: Served, conv_ids: list[str], fn: Callable[[], Any]) -> Any:
    """``fn`` in a worker thread, in each of ``conv_ids``' turn (``conversations.in_turn`` for several): after the
    requests on them that came before, so a chat answer queued before a forget is stored before it, not after.
    The tickets are all taken at once, on the event loop, so two such calls never wait for each other in a circle."""
    tickets = [s.runner.ticket(c) for c in sorted(set(conv_ids))]

    def run():
        try:
            for turnstile, ticket in tickets:
                turnstile.wait(ticket)
            return fn()
        except ApiError:
            raise
        except Exception as exc:
            raise failure(exc) from None
        finally:
            for turnstile, ticket in tickets:
                turnstile.done(ticket)

    return await asyncio.shield(asyncio.ensure_future(anyio.to_thread.run_sync(run, limiter=s.job_threads)))


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
        owned(s.lp.store, body.conversation, user)
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
