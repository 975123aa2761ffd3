"""Serving memory over loopback HTTP: an OpenAI-compatible server and the memory inspector.

``protocol`` holds what needs no web framework (errors, conversation ids, history reconciliation, origin
checks); ``app`` puts the FastAPI application together (extra ``server``) from ``routes``, ``guard``,
``jobs`` and ``namespaces``; ``static`` the inspector page; ``mcp`` the MCP server. May import ``memory``
and the layers below it, never the CLI or the lab.
"""
