"""The backends' choices: how a served model's output is constrained.

Standard library only (see ``core.choices``).
"""

from __future__ import annotations

from enum import StrEnum


class ConstraintFormat(StrEnum):
    """The form in which the HTTP backend sends a constraint (``backends.constraints``) to a model server
    (``--constraint``, ``LOCALPAGER_CONSTRAINT``)."""

    AUTO = "auto"  # probe the server once: GBNF if it takes it, else a JSON schema, else none
    GBNF = "gbnf"  # a GBNF grammar (llama-server, llama-cpp-python's server)
    JSON_SCHEMA = "json-schema"  # a JSON schema (Ollama, OpenAI-style response_format)
    NONE = "none"  # the server takes neither: the model is never asked to decide
