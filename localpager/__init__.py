"""localpager: long-conversation memory for local LLMs, paged like virtual memory.

Importing the package is cheap: the model runtimes load on first use.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["LocalPager", "ModelOptions", "PagingConfig", "RecallSettings", "User", "__version__"]


def __getattr__(name: str):
    if name == "LocalPager":
        from .memory.api import LocalPager

        return LocalPager
    if name == "ModelOptions":
        from .memory.models import ModelOptions

        return ModelOptions
    if name == "PagingConfig":
        from .core.pager import PagingConfig

        return PagingConfig
    if name == "RecallSettings":
        from .runtime.settings import RecallSettings

        return RecallSettings
    if name == "User":
        from .memory.users import User

        return User
    raise AttributeError(name)
