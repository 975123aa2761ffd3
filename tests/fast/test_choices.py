"""Typed choices: every set of choices is one StrEnum that the library, the CLI and the trace share.

Each enum's every member round-trips through its CLI options and its library setting, and an unknown name
gets the one message (``unknown <what> 'x'; use one of a, b, c``) from both.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from enum import StrEnum
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from localpager.cli import cli
from localpager.core.boundaries import get_boundary
from localpager.core.choices import (
    PARAMETRIC_BOUNDARIES,
    BookmarkFormat,
    Boundary,
    Eviction,
    KeywordStrategy,
    choose,
)
from localpager.core.eviction import get_eviction
from localpager.core.pager import PagingConfig
from localpager.lab.choices import EvalStrategy, Phrasing, RetrieverName
from localpager.memory.choices import ImportMode
from localpager.retrieval.choices import PageChoice, Signal
from localpager.runtime.choices import OFFERED_RECALL_MODES, Fired, Layout, RecallMode, Trigger
from localpager.runtime.trace import Pass, Trace
from localpager.store.choices import FileFormat

PACKAGE = Path(__file__).resolve().parents[2] / "localpager"
EVAL_RECALL_MODES = (RecallMode.AUTO, RecallMode.ALWAYS)
OFFERED_KEYWORDS = [k for k in KeywordStrategy if k is not KeywordStrategy.RANDOM]  # random: the lab's baseline


def message(what: str, value: str, names) -> str:
    """The one message of an unknown choice, as a regular expression matching it whole."""
    return re.escape(f"unknown {what} {value!r}; use one of {', '.join(map(str, names))}")


# -- the CLI -------------------------------------------------------------------------------------------
# (command, its arguments before the option, option, the names it offers, what an unknown one is, a list?)
CLI_OPTIONS = [
    ("ingest", ["f.jsonl"], "--boundary", [*Boundary, *PARAMETRIC_BOUNDARIES], "boundary policy", False),
    ("eval", ["d.jsonl"], "--boundary", [*Boundary, *PARAMETRIC_BOUNDARIES], "boundary policy", False),
    ("lab simulate", ["d.jsonl"], "--boundary", [*Boundary, *PARAMETRIC_BOUNDARIES], "boundary policy", True),
    ("ingest", ["f.jsonl"], "--eviction", list(Eviction), "eviction policy", False),
    ("eval", ["d.jsonl"], "--eviction", list(Eviction), "eviction policy", True),
    ("lab simulate", ["d.jsonl"], "--eviction", [*Eviction, "belady"], "eviction policy", True),
    ("ingest", ["f.jsonl"], "--keywords", OFFERED_KEYWORDS, "keyword strategy", False),
    ("eval", ["d.jsonl"], "--keywords", list(KeywordStrategy), "keyword strategy", True),
    ("ingest", ["f.jsonl"], "--bookmark-format", list(BookmarkFormat), "bookmark format", False),
    ("eval", ["d.jsonl"], "--bookmark-format", list(BookmarkFormat), "bookmark format", False),
    ("bookmarks", ["c"], "--format", list(BookmarkFormat), "bookmark format", False),
    ("ask", ["c", "q"], "--layout", list(Layout), "layout", False),
    ("chat", ["c"], "--layout", list(Layout), "layout", False),
    ("eval", ["d.jsonl"], "--layout", list(Layout), "layout", True),
    ("ask", ["c", "q"], "--recall", list(OFFERED_RECALL_MODES), "recall mode", False),
    ("chat", ["c"], "--recall", list(OFFERED_RECALL_MODES), "recall mode", False),
    ("eval", ["d.jsonl"], "--recall", list(EVAL_RECALL_MODES), "recall mode", False),
    ("eval", ["d.jsonl"], "--trigger", list(Trigger), "trigger", False),
    ("eval", ["d.jsonl"], "--page-choice", list(PageChoice), "page choice", False),
    ("eval", ["d.jsonl"], "--signal", list(Signal), "signal", False),
    ("eval", ["d.jsonl"], "--strategy", list(EvalStrategy), "strategy", True),
    ("lab simulate", ["d.jsonl"], "--retriever", list(RetrieverName), "retriever", True),
    ("lab generate", ["o.jsonl"], "--phrasing", list(Phrasing), "phrasing", False),
    ("ingest", ["f.jsonl"], "--format", list(FileFormat), "file format", False),
    ("eval", ["d.jsonl"], "--format", list(FileFormat), "file format", False),
    ("lab simulate", ["d.jsonl"], "--format", list(FileFormat), "file format", False),
]
CLI_IDS = [f"{c} {o}" for c, _, o, *_ in CLI_OPTIONS]


def command_of(path: str) -> click.Command:
    """The command ``localpager PATH`` runs (``lab simulate``: a command of the ``lab`` group)."""
    cmd = cli
    for name in path.split():
        cmd = cmd.commands[name]
    return cmd


def parsed(command: str, args: list[str]) -> dict:
    """The values the command's options parse to, without running it."""
    with command_of(command).make_context(command.split()[-1], args) as ctx:
        return ctx.params


def param_of(command: str, option: str) -> click.Parameter:
    return next(p for p in command_of(command).params if option in p.opts)


@pytest.mark.parametrize("command,before,option,names,what,is_list", CLI_OPTIONS, ids=CLI_IDS)
def test_every_name_round_trips_through_the_cli_option(command, before, option, names, what, is_list):
    param = param_of(command, option)
    names = [n.replace("_N", "_7") for n in map(str, names)]  # fixed_N: any N
    for name in names:
        value = parsed(command, [*before, option, name])[param.name]
        assert value == ([name] if is_list else name), (option, name)
        assert all(not isinstance(v, StrEnum) or v.value == name for v in (value if is_list else [value]))
    if is_list:
        assert parsed(command, [*before, option, ",".join(names)])[param.name] == names


@pytest.mark.parametrize("command,before,option,names,what,is_list", CLI_OPTIONS, ids=CLI_IDS)
def test_an_unknown_name_on_the_cli_gets_the_one_message(command, before, option, names, what, is_list):
    result = CliRunner().invoke(cli, [*command.split(), *before, option, "nope"])
    assert result.exit_code == 2
    assert re.search(message(what, "nope", names), " ".join(result.output.split())), result.output


@pytest.mark.parametrize("command,before,option,names,what,is_list", CLI_OPTIONS, ids=CLI_IDS)
def test_the_cli_offers_exactly_the_enum_and_shows_its_default_by_name(command, before, option, names, what,
                                                                      is_list):
    param = param_of(command, option)
    help_text = " ".join(CliRunner().invoke(cli, [*command.split(), "--help"]).output.split())
    assert "|".join(map(str, names)) in help_text.replace(" ", "")
    if param.default is not None:
        default = param.default
        assert isinstance(default, str) and not isinstance(default, StrEnum)  # click would show a member's NAME
        assert "[default:" in help_text and "FIXED_20" not in help_text and "MODEL_RERANK" not in help_text


def test_the_internal_recall_mode_is_never_offered():
    for command in ("ask", "chat", "eval"):
        assert RecallMode.SELECTOR not in param_of(command, "--recall").type.choices
    with pytest.raises(ValueError, match=message("recall mode", "x", OFFERED_RECALL_MODES)):
        choose(RecallMode, "x", "recall mode", offered=OFFERED_RECALL_MODES)
    assert choose(RecallMode, "selector", "recall mode", offered=OFFERED_RECALL_MODES) is RecallMode.SELECTOR


def walk(group: click.Group, path: tuple[str, ...] = ()):
    """(the names that run it, the command) for every command and group under ``group``."""
    for name, cmd in sorted(group.commands.items()):
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from walk(cmd, (*path, name))


def test_ingest_offers_only_the_keyword_strategies_a_user_would_choose():
    """random is the lab's baseline: eval --keywords takes it, ingest neither lists nor takes it."""
    assert KeywordStrategy.RANDOM not in param_of("ingest", "--keywords").type.choices
    result = CliRunner().invoke(cli, ["ingest", "f.jsonl", "--keywords", "random"])
    assert result.exit_code == 2 and "unknown keyword strategy 'random'" in result.output
    assert parsed("eval", ["d.jsonl", "--keywords", "random"])["keyword_strategies"] == ["random"]
    assert PagingConfig(keywords="random").keywords is KeywordStrategy.RANDOM  # the library still takes it


def test_no_hidden_option_and_no_old_name_is_left():
    for cmd in [cli, *(cmd for _, cmd in walk(cli))]:
        for param in cmd.params:
            assert not getattr(param, "hidden", False), (cmd.name, param.opts)
            assert "--selector" not in param.opts, cmd.name
    import localpager.store.loaders as loaders

    assert not hasattr(loaders, "LoaderError")


# -- the library ------------------------------------------------------------------------------------------
# (enum, what an unknown one is, set a library setting to a name and read it back)
def _import_mode(name):
    from localpager.memory.interchange import import_conversations
    from localpager.store.loaders import ConversationFileError

    try:
        import_conversations(None, "/nonexistent.jsonl", name, merge=None)  # the mode is checked before the file is read
    except ConversationFileError:  # an accepted mode, then no such file
        return ImportMode(name)


def _file_format(name):
    from localpager.store.loaders import ConversationFileError, load_conversations

    try:
        load_conversations("/nonexistent.jsonl", name)  # the format is checked before the file is read
    except ConversationFileError:  # an accepted format, then no such file
        return FileFormat(name)


def _selector(field):
    from localpager.lab.selectors import lab_selector

    return lambda name: getattr(lab_selector(None, "c", **{field: name}), field)


def _eval(field):
    from localpager.lab.evaluate import EvalConfig

    return lambda name: getattr(EvalConfig(**{field: name}), field)


def _recall(field):
    from localpager.runtime.settings import RecallSettings

    return lambda name: getattr(RecallSettings(**{field: name}), field)


def _retriever(name):
    from localpager.lab.retrievers import get_retriever

    return get_retriever(name).name


def _phrasing(name):
    from localpager.lab.synthetic import fact_kinds

    assert fact_kinds(name)
    return Phrasing(name)


def _pass(name):
    t = Trace(0, "q")
    t.add_tokens(1, 0, 0, 1, kind=name)
    return Pass(name) if t.tokens[name]["evaluated"] == 1 else None


LIBRARY = [
    (Boundary, "boundary policy", lambda name: PagingConfig(boundary=name).boundary),
    (Boundary, "boundary policy", lambda name: get_boundary(name).name),
    (Eviction, "eviction policy", lambda name: PagingConfig(eviction=name).eviction),
    (Eviction, "eviction policy", lambda name: get_eviction(name).name),
    (KeywordStrategy, "keyword strategy", lambda name: PagingConfig(keywords=name).keywords),
    (BookmarkFormat, "bookmark format", lambda name: PagingConfig(bookmark_format=name).bookmark_format),
    (Layout, "layout", _recall("layout")),
    (Layout, "layout", _eval("layout")),
    (RecallMode, "recall mode", _recall("mode")),
    (RecallMode, "recall mode", _eval("recall_mode")),
    (Trigger, "trigger", _selector("trigger")),
    (Trigger, "trigger", _eval("trigger")),
    (PageChoice, "page choice", _selector("page_choice")),
    (PageChoice, "page choice", _eval("page_choice")),
    (Signal, "signal", _selector("signal")),
    (Signal, "signal", _eval("signal")),
    (EvalStrategy, "strategy", _eval("strategy")),
    (RetrieverName, "retriever", _retriever),
    (Phrasing, "phrasing", _phrasing),
    (FileFormat, "file format", _file_format),
    (ImportMode, "import mode", _import_mode),
    (Pass, "pass", _pass),
]
LIBRARY_IDS = [f"{kind.__name__}-{i}" for i, (kind, *_) in enumerate(LIBRARY)]


@pytest.mark.parametrize("kind,what,setting", LIBRARY, ids=LIBRARY_IDS)
def test_every_member_round_trips_through_the_library_setting(kind, what, setting):
    for member in kind:
        value = setting(member.value)
        assert value == member.value, (kind, member)
        if isinstance(value, StrEnum):
            assert value is member
    assert json.loads(json.dumps(setting(next(iter(kind)).value))) == next(iter(kind)).value  # stored as its name


@pytest.mark.parametrize("kind,what,setting", LIBRARY, ids=LIBRARY_IDS)
def test_an_unknown_name_in_the_library_gets_the_one_message(kind, what, setting):
    offered = OFFERED_RECALL_MODES if kind is RecallMode else [*kind, *PARAMETRIC_BOUNDARIES] if kind is Boundary \
        else list(kind)
    with pytest.raises(ValueError, match=f"^{message(what, 'nope', offered)}$"):
        setting("nope")


def test_a_stored_setting_reads_back_as_its_member():
    config = PagingConfig.from_dict(json.loads(json.dumps(PagingConfig(eviction="lru", keywords="tfidf").to_dict())))
    assert config.eviction is Eviction.LRU and config.keywords is KeywordStrategy.TFIDF
    assert config.bookmark_format is BookmarkFormat.MINIMAL


def test_the_one_message_is_written_in_one_place():
    """No module spells out its own "unknown X 'x'; use one of" any more: they all call core.choices."""
    own = re.compile(r"unknown .*use one of|f\"unknown [a-z ]+\{[^}]*!r\}")
    spelled = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if own.search(p.read_text(encoding="utf-8")) and p.name != "choices.py")
    assert spelled == [], spelled


def test_an_unknown_backend_gets_the_one_message():
    from localpager.backends import BackendError, available_backends, load_backend

    with pytest.raises(BackendError, match=f"^{message('backend', 'nope', sorted(available_backends()))}$"):
        load_backend("nope")


# -- the trace speaks the settings' words ----------------------------------------------------------
def test_the_trace_names_a_trigger_as_its_setting_does():
    assert {Fired(t) for t in Trigger if t != Trigger.OFF} == {Fired.GATE, Fired.QUESTION}
    assert {f.value for f in Fired} - {t.value for t in Trigger} == {"none", "model", "forced", "selector", "personal"}
    assert Trace(0, "q").trigger is Fired.NONE


def test_the_selector_names_the_trigger_the_trace_repeats():
    from localpager.lab.selectors import lab_selector
    from localpager.retrieval.rerank import RerankSelector

    for trigger in Trigger:
        selector = lab_selector(index=None, conv_id="c", trigger=trigger)
        assert selector.trigger is trigger
    assert Fired(RerankSelector(index=None, conv_id="c").trigger) is Fired.GATE  # the product's trigger


# -- start-up stays light ------------------------------------------------------------------------------
def test_the_cli_help_imports_no_numpy_faiss_or_model_runtime():
    commands = ["--help"] + [f"{' '.join(path)} --help" for path, _ in walk(cli)]
    code = ("import sys\nfrom click.testing import CliRunner\nfrom localpager.cli import cli\n"
            f"for args in {commands!r}:\n"
            "    assert CliRunner().invoke(cli, args.split()).exit_code == 0, args\n"
            "print(sorted(m for m in ('numpy', 'faiss', 'llama_cpp', 'torch', 'bm25s', 'httpx', 'fastapi')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
