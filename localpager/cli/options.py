"""How the commands' options are declared, parsed and shown: the parameter types whose names come from the
library's enums (``choices`` modules), comma-separated lists, and ``--help`` with the experiment options apart."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum

import click

from ..core.choices import PARAMETRIC_BOUNDARIES, Boundary, KeywordStrategy, choose, unknown
from .settings import invocation

# the keyword strategies a user would choose (random is the lab's baseline: eval --keywords still takes it)
OFFERED_KEYWORDS = tuple(k for k in KeywordStrategy if k is not KeywordStrategy.RANDOM)


# -- choices: every option's names come from the enum that the library checks them against ---------------
class ChoiceOf(click.Choice):
    """A ``click.Choice`` of a ``StrEnum``'s members (``offered``: some of them). The value comes back as the
    member; an unknown name gets the library's one message (``core.choices.unknown``)."""

    def __init__(self, kind: type[StrEnum], what: str, offered: Iterable[StrEnum] | None = None):
        self.kind, self.what = kind, what
        super().__init__([m.value for m in (kind if offered is None else offered)])

    def convert(self, value, param, ctx):
        if value in self.choices:
            return self.kind(value)
        self.fail(str(unknown(self.what, value, self.choices)), param, ctx)


def split_list(text: str) -> list[str]:
    """A comma-separated option as its non-empty items."""
    return [s.strip() for s in text.split(",") if s.strip()]


class ListOf(click.ParamType):
    """Comma-separated names (one run each), every one checked by ``parse`` (the library's own check, so an
    unknown name gets its one message) before anything runs; ``names`` are what help shows."""

    name = "list"

    def __init__(self, parse: Callable[[str], object], names: Iterable[str]):
        self.parse, self.names = parse, [str(n) for n in names]

    def get_metavar(self, param, ctx=None) -> str:
        return f"[{'|'.join(self.names)}],..."

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return value
        try:
            names = [self.parse(v) for v in split_list(value)]
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if not names:
            self.fail(f"expected one or more of {', '.join(self.names)}, comma-separated", param, ctx)
        return names


def list_of(kind: type[StrEnum], what: str, also: tuple[str, ...] = ()) -> ListOf:
    """A ``ListOf`` the members of ``kind``, and the names ``also`` that the command itself takes."""
    return ListOf(lambda name: name if name in also else choose(kind, name, what, also=also), [*kind, *also])


def boundary_name(name: str) -> str:
    """A boundary policy's name, checked: a ``Boundary``, or ``fixed_N`` / ``exchange_N``."""
    from ..core.boundaries import get_boundary

    get_boundary(name)
    return name


class BoundaryName(click.ParamType):
    """One boundary policy: a ``Boundary``, or ``fixed_N`` / ``exchange_N`` for any N."""

    name = "boundary"

    def get_metavar(self, param, ctx=None) -> str:
        return f"[{'|'.join([*Boundary, *PARAMETRIC_BOUNDARIES])}]"

    def convert(self, value, param, ctx):
        try:
            return boundary_name(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def positive_ints(text: str, option: str) -> tuple[int, ...]:
    """``512,2048`` as (512, 2048); anything else is a one-line usage error."""
    try:
        values = tuple(int(v) for v in split_list(text))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise click.BadParameter(f"expected comma-separated positive numbers, got {text!r}", param_hint=option)
    return values


# -- help: what a user sets, and apart from it what only an experiment sets ------------------------------
class ExperimentOption(click.Option):
    """An option only an experiment sets (a strategy sweep, a baseline, a variant of a tuned setting): its
    command's ``--help`` lists it under "Experiment options", after the options a user sets."""


def experiment_option(*decls: str, **attrs) -> Callable:
    """``click.option``, for an ``ExperimentOption``."""
    return click.option(*decls, cls=ExperimentOption, **attrs)


class ExperimentCommand(click.Command):
    """A command whose ``--help`` shows two sections: "Options" and "Experiment options"."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for title, records in help_sections(self, ctx):
            with formatter.section(title):
                formatter.write_dl(records)


def help_sections(command: click.Command, ctx: click.Context) -> list[tuple[str, list[tuple[str, str]]]]:
    """A command's options as ``--help`` shows them: (section title, [(option, help), ...]), sections
    without options left out."""
    sections: dict[str, list[tuple[str, str]]] = {"Options": [], "Experiment options": []}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is not None and not isinstance(param, click.Argument):  # arguments: in the usage line
            sections["Experiment options" if isinstance(param, ExperimentOption) else "Options"].append(record)
    return [(title, records) for title, records in sections.items() if records]


# -- the store options, before or after the command ---------------------------------------------------------
def _store_setting(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """A store option given after the command sets what it sets before it (after wins)."""
    if value is not None:
        invocation(ctx).set_store_option(param.name, value)


def user_option(f):
    """``--user NAME`` after the command too (as before it: ``localpager --user NAME ...``), for the commands it
    acts on."""
    return click.option("--user", metavar="NAME", expose_value=False, callback=_store_setting,
                        help="whose memory (as before the command: localpager --user NAME ...)")(f)


class StoreGroup(click.Group):
    """The command group. Every command that opens the store also takes ``--store`` and ``--key-env`` after
    its name (``localpager bookmarks X --store m.db``), where people put them: before, only
    ``localpager --store m.db bookmarks X`` worked and the other order was "No such option"."""

    WITHOUT_STORE = ("lab", "eval", "bench", "migrate-store")

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if (name or cmd.name) not in self.WITHOUT_STORE:
            cmd.params += [
                click.Option(["--store"], type=click.Path(dir_okay=False), expose_value=False, callback=_store_setting,
                             help="SQLite file or postgresql:// URL (as before the command: localpager --store PATH ...)"),
                click.Option(["--key-env"], metavar="NAME", expose_value=False, callback=_store_setting,
                             help="the store's key is in environment variable NAME (as before the command)")]
        super().add_command(cmd, name)
