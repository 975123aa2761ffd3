"""``localpager mcp``: localpager's memory as tools for a desktop app's own model (Model Context Protocol).
An app (Claude Desktop, LM Studio, Jan, Cursor, Continue) launches it and talks to it over stdin/stdout; the
app keeps its model, localpager answers what it remembers. ``--conversation NAME`` pins the server to one
conversation (its tools then take no ``conversation`` argument); ``--read-only`` offers the reading tools only.
Built on the official ``mcp`` SDK (extra ``mcp``), so only the ``mcp`` command imports this package.

In rooms: ``replies`` (what the tools return), ``confirmations`` (the token a forget needs), ``tools`` (what
each tool does with memory), ``descriptions`` (what the app's model reads about them), ``wire`` (the lines the
SDK cannot read, answered), ``server`` (the SDK's server with the tools and resources), ``running`` (the
process: its store with no chat model, its quiet stdout).
"""

# Without the extra, the first import that fails must be the SDK's (``mcp``, ``mcp_types``), so that the command
# says which extra to install: ``server`` imports the SDK before the rooms that import pydantic, and ``anyio``
# (which the SDK brings) is imported where it is used.
from .confirmations import Confirmations
from .running import open_store, serve_stdio
from .server import build_server
from .wire import malformed_answers

__all__ = ["Confirmations", "build_server", "malformed_answers", "open_store", "serve_stdio"]
