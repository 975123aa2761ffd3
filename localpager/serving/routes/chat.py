"""The OpenAI chat API: ``/v1/models`` and ``/v1/chat/completions``, answered whole or streamed as SSE.
A request becomes a ``jobs.Job``; the route only waits for it, so a client that leaves never stops the
model from storing its answer."""

import asyncio
import json
import time
import uuid
from typing import Any, Callable

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette.sse import EventSourceResponse

from ..errors import error_response, failure
from ..jobs import END, Job, Reply, memory_headers, memory_info, usage
from ..options import SHUTDOWN_GRACE_S
from ..protocol import (USER_HEADER, ApiError, Msg, finish_reason, message_text, resolve_conversation_id,
                        resolve_user, user_header)
from ..state import Served, ServedDep

router = APIRouter()


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1, max_length=100_000)
    stream: bool = False
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int | None = None
    user: str | None = None
    metadata: dict[str, Any] | None = None
    stream_options: dict[str, Any] | None = None


@router.get("/v1/models")
async def models(s: ServedDep):
    model = str(s.lp.model) if s.lp.model else "default (SmolLM2-135M-Instruct)"
    return {"object": "list", "data": [{"id": s.options.model_id, "object": "model", "created": 0,
                                        "owned_by": "localpager", "localpager": {"model": model}}]}


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatRequest, request: Request, s: ServedDep):
    job = new_job(body, request, s)
    task = start(job, s)
    request.scope["state"]["logged_by_job"] = True
    try:
        await asyncio.shield(job.ready)  # the history is reconciled and the question is about to be asked
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError):
            raise
        return error_response(failure(exc))
    if body.stream:
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        # a stream in flight when the server stops is finished, not cut (sse-starlette cuts it by default)
        return EventSourceResponse(stream(job, task, include_usage, s.options.model_id),
                                   headers=memory_headers(job), ping=10, sep="\n",
                                   shutdown_grace_period=SHUTDOWN_GRACE_S)
    try:
        reply = await asyncio.shield(task)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        return error_response(failure(exc), memory_headers(job))
    return JSONResponse(completion(job, reply, s.options.model_id), headers=memory_headers(job, reply))


def new_job(body: ChatRequest, request: Request, s: Served) -> Job:
    """The request as a job: its conversation and whose it is, the history before its question, and its
    ``max_tokens``."""
    options = s.options
    conv_id = resolve_conversation_id(request.headers, {"metadata": body.metadata, "user": body.user},
                                      options.default_conversation)
    user = resolve_user(request.headers, options.user, options.user_headers)
    header = user_header(request.headers, options.user_headers) or USER_HEADER
    if body.n not in (None, 1):
        raise ApiError(400, "n must be 1: one answer per request", param="n")
    messages = [Msg(m.role, message_text(m.content)) for m in body.messages]
    if messages[-1].role != "user" or not messages[-1].text.strip():
        raise ApiError(400, "the last message must be the user's, with some text", param="messages")
    history = [m for m in messages[:-1] if m.role in ("user", "assistant") and m.text.strip()]
    requested = body.max_completion_tokens or body.max_tokens
    max_tokens = min(requested, options.max_tokens_cap) if requested else None
    loop = asyncio.get_running_loop()
    return Job(conv_id, history, messages[-1].text, max_tokens, loop, loop.create_future(),
               asyncio.Queue() if body.stream else None, user=user, user_header=header)


def start(job: Job, s: Served) -> asyncio.Future:
    """The job in a worker thread, its ticket taken now (arrival order); awaited at shutdown, logged when done."""
    turnstile, ticket = s.runner.ticket(job.conv_id)
    task = asyncio.ensure_future(anyio.to_thread.run_sync(s.runner.run, job, turnstile, ticket,
                                                         limiter=s.job_threads))
    s.pending.add(task)
    task.add_done_callback(s.pending.discard)
    task.add_done_callback(lambda t: log_job(s.log, job, t))
    return task


def completion(job: Job, reply: Reply, model_id: str) -> dict:
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model_id,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                         "finish_reason": finish_reason(reply.trace.get("stopped"))}],
            "usage": usage(reply), "localpager": memory_info(job, reply)}


async def stream(job: Job, task: asyncio.Future, include_usage: bool, model_id: str):
    """SSE chunks as the model writes; the last carries the ``localpager`` field; then ``[DONE]``.
    A client that leaves cancels only this generator: the job runs on and stores the answer."""
    cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: dict, finish: str | None = None, **extra) -> dict:
        data = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model_id,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return {"data": json.dumps(data, ensure_ascii=False)}

    try:
        yield chunk({"role": "assistant", "content": ""})
        sent = ""
        while (piece := await job.pieces.get()) is not END:
            sent += piece
            yield chunk({"content": piece})
        try:
            reply = await asyncio.shield(task)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            yield {"data": json.dumps(failure(exc).body())}
            yield {"data": "[DONE]"}
            return
        final = reply.text  # what the store holds: the client's copy should match it
        if " ".join(sent.split()) != " ".join(final.split()) and final.startswith(sent.strip()):
            yield chunk({"content": final[len(sent.strip()):] if sent.strip() else final})
        yield chunk({}, finish_reason(reply.trace.get("stopped")), localpager=memory_info(job, reply))
        if include_usage:
            yield {"data": json.dumps({"id": cid, "object": "chat.completion.chunk", "created": created,
                                       "model": model_id, "choices": [], "usage": usage(reply)})}
        yield {"data": "[DONE]"}
    except (asyncio.CancelledError, GeneratorExit):  # the client left (noted when seen before the answer ends)
        job.client_gone = True
        raise


def log_job(log: Callable[[str], None], job: Job, task: asyncio.Future) -> None:
    """The request's one log line, written when its answer is stored (not when the client has it)."""
    ms = (time.perf_counter() - job.started) * 1000
    exc = task.exception() if not task.cancelled() else None
    who = f" user={job.user}" if job.user is not None else ""
    if exc is not None or task.cancelled():
        log(f"chat conv={job.conv_id}{who} error={failure(exc).message if exc else 'cancelled'} {ms:.0f} ms")
        return
    reply: Reply = task.result()
    t, tokens = reply.trace, reply.trace.get("tokens", {})
    injected = t.get("injected_page_ids") or []
    recall = f"recall p{','.join(map(str, injected))} ({t.get('trigger')})" if injected else "no recall"
    if reply.replayed:
        recall = "retry: the stored answer, nothing stored"
    log(f"chat conv={job.conv_id}{who} turn={job.question_turn} history={job.rec.status if job.rec else '-'}"
        f"+{len(job.rec.new) if job.rec else 0} (matched in {job.match_ms:.0f} ms) "
        f"tokens prompt={tokens.get('prompt', 0)} "
        f"generated={tokens.get('generated', 0)} {ms:.0f} ms {recall}"
        f"{' (client left; answer stored)' if job.client_gone else ''}")
