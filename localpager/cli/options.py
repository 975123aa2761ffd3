"""How the commands' options are declared and parsed: the parameter types whose names come from the
library's enums (``choices`` modules), comma-separated lists, and the store options after a command."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum

import click

from ..core.choices import PARAMETRIC_BOUNDARIES, Boundary, choose, unknown


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


# -- the store options, before or after the command ---------------------------------------------------------
def _store_setting(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """A store option given after the command sets what it sets before it (after wins)."""
    if value is not None:
        ctx.ensure_object(dict)[param.name] = value


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
