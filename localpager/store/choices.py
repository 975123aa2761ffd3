"""The store's choices: the formats of the conversation files it reads.

Standard library only (see ``core.choices``).
"""

from __future__ import annotations

from enum import StrEnum


class FileFormat(StrEnum):
    """The format of a conversation file (``store.loaders``, ``--format``)."""

    AUTO = "auto"  # jsonl or locomo, from the file's first character
    JSONL = "jsonl"  # the interchange format: one conversation a line
    LOCOMO = "locomo"  # the LoCoMo benchmark's JSON file (locomo10.json)
