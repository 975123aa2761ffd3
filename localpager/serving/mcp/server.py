"""The MCP server itself: the tools of ``tools.MemoryTools`` and the memory resources put on the official SDK's
``MCPServer``, with the errors a caller can fix turned into the SDK's tool and resource errors, which the
client then reads as a result that says what was wrong."""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Callable
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.server.stdio import stdio_server
from mcp_types import Resource as MCPResource
from pydantic import Field

from ...backends.base import BackendError
from ...core.modelpaths import ModelNotFoundError
from ...core.checks import check_id
from ...memory.api import LocalPager
from ...store.base import StoreError
from .confirmations import Confirmations
from .descriptions import ANNOTATIONS, DESCRIPTIONS, INSTRUCTIONS, NAMED_CONVERSATION, for_user, user_instructions
from .tools import MemoryTools
from .wire import ScreenedLines

URI_ROOT = "localpager://conversations"
USERS_ROOT = "localpager://users"
FRIENDLY = (ValueError, StoreError, BackendError, ModelNotFoundError)


class MemoryServer(MCPServer):
    """``MCPServer`` whose resource list names each conversation's bookmarks and pages (the conversations
    change while it runs: ``remember`` creates them), and whose stdio answers lines it cannot read."""

    def __init__(self, tools: MemoryTools, **kwargs: Any):
        super().__init__(**kwargs)
        self.memory = tools

    async def run_stdio_async(self) -> None:
        """The SDK's own ``run_stdio_async`` (its stdio transport, fds claimed as it claims them), with the read
        stream screened (``ScreenedLines``). Uses the SDK's ``_lowlevel_server``, as that method does (mcp 2.x)."""
        async with stdio_server() as (read_stream, write_stream):
            await self._lowlevel_server.run(ScreenedLines(read_stream, write_stream), write_stream,
                                            self._lowlevel_server.create_initialization_options())

    async def list_resources(self) -> list[MCPResource]:
        import anyio.to_thread

        listed = await super().list_resources()
        found = await anyio.to_thread.run_sync(self.memory.conversations)
        for info in found.conversations:
            base = f"{URI_ROOT}/{quote(info.id, safe='')}"
            listed += [
                MCPResource(uri=f"{base}/bookmarks", name=f"{info.id}: bookmarks", mime_type="text/plain",
                            description=f"the bookmarks of {info.id}'s {info.pages} pages, one a line"),
                MCPResource(uri=f"{base}/pages", name=f"{info.id}: pages", mime_type="application/json",
                            description=f"{info.id}'s pages with their bookmarks and turns ({info.turns} turns)"),
                MCPResource(uri=f"{base}/facts", name=f"{info.id}: standing facts", mime_type="application/json",
                            description=f"what the user told {info.id} about themselves that stays true, each with "
                                        "its source turn"),
            ]
        return listed


def build_server(lp: LocalPager, *, conversation: str | None = None, read_only: bool = False,
                 confirmations: Confirmations | None = None, user: str | None = None) -> MemoryServer:
    """The MCP server for ``lp``: every tool, or the reading ones (``read_only``), on every conversation or
    the one named (``conversation``); with ``user``, on that user's conversations only, a call naming none using
    the user's own (``tools.own_conversation``) unless the server is pinned to one."""
    if conversation is not None:
        check_id(conversation)
    tools = MemoryTools(lp, conversation, confirmations, user)
    instructions = INSTRUCTIONS + (f" This server serves one conversation, {conversation!r}: its tools take no "
                                   "conversation argument." if conversation else "")
    if user is not None:
        instructions += user_instructions(user, None if conversation else tools.default)
    if read_only:
        instructions += " It is read-only: it recalls and searches, and changes nothing."
    server = MemoryServer(tools, name="localpager", title="localpager memory", version=_version(),
                          instructions=instructions, log_level="WARNING")
    optional = tools.default if user is not None and conversation is None else None
    for name, method in tools.by_name(read_only).items():
        description = DESCRIPTIONS[name] if optional is None else for_user(name, DESCRIPTIONS[name], user, optional)
        loose = optional if name not in NAMED_CONVERSATION else None  # a fact's number is its conversation's
        server.add_tool(_tool(method, name, conversation, loose), name=name, description=description,
                        annotations=ANNOTATIONS[name], structured_output=True)
    _add_resources(server, tools)
    return server


def _tool(method: Callable, name: str, pinned: str | None, optional: str | None = None) -> Callable:
    """``method`` as the SDK's tool function: the arguments its signature declares (less ``conversation``
    when the server is pinned to one; ``conversation`` optional, last, when a user's server has a default one
    (``optional``)), errors the caller can fix as ``ToolError`` (the call's result then says what was wrong, with
    ``isError``)."""
    signature = inspect.signature(method, eval_str=True)
    pin = pinned is not None and "conversation" in signature.parameters
    loose = optional is not None and "conversation" in signature.parameters

    def call(**arguments):
        if pin:
            arguments["conversation"] = pinned
        try:
            return method(**arguments)
        except FRIENDLY as exc:
            raise ToolError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None

    params = [p for p in signature.parameters.values() if not ((pin or loose) and p.name == "conversation")]
    if loose:  # after the required arguments, as a signature must have it
        described = Field(min_length=1, description=f"the conversation's id (default: the user's own, {optional!r}; "
                                                     "conversations() lists theirs)")
        params.append(inspect.Parameter("conversation", inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation=Annotated[str | None, described]))
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
    call.__signature__ = signature.replace(parameters=params)
    call.__name__ = call.__qualname__ = name
    return call


def _resource(fn: Callable[..., str]) -> Callable[..., str]:
    """``fn`` as the SDK's resource function: what is not there as ``ResourceNotFoundError``, other errors the
    caller can fix as ``ResourceError``."""
    def read(**arguments) -> str:
        try:
            return fn(**arguments)
        except (ValueError, KeyError, StoreError) as exc:
            message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            raise ResourceNotFoundError(message) from None
        except FRIENDLY as exc:
            raise ResourceError(str(exc)) from None

    read.__signature__ = inspect.signature(fn, eval_str=True)
    read.__annotations__ = dict(fn.__annotations__)
    read.__name__ = fn.__name__
    return read


def _add_resources(server: MemoryServer, tools: MemoryTools) -> None:
    """A conversation's bookmarks, pages, one page and standing facts, as resource templates on ``server``; with a
    user, the user's standing facts across their conversations."""
    exempt = ResourceSecurity(exempt_params={"conversation"})  # an id, never a path: the store looks it up
    if tools.user is not None:
        @server.resource(f"{USERS_ROOT}/{quote(tools.user, safe='')}/facts", name="your standing facts",
                         mime_type="application/json",
                         description=f"what {tools.user} said about themselves that stays true, across all of their "
                                     "conversations: each fact with its conversation and source turn")
        @_resource
        def user_facts() -> str:
            return tools.user_facts_json()

    @server.resource(f"{URI_ROOT}/{{conversation}}/bookmarks", name="bookmarks", mime_type="text/plain",
                     description="a conversation's bookmarks, one a line", security=exempt)
    @_resource
    def bookmarks(conversation: str) -> str:
        return tools.bookmarks_text(conversation)

    @server.resource(f"{URI_ROOT}/{{conversation}}/pages", name="pages", mime_type="application/json",
                     description="a conversation's pages: bookmark, turns, evicted or pinned", security=exempt)
    @_resource
    def pages(conversation: str) -> str:
        return tools.pages_json(conversation)

    @server.resource(f"{URI_ROOT}/{{conversation}}/facts", name="facts", mime_type="application/json",
                     description="a conversation's standing facts: what the user said about themselves that stays "
                                 "true (allergies, schedules, people, preferences), each with its source turn",
                     security=exempt)
    @_resource
    def facts(conversation: str) -> str:
        return tools.facts_json(conversation)

    @server.resource(f"{URI_ROOT}/{{conversation}}/pages/{{page}}", name="page", mime_type="application/json",
                     description="one page of a conversation, with its turns", security=exempt)
    @_resource
    def page(conversation: str, page: str) -> str:
        if not page.isdigit():
            raise ValueError(f"no page {page!r}: pages are numbered from 1")
        try:
            return tools.pages_json(conversation, int(page))
        except KeyError:
            raise ValueError(f"no page p{page} in {conversation!r}") from None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("localpager")
    except PackageNotFoundError:
        return ""
