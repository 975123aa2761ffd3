"""The library API: what the CLI calls and a desktop app embeds.

``LocalPager`` and ``Conversation`` (``api``), the user's controls over what is remembered (search, forget,
correct: ``controls``) and export/import (``interchange``). May import every layer below: ``core``,
``backends``, ``store``, ``runtime`` and ``retrieval``.
"""
