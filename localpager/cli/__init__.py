"""The ``localpager`` command: a thin shell over the library API (``localpager.memory.api``).

The top group and its global options are here; the commands are in modules by what they do: ``memory``
(conversations, pages, bookmarks, budgets, search, forget, correct), ``answer`` (ask, chat), ``store``
(ingest, export, import, migrate-store), ``serve`` (serve, mcp) and ``lab`` (eval, bench, and the ``lab``
group's experiments). ``options``, ``settings`` (the global options, typed), ``session`` and ``output`` are what
they share.

At start-up only click and modules of the standard library are imported (the option choices come from each
layer's ``choices`` module), so ``localpager --help`` stays fast; numpy, FAISS and the model runtimes are
imported inside the command that needs them.
"""

from __future__ import annotations

import click

from ..backends.choices import ConstraintFormat
from . import answer, lab, memory, serve, store
from .options import ChoiceOf, StoreGroup
from .session import friendly_errors
from .settings import BackendOptions, GlobalOptions, Invocation

__all__ = ["StoreGroup", "cli", "friendly_errors", "main"]


@click.group(cls=StoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="localpager")
@click.option("--store", envvar="LOCALPAGER_STORE", type=click.Path(dir_okay=False),
              help="SQLite store file, or postgresql://USER@HOST:PORT/DB (needs pip install 'localpager[postgres]'; "
                   "docs/deployment.md); default: localpager.db in your data directory; env LOCALPAGER_STORE")
@click.option("--key-env", metavar="NAME", default=None,
              help="the store is encrypted (SQLCipher) with the key in environment variable NAME; "
                   "needs pip install 'localpager[encrypt]'")
@click.option("--backend", envvar="LOCALPAGER_BACKEND", default=None,
              help="llama-cpp (default: the GGUF file in this process) or openai-http (a model you serve); "
                   "env LOCALPAGER_BACKEND")
@click.option("--base-url", envvar="LOCALPAGER_BASE_URL", default=None,
              help="openai-http: the server's OpenAI-compatible URL (default http://127.0.0.1:8080/v1); "
                   "--model then names the served model (default: its first)")
@click.option("--api-key", envvar="LOCALPAGER_API_KEY", default=None, help="openai-http: bearer token, if the server wants one")
@click.option("--tokenizer", envvar="LOCALPAGER_TOKENIZER", type=click.Path(dir_okay=False), default=None,
              help="openai-http: the served model's GGUF file, for its tokenizer and chat template "
                   "(needed for Ollama and LM Studio)")
@click.option("--constraint", envvar="LOCALPAGER_CONSTRAINT", type=ChoiceOf(ConstraintFormat, "constraint"),
              default=None, help="openai-http: how recall decisions are constrained (default auto: probe the server)")
@click.option("--allow-estimate", envvar="LOCALPAGER_ALLOW_ESTIMATE", is_flag=True, default=False,
              help="openai-http: estimate token counts when the server has no tokenizer (flagged in the trace)")
@click.option("--user", metavar="NAME", envvar="LOCALPAGER_USER", default=None,
              help="whose memory: the conversations ingest, import, ask and chat create are NAME's, a conversation of "
                   "another user is refused, and facts, search, forget and export without CONV_ID act on all of "
                   "NAME's conversations; env LOCALPAGER_USER")
@click.option("--threads", type=click.IntRange(min=1), envvar="LOCALPAGER_THREADS", default=None,
              help="llama.cpp threads (default: the cores other work leaves free when the model loads, by the "
                   "CPU time the kernel counts; llama.cpp's threads spin, so taking a busy core costs far more than it "
                   "gives); env LOCALPAGER_THREADS")
@click.option("--chat-template", envvar="LOCALPAGER_CHAT_TEMPLATE", default=None, metavar="chatml|FILE",
              help="the chat template for a GGUF that has none (a base model is refused without one): chatml, or a "
                   "Jinja file; env LOCALPAGER_CHAT_TEMPLATE")
@click.pass_context
def cli(ctx: click.Context, store: str | None, key_env: str | None, backend: str | None, base_url: str | None,
        api_key: str | None, tokenizer: str | None, constraint: str | None, allow_estimate: bool, user: str | None,
        threads: int | None, chat_template: str | None) -> None:
    """Long-conversation memory for local LLMs: pages old turns out, recalls them by bookmark."""
    served = BackendOptions(name=backend, base_url=base_url, api_key=api_key, tokenizer=tokenizer,
                            constraint=constraint, allow_estimate=allow_estimate)
    # the model's options reach the loader as arguments (GlobalOptions.model_options), in this process and in
    # the processes a command starts: nothing is written to the environment
    ctx.obj = Invocation(GlobalOptions(store=store, key_env=key_env, backend=served, threads=threads,
                                       chat_template=chat_template, user=user))


for _command in (*store.COMMANDS, *memory.COMMANDS, *answer.COMMANDS, *serve.COMMANDS, *lab.COMMANDS):
    cli.add_command(_command)


def main() -> None:
    cli()
