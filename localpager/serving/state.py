"""What the route handlers share, held on ``app.state.served`` and handed to them as a FastAPI dependency
(``ServedDep``): one app's ``LocalPager``, options, model runner and log, so a handler is a plain function
of its request, and two apps (the namespaces) never share a conversation."""

import asyncio
from dataclasses import dataclass, field
from typing import Annotated, Callable

import anyio
from fastapi import Depends, Request

from ..memory.api import LocalPager
from .jobs import ModelRunner
from .options import ServerOptions


@dataclass
class Served:
    lp: LocalPager
    options: ServerOptions
    runner: ModelRunner
    log: Callable[[str], None]  # control characters escaped
    pending: set[asyncio.Task] = field(default_factory=set)  # chat jobs running: awaited at shutdown
    # Jobs wait for their turn in worker threads; their own pool keeps the reads (memory endpoints) answering.
    # FIFO, and tickets are taken in the same order, so a queued job never holds a thread its predecessor needs.
    job_threads: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(64))
    longest_turn: int = 0  # tokens: a longer turn fits in no prompt whole
    turn_sizes: dict[tuple[str, int, int], int] = field(default_factory=dict)  # (conv, turn, chars): tokens


async def served(request: Request) -> Served:
    """A coroutine, so FastAPI resolves it on the event loop, not in a worker thread."""
    return request.app.state.served


ServedDep = Annotated[Served, Depends(served)]
