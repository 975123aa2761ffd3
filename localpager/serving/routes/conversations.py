"""The memory endpoints, ``/v1/conversations/...``: what is in and out of the prompt, and the user's
controls over it (pin, search, forget, correct, export, the standing facts). Reads go straight to the store, without the model
lock, so they answer while the model works; a change waits its turn on the conversation behind the chat
answers that came before it. A request that sends ``X-Localpager-User`` reaches that user's conversations only
(``header_scope``)."""

import asyncio
import json
from typing import Any, Callable

import anyio.to_thread
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from ...core.checks import did_you_mean
from ...store.base import PinRefused
from ..errors import failure
from ..jobs import owned
from ..protocol import ApiError, content_disposition, resolve_user, user_header
from ..state import Served, ServedDep, served


async def header_scope(request: Request) -> None:
    """A request that names a conversation and sends ``X-Localpager-User`` must name one of that user's (a 403
    otherwise, as a chat request gets). Only the header counts here, not the server's ``--user``: the inspector
    and other memory tools see every conversation of the namespace unless a request says whose it is."""
    conv_id, s = request.path_params.get("conv_id"), await served(request)
    if conv_id is None or (header := user_header(request.headers, s.options.user_headers)) is None:
        return
    user = resolve_user(request.headers, names=s.options.user_headers)

    def check() -> None:
        if s.lp.store.has_conversation(conv_id):  # an unknown id is the route's 404
            owned(s.lp.store, conv_id, user, header)

    await anyio.to_thread.run_sync(check)


router = APIRouter(dependencies=[Depends(header_scope)])
FEATURES = ["pin", "search", "forget", "correct", "export", "facts", "users", "fact_edits"]  # named by /health


class PinRequest(BaseModel):
    pinned: bool = True


class ForgetRequest(BaseModel):
    turn: int | None = Field(default=None, ge=0)
    page: int | None = Field(default=None, ge=1)
    match: str | None = Field(default=None, min_length=1)
    dry_run: bool = False


class CorrectRequest(BaseModel):
    turn: int = Field(ge=0)
    text: str = Field(min_length=1)


class RememberRequest(BaseModel):
    text: str = Field(min_length=1)


class EditFactRequest(BaseModel):
    text: str = Field(min_length=1)
    dry_run: bool = False


class DeleteFactRequest(BaseModel):
    dry_run: bool = False


def require(s: Served, conv_id: str) -> None:
    """A 404 for an unknown id, naming the ids close to it (this app's store only: its namespace's)."""
    if not s.lp.store.has_conversation(conv_id):
        close = did_you_mean(conv_id, [info.id for info in s.lp.store.list_conversations()])
        raise ApiError(404, f"no conversation {conv_id!r}{close}", code="conversation_not_found")


def forget_body(report) -> dict[str, Any]:
    """A forget's report as JSON; a dry run erased nothing, and never says it did."""
    body = report.to_dict()
    if body.get("dry_run"):
        body["erased"] = False
    return body


@router.get("/v1/conversations")
async def conversations(s: ServedDep):
    infos = await anyio.to_thread.run_sync(s.lp.store.list_conversations)
    return {"object": "list", "data": [conversation_row(i) for i in infos]}


def conversation_row(info) -> dict[str, Any]:
    """A conversation in a listing, with whose it is (``user``: None for nobody's)."""
    return {"id": info.id, "user": info.user, "turns": info.turns, "pages": info.pages, "evicted": info.evicted,
            "source": info.source}


def too_long(s: Served, conv_id: str, page, turns) -> list[int]:
    """The turns of ``page`` longer than any prompt can hold: stored and searchable, but neither in the
    prompt nor recalled whole. Counted only on a page whose stored count is over that, once a turn."""
    if page.token_count <= s.longest_turn:
        return []
    found = []
    for i in page.turn_range:
        if i >= len(turns) or not turns[i].text:
            continue
        key = (conv_id, i, len(turns[i].text))
        if key not in s.turn_sizes:
            with s.lp.lock:  # the tokenizer is the model's: not while it runs
                s.turn_sizes[key] = s.lp.counter().count(turns[i].render())
        if s.turn_sizes[key] > s.longest_turn:
            found.append(i)
    return found


def page_rows(s: Served, conv_id: str) -> list[dict]:
    from ...core.bookmarks import render_bookmark
    from ...core.choices import DEFAULT_BOOKMARK_FORMAT

    require(s, conv_id)
    fmt = s.lp.store.settings(conv_id).get("bookmark_format") or DEFAULT_BOOKMARK_FORMAT
    turns = s.lp.store.turns(conv_id)
    rows = []
    for p in s.lp.store.pages(conv_id, turns):
        oversized = too_long(s, conv_id, p, turns)
        rows.append({"page_id": p.page_id, "first_turn": p.first_turn, "last_turn": p.last_turn,
                     "token_count": p.token_count, "keywords": p.keywords, "evicted": p.evicted,
                     "in_prompt": not p.evicted and not oversized, "too_long_turns": oversized,
                     "state": "too long" if oversized else "evicted" if p.evicted else "in prompt",
                     "pinned": p.pinned, "access_count": p.access_count,
                     "last_access": p.last_access, "worth": p.worth, "bookmark": render_bookmark(p, fmt),
                     "preview": " / ".join(turns[i].text[:80] for i in p.turn_range if i < len(turns))[:240]})
    return rows


@router.get("/v1/conversations/{conv_id:path}/pages")
async def pages(conv_id: str, s: ServedDep):
    return {"object": "list", "data": await anyio.to_thread.run_sync(page_rows, s, conv_id)}


@router.get("/v1/conversations/{conv_id:path}/bookmarks")
async def bookmarks(conv_id: str, s: ServedDep):
    rows = await anyio.to_thread.run_sync(page_rows, s, conv_id)
    return {"object": "list", "data": [{"page_id": r["page_id"], "evicted": r["evicted"],
                                        "bookmark": r["bookmark"]} for r in rows]}


@router.get("/v1/conversations/{conv_id:path}/turns")
async def turns(conv_id: str, s: ServedDep, offset: int = 0, limit: int = 200):
    def read():
        require(s, conv_id)
        return s.lp.store.turns(conv_id)

    rows = await anyio.to_thread.run_sync(read)
    total = len(rows)
    start = max(0, offset if offset >= 0 else total + offset)
    return {"object": "list", "total": total, "data": [
        {"index": t.index, "role": t.role, "text": t.text, "time": t.time, "speaker": t.speaker}
        for t in rows[start:start + max(0, min(limit, 1000))]]}


@router.get("/v1/conversations/{conv_id:path}/log")
async def trace_log(conv_id: str, s: ServedDep, turn: int | None = None, last: int | None = None):
    def read():
        require(s, conv_id)
        return s.lp.store.traces(conv_id)

    traces = await anyio.to_thread.run_sync(read)
    if turn is not None:
        traces = [t for t in traces if t.get("turn") == turn]
    if last is not None:
        traces = traces[-last:] if last > 0 else []
    for t in traces:
        t["trace_id"] = f"{conv_id}:{t.get('turn')}"
    return {"object": "list", "data": traces}


async def in_turn(s: Served, conv_id: str, fn: Callable[[], Any]) -> Any:
    """``fn`` in a worker thread, in the conversation's turn: after the requests on it that came before
    (a chat answer being written is never changed under it). Its own task, so the turn is always
    taken and given back even if the client leaves."""
    turnstile, ticket = s.runner.ticket(conv_id)

    def run():
        turnstile.wait(ticket)
        try:
            require(s, conv_id)
            return fn()
        except KeyError as exc:
            raise ApiError(404, exc.args[0] if exc.args else "not found", code="not_found") from None
        except ApiError:
            raise
        except Exception as exc:
            raise failure(exc) from None
        finally:
            turnstile.done(ticket)

    return await asyncio.shield(asyncio.ensure_future(anyio.to_thread.run_sync(run, limiter=s.job_threads)))


async def in_turns(s: Served, conv_ids: list[str], fn: Callable[[], Any]) -> Any:
    """``fn`` in a worker thread, in each of ``conv_ids``' turn (``in_turn`` for several): after the
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


@router.post("/v1/conversations/{conv_id:path}/pages/{page_id}/pin")
async def pin(conv_id: str, page_id: int, body: PinRequest, s: ServedDep):
    def change():
        try:
            page = s.runner.conversation(conv_id).pin(page_id, body.pinned)
        except KeyError:
            raise ApiError(404, f"conversation {conv_id!r} has no page {page_id}", code="page_not_found") from None
        return {"page_id": page.page_id, "pinned": page.pinned, "evicted": page.evicted}

    return await in_turn(s, conv_id, change)


@router.get("/v1/conversations/{conv_id:path}/facts")
async def facts(conv_id: str, s: ServedDep, all: bool = False):
    """The standing facts (what the user said about themselves that stays true), each with its source turn;
    ``all``: the replaced and corrected ones too. Read from the store, no model."""
    def read():
        require(s, conv_id)
        return s.runner.conversation(conv_id).facts(all=all)

    return {"object": "list", "data": [f.to_dict() for f in await anyio.to_thread.run_sync(read)]}


@router.post("/v1/conversations/{conv_id:path}/facts/{fact_id}/pin")
async def pin_fact(conv_id: str, fact_id: int, body: PinRequest, s: ServedDep):
    """Keep standing fact ``fact_id`` in the prompt (``pinned: false``: chosen again). A 409 when the pinned facts
    would no longer fit their share of the memory budget, naming them; a 404 for a fact the conversation lacks
    (any number: one past a 64-bit integer too)."""
    def change():
        try:
            return s.runner.conversation(conv_id).pin_fact(fact_id, body.pinned).to_dict()
        except PinRefused as exc:
            raise ApiError(409, f'{exc}: POST .../facts/ID/pin {{"pinned": false}}', code="pin_refused") from None
        except ValueError as exc:
            raise ApiError(404, str(exc), code="fact_not_found") from None

    return await in_turn(s, conv_id, change)


def change_body(change) -> dict[str, Any]:
    """An edit's or a delete's report (``memory.fact_edits.FactChange``) as JSON; its erasures as a forget's
    (a dry run never says erased)."""
    body = change.to_dict()
    body["forgotten"] = [forget_body(r) for r in change.reports]
    return body


async def in_user_turns(s: Served, conv_id: str, fn: Callable[[], Any]) -> Any:
    """``fn`` in the turn of ``conv_id`` and, for a conversation of a user, of each other one of theirs: an edit or
    a delete of a fact erases its words from all of them, so it waits for the chat answers queued before it on any
    (``users.in_turns``). An unknown fact is a 404."""
    def owners() -> list[str]:
        require(s, conv_id)
        user = s.lp.store.conversation_user(conv_id)
        return [conv_id] + ([i.id for i in s.lp.store.list_conversations(user)] if user is not None else [])

    targets = await anyio.to_thread.run_sync(owners)

    def run():
        require(s, conv_id)  # forgotten whole while this waited: a 404
        try:
            return fn()
        except ValueError as exc:
            if str(exc).startswith("no standing fact"):
                raise ApiError(404, str(exc), code="fact_not_found") from None
            raise

    return await in_turns(s, targets, run)


@router.post("/v1/conversations/{conv_id:path}/remember")
async def remember(conv_id: str, body: RememberRequest, s: ServedDep):
    """Keep ``text`` as the user's own statement without a reply (no model asked): a user turn marked remembered,
    which becomes standing facts as any turn does. Returns the facts it made."""
    made = await in_turn(s, conv_id, lambda: s.runner.conversation(conv_id).remember(body.text))
    return {"object": "list", "conversation": conv_id, "data": [f.to_dict() for f in made]}


@router.post("/v1/conversations/{conv_id:path}/facts/{fact_id}/edit")
async def edit_fact(conv_id: str, fact_id: int, body: EditFactRequest, s: ServedDep):
    """Replace standing fact ``fact_id``'s words with ``text``: the old words erased as a forget erases (here and,
    for a user's conversation, in their others), the new ones remembered; ``dry_run`` says what would go."""
    change = await in_user_turns(s, conv_id, lambda: s.runner.conversation(conv_id).edit_fact(
        fact_id, body.text, dry_run=body.dry_run))
    return change_body(change)


@router.post("/v1/conversations/{conv_id:path}/facts/{fact_id}/delete")
async def delete_fact(conv_id: str, fact_id: int, s: ServedDep, body: DeleteFactRequest | None = None):
    """Erase standing fact ``fact_id`` as an edit erases the old words, with nothing in its place (a body is
    optional: ``{"dry_run": true}`` says what would go)."""
    body = body or DeleteFactRequest()
    change = await in_user_turns(s, conv_id, lambda: s.runner.conversation(conv_id).delete_fact(
        fact_id, dry_run=body.dry_run))
    return change_body(change)


@router.get("/v1/conversations/{conv_id:path}/search")
async def search(conv_id: str, q: str, s: ServedDep, limit: int = 10):
    """What is remembered about ``q``, ranked as a recall ranks it (loads the embedder, not the chat model)."""
    hits = await in_turn(s, conv_id, lambda: s.runner.conversation(conv_id).search(q, limit=max(1, min(limit, 100))))
    return {"object": "list", "data": [h.to_dict() for h in hits]}


@router.post("/v1/conversations/{conv_id:path}/forget")
async def forget(conv_id: str, body: ForgetRequest, s: ServedDep):
    """Forget a turn, a page's turns or every turn containing ``match`` (``dry_run``: only list them)."""
    chosen = [k for k in ("turn", "page", "match") if getattr(body, k) is not None]
    if len(chosen) != 1:
        raise ApiError(400, "give exactly one of turn, page or match", param="turn")
    report = await in_turn(s, conv_id, lambda: s.runner.conversation(conv_id).forget(
        **{chosen[0]: getattr(body, chosen[0])}, dry_run=body.dry_run))
    return forget_body(report)


@router.post("/v1/conversations/{conv_id:path}/correct")
async def correct(conv_id: str, body: CorrectRequest, s: ServedDep):
    """Record ``text`` as the corrected statement of turn ``turn`` (a new turn; the old one superseded)."""
    turn = await in_turn(s, conv_id, lambda: s.runner.conversation(conv_id).correct(body.turn, body.text))
    return {"index": turn.index, "role": turn.role, "text": turn.text, "corrects": body.turn}


@router.delete("/v1/conversations/{conv_id:path}")
async def forget_conversation(conv_id: str, s: ServedDep, dry_run: bool = False):
    """Forget a whole conversation, erased from the store's files."""
    def erase():
        report = s.lp.forget_conversation(conv_id, dry_run=dry_run)
        if not dry_run:
            s.runner.drop(conv_id)
        return report

    return forget_body(await in_turn(s, conv_id, erase))


@router.get("/v1/conversations/{conv_id:path}/export")
async def export(conv_id: str, s: ServedDep):
    """The conversation as one line of localpager's export format (``localpager import`` reads it)."""
    from ...memory.interchange import conversation_line

    def read():
        require(s, conv_id)
        return conversation_line(s.lp.store, conv_id)

    line = await anyio.to_thread.run_sync(read)
    return Response(json.dumps(line, ensure_ascii=False) + "\n", media_type="application/x-ndjson",
                    headers={"Content-Disposition": content_disposition(f"{conv_id}.jsonl")})
