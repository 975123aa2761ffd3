"""The docs stay true: tables are what their data says, links resolve, and the README is a front door whose
commands exist and whose quickstart asks about what the data it makes really holds.

Figures are never typed into the current docs: ``make docs`` (``docs/tables.py``) writes every table from a
results file under ``docs/measurements/data/``; this test fails when running it would change anything.
``docs/measurements/history.md`` holds old figures and old commands, kept as measured: its links are
checked, its commands are not.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers import ROOT

from localpager.cli import cli

DOCS = ROOT / "docs"
README = ROOT / "README.md"
HISTORY = DOCS / "measurements" / "history.md"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
CURRENT = [p for p in PAGES if p != HISTORY]
README_LIMIT = 12_000  # bytes: "a README that is a front door (<= 12 KB)"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
TABLE = re.compile(r"<!-- table:.*?<!-- /table -->", re.S)


def tables():
    spec = importlib.util.spec_from_file_location("docs_tables", DOCS / "tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- generated tables ----------------------------------------------------------------------------------
def test_tables_are_what_their_data_says():
    t = tables()
    stale = [rel(p) for p in t.pages() if t.rewrite(p) != p.read_text(encoding="utf-8")]
    assert not stale, f"run `make docs`: {stale}"


def test_every_data_file_says_where_it_came_from_and_is_shown():
    t = tables()
    shown = " ".join(m.group(0) for p in PAGES for m in TABLE.finditer(p.read_text(encoding="utf-8")))
    for path in sorted(t.DATA.glob("*.json")):
        data = t.load(path.stem)
        assert data["kind"] in t.KINDS and data["commands"] and re.fullmatch(r"[0-9a-f]{7,40}", data["commit"])
        assert re.search(rf"data=[\w,-]*\b{re.escape(path.stem)}\b", shown), f"{rel(path)} is in no table"


def test_no_figure_typed_by_hand_into_the_current_docs():
    """A measured fraction (0.63) outside a generated table is a figure that can drift from its command."""
    for page in CURRENT:
        text = re.sub(r"`[^`\n]*`", "", TABLE.sub("", page.read_text(encoding="utf-8")))  # code: versions, settings
        found = re.findall(r"\b0\.\d\d+\b", text)
        assert not found, f"{rel(page)}: {found}: put figures in a generated table (docs/tables.py)"


def test_every_table_kind_renders_its_format():
    """Each renderer on a minimal results file of the shape its command writes (for kinds with no data yet)."""
    t = tables()
    samples = {
        "bench": {"p50_ms": {"paging": {"50": 470.0}}, "p95_ms": {"paging": {"50": 956.0}},
                  "evaluated_tokens_p50": {"paging": {"50": 51}}, "warm_answer_ms": 495.0,
                  "evictions": {"512": {"eviction_tokens_evaluated": 60, "eviction_tokens_full": 128}},
                  "rerank_ms": {"1000": 9.5}, "busy_ratio": 1.5},
        "faults": {"runs": 24, "turns_lost": 0, "forget_across_processes_leaks": 0,
                   "pathological_input_ms": {"ingest": 812.0}, "pathological_health_slowest_ms": 40.0},
        "recall-gate": {"ranking": [{"dataset": "generated", "split": "tuning", "group": "all", "probes": 72,
                                     "scores": {"chosen (priors)": [0.96, 0.99]}}],
                        "gate": {"rates": {"gate": {"generated/tuning/probe": 0.97, "generated/tuning/general": 0.02,
                                                    "generated/tuning/small talk": 0.5}}}},
        "bookmark-coverage": {"tuning/heuristic/chat": {"all": 0.92, "allergy": 1.0}},
        "threads": {"settings": {"1 / 1": {"p50_idle_ms": 480.1, "p50_busy_ms": 492.3, "busy_ratio": 1.03}}},
        "server-load": {"clients": 4, "requests": 103, "warm_p50_ms": 2290.0, "turns_lost": 0},
        "mcp-recall": {"latency": {"turns": 3200, "warm_ms": {"p50": 33.5, "p95": 435.3}},
                       "heldout": {"probes": 65, "recall_first_is_evidence": 0.77}},
        "replicas": {"many_replicas": {"replicas": 3, "killed": True, "requests": 32, "p50_ms": 5761.2,
                                       "turns_acknowledged": 64, "turns_lost": 0, "order_violations": 0},
                     "one_replica": {"replicas": 1, "killed": False}},
        "embed-speed": {"configurations": {"before": {"heldout_1024": {"turns_per_s": 703.0},
                                                      "distinct": {"turns_per_s": 261.6, "turns_per_cpu_s": 131.9}}},
                        "chosen": "before", "cores": 2, "free_cores": 1, "load_average": 1.6},
        "ingest-speed": {"ingest": {"locomo": {"now": {"turns": 5882, "turns_per_s": 20.0, "wall_s": 299.0,
                                                      "paged_s": 23.0, "cpu_s": 33.0, "free_cores": 1,
                                                      "load_average": 4.5}}},
                         "cosine": {"stored_locomo": {"n": 400, "min": 1.0, "mean": 1.0}}},
        "scale": {"machine": {"load_before": 1.7}, "lengths": {"1000": {"ingest_s": 3.5, "ingest_turns_per_s": 287.0,
                                                                       "peak_rss_mb": 512.0, "rank_ms_p50": 18.2}}},
        "standing-facts": {"extraction": {"statements_dev": {"chat": {"recall": 0.9, "precision": 0.99, "kind": 0.86}},
                                          "statements_heldout": {"chat": {"recall": 0.65, "precision": 0.96, "kind": 0.85}},
                                          "generated": {"dev": {"found": 0.94, "planted": 175, "superseded": 0.46,
                                                                "corrections": 33}}},
                           "fact_model": {"shipped": {"generated/dev/implicit": {"n": 142, "rate": 0.52}}}},
        "fact-pairs": {"alone": {"generated/held-out/implicit": {"n": 133, "rate": 0.42}},
                       "shipped": {"generated/held-out/implicit": {"n": 133, "rate": 0.71}},
                       "never_told_shipped": {"held-out/absent": {"n": 80, "rate": 0.26}}},
        "abstention": {"rates": {"shipped": {"generated/dev/absent": {"n": 80, "not_remembered": 0.31}},
                                 "shipped, paged in": {"generated/dev/absent": {"n": 51, "not_remembered": 0.2}}}},
        "heldout-kinds": {"setup": {"conversations": 6},
                          "extraction": {"held-out kinds": {"planted": 50, "recall": 0.48, "newest_value": 0.11}},
                          "relevance": {"held-out kinds": {"explicit": {"its_fact": 0.22, "another_fact": 0.05}}}},
        "import-memory": {"setup": {"people": 2, "turns": 100, "parts": 3, "phrasing": "heldout"},
                          "chatgpt": {"conversations": 6, "conversations_exact": 6, "abandoned_texts": 18,
                                      "abandoned_in_store": 0, "turns": 204, "turns_again": 0,
                                      "facts": {"planted": 15, "held": 13, "held_rate": 0.87, "changed": 3, "newest": 3,
                                                "old_still_current": 1},
                                      "yesterday": {"asked": 2, "right": 2},
                                      "answers": {"probes": 15, "e2e_accuracy": 0.73, "latest_value_rate": 0.67},
                                      "damaged": {"exit": 1, "stderr_lines": 1, "traceback": False, "turns_stored": 0},
                                      "bar": {"e2e": True}},
                          "plain_ingest_facts": {"planted": 15, "held": 13, "changed": 3, "newest": 3,
                                                 "old_still_current": 1},
                          "seconds": 20, "load_average": 2.9},
        "import-speed": {"size_mb": 200.1, "jsonl_mb": 150.2, "bar_met": True,
                         "export": {"conversations": 9000, "turns": 270000, "wall_s": 600.0, "turns_per_s": 450,
                                    "baseline_mb": 120, "peak_above_baseline_mb": 180, "load_average": 2.1}},
        "user-scale": {"conversations": 5, "turns": 200, "no_model": True,
                       "machine": {"cores": 2, "load_before": 2.0, "load_after": 2.5},
                       "measured": {"first_answer": {
                           "all": {"nobody_ms": {"p50": 30.0, "p95": 40.0}, "user_ms": {"p50": 60.0, "p95": 90.0},
                                   "ratio_p50": 2.0},
                           "nobody_outside_model_ms": {"p50": 30.0, "p95": 40.0},
                           "user_outside_model_ms": {"p50": 60.0, "p95": 90.0}, "added_ms_p50": 30.0,
                           "outside_model_ratio": 1.05, "prompt_tokens_p50": {"nobody": 40, "user": 120}},
                           "across_ms": {"p50": 1.2, "p95": 8.0}, "selector_ms": {"p50": 0.6, "p95": 70.0},
                           "rank_ms": {"p50": 19.5, "p95": 70.0}, "rank_after_change_ms": {"p50": 34.0, "p95": 48.0},
                           "ranked_turns": 1020, "facts": 42},
                       "cold": {"runs": [], "nobody_ms_p50": 420.0, "user_ms_p50": 3000.0},
                       "targets": {"outside_model_ratio<=1.1": True, "rank_ms_p50<=50": True}},
        "new-chat": {"empty/advice": {"n": 50, "not_remembered": 0.42, "paths": {"none/answer": 29}},
                     "told/personal": {"n": 41, "not_remembered": 0.68, "paths": {"gate/unknown": 28}}},
    }
    for kind, (want, renderer) in t.RENDERERS.items():
        if want == "eval":
            continue  # rendered from the real data files
        data = {"name": kind, "kind": want, "label": kind, "commands": ["x"], "commit": "abc1234", "measured": "",
                "result": samples[want]}
        lines = renderer([data]).splitlines()
        assert lines[0].startswith("| ") and len(lines) >= 3, kind


def cli_reference():
    spec = importlib.util.spec_from_file_location("docs_cli_reference", DOCS / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_what_the_commands_say():
    """docs/cli.md is written from the click objects (``make docs``); every command and group is in it."""
    ref = cli_reference()
    assert ref.render() == (DOCS / "cli.md").read_text(encoding="utf-8"), "run `make docs`"
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    for path, command in ref.commands(cli):
        heading = f"## `{' '.join(path)}`\n"
        assert heading in text, f"docs/cli.md has no {heading.strip()}"
        section = text[text.index(heading):].split("\n## ")[0]
        for param in command.params:
            if isinstance(param, click.Option):
                assert all(name in section for name in param.opts), (path, param.opts)
    assert "Experiment options:" in text[text.index("## `localpager eval`"):]


# -- the architecture page ------------------------------------------------------------------------------
def test_the_layers_page_names_every_module_of_the_tree():
    """docs/how-it-works.md's "The layers" lists each folder's rooms: every module of ``localpager/`` (but the
    package faces, ``__init__.py``, and ``__main__.py``) is named under its layer, and nothing it names is gone."""
    text = (DOCS / "how-it-works.md").read_text(encoding="utf-8")
    section = text[text.index("## The layers"):text.index("\n## ", text.index("## The layers") + 1)]
    rooms = {}
    for line in section.split("- **")[1:]:
        layer, _, rest = line.partition("**")
        rooms[layer] = set(re.findall(r"`([\w/]+\.py)`", rest))
    package = ROOT / "localpager"
    for folder in sorted(p for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        modules = {m.relative_to(folder).as_posix() for m in folder.rglob("*.py")
                   if m.name not in ("__init__.py", "__main__.py")}
        named = rooms.get(folder.name, set()) - {"__init__.py"}
        assert modules == named, f"{folder.name}: not named {sorted(modules - named)}, gone {sorted(named - modules)}"


# -- links ---------------------------------------------------------------------------------------------
def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        s = slug(heading)
        found.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return found


def links(page: Path):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_link_between_pages_resolves(page):
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not ours
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{rel(page)}: {target}: no such file"
        if anchor:
            assert dest.suffix == ".md" and anchor in anchors(dest), f"{rel(page)}: {target}: no such heading"


# -- the README ----------------------------------------------------------------------------------------
def test_the_readme_is_a_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= README_LIMIT, f"README.md is {len(text.encode())} bytes; the rest goes to docs/"
    first = FENCE.search(text)
    commands = [line.split("#")[0].strip() for line in first.group(2).splitlines()]
    assert text.index(first.group(0)) < 200 and commands == ["make demo", "make test"]
    targets = {t.partition("#")[0] for t in links(README)}
    for page in ("usage", "cli", "memory", "serving", "backends", "how-it-works", "measurements", "development"):
        assert f"docs/{page}.md" in targets, f"the README links to no docs/{page}.md"
    assert "docs/memory.md#forget-something" in links(README)  # forgetting is one click away


# -- commands shown in the current docs exist ----------------------------------------------------------
def shell_lines(page: Path):
    """Each command line of the page's shell blocks (``$ `` lines of console blocks), continuations joined."""
    for lang, body in FENCE.findall(page.read_text(encoding="utf-8")):
        if lang not in ("", "sh", "bash", "console"):
            continue
        body = body.replace("\\\n", " ")
        for line in body.splitlines():
            if lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            yield line


def localpager_args(line: str) -> list[str] | None:
    """The arguments of the ``localpager`` call on ``line``, or None when it calls something else."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        words.pop(0)
    if not words or not (words[0] == "localpager" or words[0].endswith("/localpager")):
        return None
    args = []
    for w in words[1:]:
        if w in ("|", "||", "&&", ";", ">", "2>&1") or w.startswith(("2>", ">")):
            break
        args.append(w)
    return args


def takes_value(param: click.Parameter) -> bool:
    return isinstance(param, click.Option) and not param.is_flag and not param.count


def check_options(args: list[str], params: list[click.Parameter], where: str,
                  stop_at_positional: bool = False) -> list[str]:
    """Walk ``args`` against ``params``; return the positional words (or the first one, with
    ``stop_at_positional``). Fails on an unknown option."""
    by_name = {o: p for p in params for o in (*p.opts, *p.secondary_opts)} | {"--help": None, "-h": None}
    positional, i = [], 0
    while i < len(args):
        word = args[i]
        if word.startswith("-") and len(word) > 1:
            name = word.split("=", 1)[0]
            assert name in by_name, f"{where}: no option {name}"
            if by_name[name] is not None and takes_value(by_name[name]) and "=" not in word:
                i += 1
        else:
            positional.append(word)
            if stop_at_positional:
                break
        i += 1
    return positional


@pytest.mark.parametrize("page", CURRENT, ids=rel)
def test_every_localpager_command_and_option_shown_exists(page):
    for line in shell_lines(page):
        args = localpager_args(line)
        if args is None:
            continue
        where = f"{rel(page)}: `{line.strip()}`"
        # a group's options come before its command; the command's own (and --store, --key-env) after it
        command, rest = cli, args
        while isinstance(command, click.Group):
            positional = check_options(rest, command.params, where, stop_at_positional=True)
            if not positional:
                break
            name = positional[0]
            assert name in command.commands, f"{where}: no command {name!r}"
            command, rest = command.commands[name], rest[rest.index(name) + 1:]
        else:
            check_options(rest, command.params, where)


@pytest.mark.parametrize("page", CURRENT, ids=rel)
def test_every_file_the_docs_name_exists(page):
    text = page.read_text(encoding="utf-8")
    for path in sorted(set(re.findall(r"(?<![\w./~-])((?:benchmarks|tests|localpager|docs)/[\w./-]*\w)", text))):
        assert (ROOT / path).exists(), f"{rel(page)} names {path}, which does not exist"


# -- the quickstart asks about what its data holds -----------------------------------------------------
def quickstart() -> list[tuple[list[str], list[str]]]:
    """The README's first run block: each command's arguments and the output the README shows for it."""
    block = re.search(r"<!-- run -->\n```console\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    steps = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((localpager_args(line[2:]), []))
        else:
            steps[-1][1].append(line)
    return steps


def test_the_quickstart_asks_about_what_the_data_it_makes_holds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    steps = quickstart()
    generate = next((args, out) for args, out in steps if args[:2] == ["lab", "generate"])
    result = CliRunner().invoke(cli, generate[0])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == generate[1], "the README shows another output of its generate"
    conversations = {}
    for line in Path(generate[0][2]).read_text(encoding="utf-8").splitlines():
        conv = json.loads(line)
        conversations[conv["id"]] = [t["text"] for t in conv["turns"]]
    for args, out in steps:
        if args[0] in ("lab", "ingest"):
            continue
        conv_id = next(a for a in args[1:] if not a.startswith("-"))
        assert conv_id in conversations, f"the quickstart's {args[0]} names {conv_id}, which generate does not make"
        if "--match" in args:
            word = args[args.index("--match") + 1].lower()
            assert any(word in t.lower() for t in conversations[conv_id]), f"no turn of {conv_id} holds {word!r}"
        for line in out:  # a citation must quote the turn it names (a standing fact: the sentence of it that states it)
            if m := re.match(r"\s*from memory: p\d+ turn (\d+) \w+: (.*?)(?: \((?:standing fact|latest|changed later)\))?$",
                             line):
                assert m.group(2).rstrip("…") in conversations[conv_id][int(m.group(1))], line


# -- the words of the docs are the code's --------------------------------------------------------------
def test_the_choices_table_lists_every_offered_name():
    """docs/usage.md's choices table names every member of every enum the CLI offers, in backticks."""
    from localpager.backends.choices import ConstraintFormat
    from localpager.core.choices import BookmarkFormat, Boundary, Eviction, KeywordStrategy
    from localpager.lab.choices import BELADY, EvalStrategy, Phrasing, RetrieverName
    from localpager.memory.choices import ImportMode
    from localpager.retrieval.choices import PageChoice, Signal
    from localpager.runtime.choices import OFFERED_RECALL_MODES, Layout, Trigger
    from localpager.store.choices import FileFormat

    text = (DOCS / "usage.md").read_text(encoding="utf-8")
    table = text[text.index("## Choices"):]
    offered = [*Boundary, *Eviction, BELADY, *KeywordStrategy, *BookmarkFormat, *FileFormat, *ImportMode,
               *OFFERED_RECALL_MODES, *Layout, *Trigger, *PageChoice, *Signal, *EvalStrategy, *RetrieverName,
               *Phrasing, *ConstraintFormat]
    missing = sorted({str(name) for name in offered if f"`{name}`" not in table})
    assert not missing, f"docs/usage.md#choices lacks {missing}"
    assert "`selector`" not in table, "the internal recall mode is not offered"


def test_the_trace_table_names_every_trigger_a_trace_can_say():
    from localpager.runtime.choices import Fired

    text = (DOCS / "how-it-works.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `trigger` |"))
    missing = [f.value for f in Fired if f"`{f.value}`" not in row]
    assert not missing, f"docs/how-it-works.md's trace table lacks the trigger values {missing}"
