"""Serving memory over loopback HTTP: an OpenAI-compatible server and the memory inspector.

``protocol`` holds what needs no web framework (errors, conversation ids, history reconciliation, origin
checks); ``app`` the FastAPI application (extra ``server``); ``static`` the inspector page. May import
``memory`` and the layers below it, never the CLI or the lab.
"""
