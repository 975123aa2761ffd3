"""docs/cli.md, the reference of every ``localpager`` command, group and option, written from the click
objects themselves so that it cannot drift from ``--help``:

    .venv/bin/python docs/cli_reference.py            # rewrite docs/cli.md (make docs)
    .venv/bin/python docs/cli_reference.py --check    # exit 1 if docs/cli.md is not what the commands say

Needs click and the package (``make setup``); the fast test ``tests/fast/test_docs.py`` runs the check.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

import click

DOCS = Path(__file__).resolve().parent
OUT = DOCS / "cli.md"
ROOT = DOCS.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from localpager.cli import cli  # noqa: E402
from localpager.cli.options import help_sections  # noqa: E402

INTRO = """\
# CLI reference

Every command, group and option of `localpager`, as `--help` shows them; written from the commands
themselves by `make docs` (`docs/cli_reference.py`), so do not edit it by hand. Which options matter, with
examples: [usage](usage.md). Every command also takes `-h`/`--help`.
"""


def commands(command: click.Command, path: tuple[str, ...] = ("localpager",)):
    """(the words that run it, the command) for ``command`` and, a group, everything under it, by name."""
    yield path, command
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from commands(command.commands[name], (*path, name))


def context(path: tuple[str, ...]) -> click.Context:
    """The context ``localpager ...`` runs the command of ``path`` in (its usage line names the groups above)."""
    ctx = click.Context(cli, info_name=path[0], **cli.context_settings)  # -h as well as --help, as when run
    for word in path[1:]:
        command = ctx.command.commands[word]
        ctx = click.Context(command, info_name=word, parent=ctx, **command.context_settings)
    return ctx


def cell(text: str) -> str:
    """``text`` on one line, for a table cell (a ``|`` escaped, in code too: GitHub reads it first)."""
    return " ".join(text.split()).replace("|", "\\|")


def prose(text: str) -> str:
    """Help text as Markdown shows it as written: ``llm-*`` starts no emphasis."""
    return text.replace("*", "\\*")


def section(path: tuple[str, ...], command: click.Command) -> str:
    ctx = context(path)
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    help_text = prose(inspect.cleandoc(command.help or "").replace("\b\n", ""))
    out = [f"## `{' '.join(path)}`", "", "```text", usage, "```", "", help_text, ""]
    if isinstance(command, click.Group):
        out += ["| command | what |", "|---|---|"]
        for name in sorted(command.commands):
            sub = command.commands[name]
            out.append(f"| [`{name}`](#{anchor((*path, name))}) | {prose(cell(sub.get_short_help_str(limit=300)))} |")
        out.append("")
    for title, records in help_sections(command, ctx):
        records = [(names, what) for names, what in records if names not in ("-h, --help", "--help")]
        if records:
            out += [f"{title}:", "", "| option | what |", "|---|---|"]
            out += [f"| `{cell(names)}` | {prose(cell(what))} |" for names, what in records]
            out.append("")
    return "\n".join(out)


def anchor(path: tuple[str, ...]) -> str:
    """GitHub's anchor for the heading of ``path`` (``## `localpager lab generate` `` -> localpager-lab-generate)."""
    return "-".join(path)


def render() -> str:
    return "\n".join([INTRO, *(section(path, command) for path, command in commands(cli))]).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if docs/cli.md is out of date")
    args = parser.parse_args(argv)
    new = render()
    current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
    if new == current:
        return 0
    if args.check:
        print("docs/cli.md is out of date (run `make docs`)", file=sys.stderr)
        return 1
    OUT.write_text(new, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
