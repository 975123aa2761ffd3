"""What the commands print besides their results: JSON, a page's line, and progress bars on stderr."""

from __future__ import annotations

import json
import sys

import click


def echo_json(data) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def page_line(p) -> str:
    """One page as ``pages`` and the chat's ``/pages`` list it."""
    state = "evicted" if p.evicted else "resident"
    return (f"p{p.page_id}\tturns {p.first_turn}-{p.last_turn}\t{p.token_count} tokens\t{state}"
            f"{' pinned' if p.pinned else ''}\tused {p.access_count}x\t{','.join(p.keywords)}")


class Bars:
    """Progress bars on stderr, one per stage (``bars("embed", done, total)``), each shown only once its
    stage has run for a second (tqdm's ``delay``) and never when ``disabled`` (``--json`` output)."""

    def __init__(self, disabled: bool = False, unit: str = "turn"):
        self.disabled, self.unit = disabled, unit
        self.units = {"read": "line"}  # a stage's own unit
        self._bars: dict = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.disabled:
            return
        from tqdm import tqdm

        bar = self._bars.get(stage)
        if bar is None:
            for earlier in self._bars.values():  # one stage after another: the one before is done
                earlier.close()
            unit = self.units.get(stage, self.unit)
            bar = self._bars[stage] = tqdm(total=total, desc=stage, unit=unit, delay=1.0, file=sys.stderr,
                                           mininterval=0.5)
        bar.total = max(total, done)
        bar.update(done - bar.n)

    def note(self, stage: str, text: str) -> None:
        """Show ``text`` beside a stage's bar (conversations done beside a bar of turns)."""
        bar = self._bars.get(stage)
        if bar is not None and not self.disabled:
            bar.set_postfix_str(text, refresh=False)

    def stage(self, name: str):
        """The ``progress(done, total)`` of one stage (``Conversation.prepare``, ``ingest``'s ``on_turns``)."""
        return lambda done, total: self(name, done, total)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()


def prepare_recall(conv, bars: Bars) -> None:
    """Embed the evicted turns a recall would search now, with a bar when that takes more than a second
    (a store never searched, or just imported); nothing when they are embedded already. A missing embedder
    is left for the recall itself to report."""
    from ..core.modelpaths import ModelNotFoundError

    if not any(p.evicted for p in conv.pages):
        return
    try:
        conv.prepare(progress=bars.stage("embed"))
    except ModelNotFoundError:
        pass
    finally:
        bars.close()
