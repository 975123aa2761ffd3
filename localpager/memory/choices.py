"""The library API's choices: what an import does with a conversation the store already holds.

Standard library only (see ``core.choices``).
"""

from __future__ import annotations

from enum import StrEnum


class ImportMode(StrEnum):
    """What ``LocalPager.import_file`` does with a conversation already in the store (``import --replace``,
    ``--merge``)."""

    ERROR = "error"  # refuse the whole file, before anything is written
    REPLACE = "replace"  # the file's conversation replaces the stored one
    MERGE = "merge"  # the stored conversation gets the file's turns it lacks
