"""The global options, typed: what ``localpager --store … --backend … --threads …`` chose, as one frozen
``GlobalOptions``, and what one command opened beside them (``Invocation``, the click context's ``obj``).

Nothing here is written to the environment: the model's options reach the library as its ``ModelOptions``
(``GlobalOptions.model_options``). Only click and the standard library are imported at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..memory.models import ModelOptions
    from ..store.base import Store

OPENAI_HTTP = "openai-http"  # the backend the served-model options are for


@dataclass(frozen=True)
class BackendOptions:
    """``--backend`` and the options of a model you serve (``--base-url``, ``--api-key``, ``--tokenizer``,
    ``--constraint``, ``--allow-estimate``)."""

    name: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # a secret: never in a traceback's locals
    tokenizer: str | None = None
    constraint: str | None = None
    allow_estimate: bool = False

    def factory_options(self) -> dict[str, Any]:
        """The options given for the backend's factory: openai-http's; none for another backend."""
        if self.name != OPENAI_HTTP:
            return {}
        given = {"base_url": self.base_url, "api_key": self.api_key, "tokenizer": self.tokenizer,
                 "constraint": self.constraint, "allow_estimate": self.allow_estimate}
        return {key: value for key, value in given.items() if value not in (None, False)}


@dataclass(frozen=True)
class GlobalOptions:
    """The options given before the command (``--store`` and ``--key-env`` after it too)."""

    store: str | None = None
    key_env: str | None = None
    backend: BackendOptions = field(default_factory=BackendOptions)
    threads: int | None = None
    chat_template: str | None = None
    user: str | None = None  # --user: whose conversations the command creates, opens and lists

    def model_options(self, model: str | None = None, n_ctx: int | None = None) -> ModelOptions:
        """The library's ``ModelOptions`` of these options, with a command's ``--model`` and ``--n-ctx``."""
        from ..memory.models import ModelOptions

        return ModelOptions(model=model, backend=self.backend.name or None,
                            backend_options=self.backend.factory_options(), n_ctx=n_ctx or ModelOptions.n_ctx,
                            threads=self.threads, chat_template=self.chat_template)


@dataclass
class Invocation:
    """What one run of the command holds: the global options, and the store it opened (a mistyped conversation
    id is answered with the ids close to it, in that store)."""

    options: GlobalOptions = field(default_factory=GlobalOptions)
    opened_store: Store | None = None

    def set_store_option(self, name: str, value: str) -> None:
        """``--store``, ``--key-env`` or ``--user`` given after the command: it sets what it sets before it (after
        wins)."""
        self.options = replace(self.options, **{name: value})


def invocation(ctx: click.Context) -> Invocation:
    """The context's ``Invocation`` (a new one, with the defaults, for a command run without the group)."""
    return ctx.ensure_object(Invocation)


def global_options(ctx: click.Context) -> GlobalOptions:
    return invocation(ctx).options
