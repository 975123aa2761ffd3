"""The docs' tables of figures, generated from results JSON so they cannot drift from the command.

Each figure in the docs comes from a JSON file under ``docs/measurements/data/``: the output of a command
(``localpager eval --json``, ``localpager bench --json``, ``benchmarks/*.py --json``) wrapped with the
commands that made it and the commit it was measured on. A table lives between two markers in a Markdown
file; this script rewrites what is between them:

    <!-- table:eval-summary data=eval-heldout-1024,eval-heldout-1024-question -->
    (generated: the commands, the table, where and when it was measured)
    <!-- /table -->

    python docs/tables.py            # rewrite every table (make docs)
    python docs/tables.py --check    # exit 1 if a table is not what the data says (the fast test)
    python docs/tables.py add results/eval-heldout-1024.json --kind eval --commit 1ceca01 \\
        --label "held-out phrasings, budget 1024" \\
        --command "localpager eval results/gen-heldout.jsonl --budget 1024 --json results/eval-heldout-1024.json"
    .venv/bin/python docs/tables.py examples [--check]   # make docs-examples: rerun the README's examples

``add`` copies a results file as it is (less its per-probe or per-request rows) with its provenance; a
table names the files it shows.

``examples`` runs the README's examples as written, in order, in one empty folder, and writes their real
output back: a block between ``<!-- run -->`` and ``<!-- /run -->`` is either a ``console`` fence (lines
``$ command``, each followed by its output) or a ``python`` fence followed by a ``text`` fence (its output).
It needs the models (``make setup``); the tables need nothing but this file. Stdlib only.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
DATA = DOCS / "measurements" / "data"
MARKER = re.compile(r"(<!-- table:(?P<kind>[a-z0-9-]+)(?P<args>[^>]*?)-->\n)(?P<body>.*?)(<!-- /table -->)", re.S)
# per-item rows a results file carries beside its summary; the docs show summaries only
# (a dotted key is one inside another: ``chatgpt.answers.rows``)
DETAIL_KEYS = {"eval": ("results",), "bench": ("turns",), "server-load": ("requests_detail",),
               "mcp-recall": ("heldout_rows",), "import-memory": ("chatgpt.answers.rows", "claude.answers.rows"),
               "new-chat": tuple(f"{chat}/{kind}.answers" for chat in ("empty", "told", "said")
                                 for kind in ("advice", "personal"))}
KINDS = ("eval", "bench", "faults", "recall-gate", "bookmark-coverage", "threads", "server-load", "mcp-recall",
         "replicas", "embed-speed", "ingest-speed", "scale", "standing-facts", "abstention", "heldout-kinds",
         "import-memory", "import-speed", "user-scale", "fact-pairs", "new-chat")


# -- data ----------------------------------------------------------------------------------------------
def load(name: str) -> dict:
    path = DATA / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"{path.relative_to(ROOT)}: no such data file (python docs/tables.py add ... --name {name})")
    data = json.loads(path.read_text(encoding="utf-8"))
    for key in ("kind", "commands", "commit", "result"):
        if key not in data:
            raise SystemExit(f"{path.relative_to(ROOT)}: no {key!r} (write data files with `tables.py add`)")
    data["name"] = name
    return data


def add(args: argparse.Namespace) -> None:
    result = json.loads(Path(args.file).read_text(encoding="utf-8"))
    dropped = []
    for key in DETAIL_KEYS.get(args.kind, ()):
        *path, last = key.split(".")
        holder = _dig(result, path) if path else result
        if isinstance(holder, dict) and last in holder:
            del holder[last]
            dropped.append(key)
    commit = subprocess.run(["git", "rev-parse", "--short", args.commit], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    measured = args.measured or _dt.datetime.fromtimestamp(Path(args.file).stat().st_mtime, _dt.timezone.utc).strftime("%Y-%m-%d")
    data = {"kind": args.kind, "label": args.label or Path(args.file).stem, "commands": args.command,
            "commit": commit, "measured": measured, "machine": args.machine, "note": args.note,
            "source": str(args.file), "dropped": dropped, "result": result}
    if args.metric:
        data["metric"] = args.metric
    DATA.mkdir(parents=True, exist_ok=True)
    out = DATA / f"{args.name or Path(args.file).stem}.json"
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")


# -- formatting ----------------------------------------------------------------------------------------
def frac(v) -> str:
    return "–" if v is None else f"{v:.2f}"


def ms(v) -> str:
    return "–" if v is None else f"{v:,.0f}"


def table(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def provenance(datas: list[dict], page: Path) -> tuple[str, str]:
    """The commands (each once, in order) and where each file was measured, linked from ``page``."""
    commands = []
    for d in datas:
        commands += [c for c in d["commands"] if c not in commands]
    rel = lambda d: Path(os.path.relpath(DATA / f"{d['name']}.json", page.parent)).as_posix()
    groups: dict[tuple, list[str]] = {}
    for d in datas:
        key = (d["commit"], d["measured"], d.get("machine") or "", d.get("note") or "")
        groups.setdefault(key, []).append(f"[{d['name']}]({rel(d)})")
    where = "; ".join(
        f"{', '.join(files)}: commit {commit}, {measured}" + (f", {machine}" if machine else "")
        + (f" ({note})" if note else "")
        for (commit, measured, machine, note), files in groups.items())
    return "```sh\n" + "\n".join(commands) + "\n```\n\n", f"Data {where}."


# -- renderers: one per table kind, each (data files) -> Markdown ----------------------------------------
def eval_summary(datas: list[dict]) -> str:
    rows = []
    for d in datas:
        r = d["result"]
        lat = r.get("latency_ms") or {}
        rows.append([d["label"], r.get("probes"), frac(r.get("e2e_accuracy")), frac(r.get("oracle_e2e_accuracy")),
                     frac(r.get("page_selection_accuracy")), frac(r.get("recall_precision")),
                     frac(r.get("general_recall_rate")), frac(r.get("latest_value_rate")),
                     frac(r.get("bookmark_fact_coverage")), frac(r.get("repeated_answer_rate")),
                     f"{ms(lat.get('p50'))} / {ms(lat.get('p95'))}"])
    return table(["run", "probes", "e2e", "oracle", "page selection", "recall precision",
                  "general questions paged in", "latest value", "bookmark fact coverage", "repeated answers",
                  "p50 / p95 ms"], rows)


def eval_by_type(datas: list[dict]) -> str:
    (d,) = datas
    r, metric = d["result"], d.get("metric", "accuracy")
    rows = [[f"{name}", t.get("probes"), frac(t.get("e2e_accuracy")), frac(t.get("oracle_e2e_accuracy")),
             frac(t.get("page_selection_accuracy")), frac(t.get("recall_triggered"))]
            for name, t in sorted((r.get("by_type") or {}).items())]
    rows.append(["**all**", r.get("probes"), frac(r.get("e2e_accuracy")), frac(r.get("oracle_e2e_accuracy")),
                 frac(r.get("page_selection_accuracy")), frac(r.get("recall_triggered"))])
    return table(["type", "probes", f"e2e {metric}", f"oracle {metric}", "page selection", "recall triggered"], rows)


def bench_latency(datas: list[dict]) -> str:
    (d,) = datas
    r = d["result"]
    lengths = list((r.get("p50_ms") or {}).get("paging", {}))
    names = {"paging": "paging (localpager)", "truncation": "truncation (same budget)", "full": "full context"}
    rows = [[names.get(s, s)] + [f"{ms(r['p50_ms'][s].get(n))} / {ms(r['p95_ms'][s].get(n))}" for n in lengths]
            + [" / ".join(ms(v) for v in (r.get("evaluated_tokens_p50") or {}).get(s, {}).values())]
            for s in r.get("p50_ms", {})]
    return table(["strategy"] + [f"{int(n):,} turns p50 / p95 ms" for n in lengths] + ["tokens evaluated (p50)"], rows)


def bench_figures(datas: list[dict]) -> str:
    """One column per run (e.g. ``bench --quick`` and ``bench --quick --warm``)."""
    columns = [_bench_figures(d["result"]) for d in datas]
    names = [name for name, _ in columns[0]]
    rows = [[name] + [dict(c).get(name, "–") for c in columns] for name in names]
    return table(["figure"] + [d.get("label") or d["name"] for d in datas], rows)


def _bench_figures(r: dict) -> list[tuple[str, str]]:
    rerank = r.get("rerank_ms") or {}
    evictions = r.get("evictions") or {}
    rows = [("warm answer, p50 ms", ms(r.get("warm_answer_ms"))),
            ("paging's p50 turn / truncation's (`paging_vs_truncation_p50`)", frac(r.get("paging_vs_truncation_p50"))),
            ("p95 ms after each run's first answer / with it",
             f"{ms(r.get('p95_ms_after_first'))} / {ms(r.get('p95_ms_with_first'))}"),
            ("each run's first answer, ms (p50 over lengths) / all turns' p50 (`first_vs_p50`)",
             f"{ms(r.get('first_answer_ms'))} / {frac(r.get('first_vs_p50'))}"),
            ("a new process's first answer from memory, ms", ms(r.get("cold_first_answer_ms"))),
            ("small talk in a new process, without / with the saved KV cache, ms",
             f"{ms((r.get('cold_small_talk_ms') or {}).get('unsaved'))} / {ms((r.get('cold_small_talk_ms') or {}).get('resumed'))}")]
    for budget, e in evictions.items():
        rows.append((f"tokens evaluated on eviction turns at budget {budget} (p50), against a full re-read",
                     f"{ms(e.get('eviction_tokens_evaluated'))} / {ms(e.get('eviction_tokens_full'))}"))
    rows += [("ratio to the hardware floor, median turn", frac(r.get("ratio_to_floor"))),
             ("flatness (paging p50 at the longest / shortest length)", frac(r.get("flatness"))),
             ("rerank at " + " / ".join(f"{int(k):,}" for k in rerank) + " bookmarks, ms",
              " / ".join(f"{(v.get('total_ms') if isinstance(v, dict) else v):.1f}" for v in rerank.values())),
             ("`localpager --help`, ms", ms(r.get("help_ms"))),
             ("peak RSS of the chat workload, MB", ms(r.get("peak_rss_mb"))),
             ("busy_ratio (p50 beside one busy process / idle)", frac(r.get("busy_ratio")))]
    return rows


FAULT_ROWS = (
    ("runs", "kill runs (ingest, ask+maintain, maintain, add)"), ("kills", "killed mid-run (SIGKILL)"),
    ("turns_acknowledged", "turns acknowledged"), ("turns_lost", "turns lost"),
    ("integrity_failures", "integrity failures"), ("index_rebuilds", "index rebuilds"),
    ("concurrent_writers", "concurrent writers"), ("concurrent_turns", "turns written concurrently"),
    ("lost_writes", "lost writes"), ("writer_errors", "writer errors"),
    ("fuzz_cases", "fuzz cases"), ("fuzz_failures", "fuzz failures"),
    ("forget_across_processes_runs", "forgets while another process holds the conversation"),
    ("forget_across_processes_leaks", "files holding the secret afterwards (leaks)"),
    ("retry_cases", "requests retried on a real server"), ("duplicate_turns_on_retry", "turns stored twice by a retry"),
    ("faiss_write_back_runs", "FAISS saves deferred past another process's forget"),
    ("faiss_write_back_leaks", "FAISS files holding the forgotten vector afterwards (leaks)"),
    ("damaged_files_cases", "damaged or foreign files beside the store (FAISS, BM25, KV)"),
    ("damaged_files_crashes", "crashes on them"), ("damaged_files_wrong_results", "wrong results from them"),
    ("damaged_files_kv_loaded", "damaged KV caches handed to llama.cpp"),
    ("import_refused", "crafted imports (vectors of another width) refused"),
    ("import_breaks_others", "other conversations broken by them"),
    ("history_match_server_match_ms", "839 KB history against 24,000 stored turns: matching it, ms"),
    ("history_match_ms_782kb", "the same request, answered (refused history), ms"),
    ("history_match_other_ms", "another conversation's request meanwhile, ms"),
    ("history_match_other_alone_ms", "that request alone, ms"),
    ("cors_null_without_key_served", "`--cors-origin null` served without a key"),
    ("mcp_token_across_processes_erased", "MCP forget previewed in one process, confirmed in another: erased"),
    ("mcp_token_across_processes_leaks", "files holding its text afterwards (leaks)"),
    ("mcp_token_replays_accepted", "its token accepted a second time"),
    ("pins_150_ask_failed", "150 pinned facts (an older store's): asks that failed"),
    ("pin_past_room_refused", "a pin past the facts' share of the budget refused in one line"),
    ("fact_id_2_63_status", "a fact id of 2^63 pinned over HTTP: status"),
    ("big_ids_not_4xx", "ids past 2^63 on the memory endpoints not answered with a 4xx"),
    ("fact_lines_forged", "fact lines forged by line breaks and bidi controls"),
    ("mcp_recall_forgotten_turns", "forgotten turns in MCP's recall after another process's forget"),
)


def faults(datas: list[dict]) -> str:
    (d,) = datas
    r = d["result"]
    rows = [[label, f"{r[key]:,}"] for key, label in FAULT_ROWS if r.get(key) is not None]
    rows += [[f"1 MB without a space through {path}, ms", ms(v)] for path, v in (r.get("pathological_input_ms") or {}).items()]
    if "pathological_health_slowest_ms" in r:
        rows.append(["slowest `/health` meanwhile, ms", ms(r["pathological_health_slowest_ms"])])
    load = r.get("load_average_1min")
    note = f"\n\nLoad average {load} on 2 cores during the history request." if load is not None else ""
    return table(["what", "value"], rows) + note


def recall_gate(datas: list[dict]) -> str:
    (d,) = datas
    rates = ((d["result"].get("gate") or {}).get("rates")) or {}
    columns = sorted({k.rsplit("/", 1)[0] for r in rates.values() for k in r},
                     key=lambda k: (k.split("/")[1] == "held-out", k))
    kinds = ("probe", "general", "small talk")
    rows = [[rule] + [" / ".join(frac(r.get(f"{c}/{k}")) for k in kinds) for c in columns] for rule, r in rates.items()]
    return table(["rule"] + [f"{c}: probes / general / small talk" for c in columns], rows)


def recall_gate_ranking(datas: list[dict]) -> str:
    (d,) = datas
    ranking = d["result"].get("ranking") or []
    names = list(ranking[0]["scores"]) if ranking else []
    rows = [[f"{r['dataset']} {r['split']}", r["group"], r["probes"]]
            + [" / ".join(frac(v) for v in r["scores"][n]) for n in names] for r in ranking]
    return table(["set", "group", "probes"] + [f"{n}: top-1 / top-3" for n in names], rows, right_from=2)


def bookmark_coverage(datas: list[dict]) -> str:
    (d,) = datas
    rows = []
    for key, r in d["result"].items():
        phrasing, strategy, path = key.split("/")
        rows.append([phrasing, strategy, path, frac(r.get("all")),
                     ", ".join(f"{k} {frac(v)}" for k, v in r.items() if k != "all")])
    return table(["phrasing", "keywords", "paged as", "facts covered", "by type"], rows, right_from=3)


def threads(datas: list[dict]) -> str:
    (d,) = datas
    rows = [[name, ms(r.get("p50_idle_ms")), ms(r.get("p50_busy_ms")), frac(r.get("busy_ratio"))]
            for name, r in d["result"].get("settings", {}).items()]
    return table(["threads (generation / prompt)", "p50 idle ms", "p50 beside a busy process ms", "busy_ratio"], rows)


def server_load(datas: list[dict]) -> str:
    rows = []
    for d in datas:
        r = d["result"]
        rows.append([r.get("clients"), r.get("requests"), ms(r.get("cold_first_request_ms")),
                     f"{ms(r.get('warm_p50_ms'))} / {ms(r.get('warm_p95_ms'))}",
                     f"{ms(r.get('warm_server_p50_ms'))} / {ms(r.get('warm_server_p95_ms'))}",
                     ms(r.get("stream_first_token_p50_ms")), r.get("recalls"), r.get("turns_lost")])
    return table(["clients", "requests", "first request ms", "p50 / p95 ms", "server's answer p50 / p95 ms",
                  "first streamed token p50 ms", "recalls", "turns lost"], rows, right_from=0)


def mcp_recall(datas: list[dict]) -> str:
    (d,) = datas
    lat, held = d["result"].get("latency") or {}, d["result"].get("heldout") or {}
    both = lambda s: f"{ms((s or {}).get('p50'))} / {ms((s or {}).get('p95'))}"
    rows = [[f"first recall on a store never searched (it embeds the {lat.get('turns', 0):,} turns), ms",
             ms(lat.get("first_recall_ever_ms"))],
            ["a new process to its first recall, p50 / p95 ms", both(lat.get("new_process_to_first_recall_ms"))],
            ["of which start and handshake, p50 / p95 ms", both(lat.get("new_process_ready_ms"))],
            ["a new process pinned to the conversation (`--conversation`), p50 / p95 ms",
             both(lat.get("pinned_new_process_to_first_recall_ms"))],
            ["a recall in a warm process, p50 / p95 ms", both(lat.get("warm_ms"))],
            ["the library's own `recall` in one process, p50 / p95 ms", both(lat.get("library_warm_ms"))],
            [f"held-out probes ({held.get('probes')}): `recall`'s first turn is the evidence",
             frac(held.get("recall_first_is_evidence"))],
            ["the first turn `ask` injects is the evidence", frac(held.get("ask_first_injected_is_evidence"))],
            ["`ask` paged something in", frac(held.get("ask_paged_in"))],
            ["the same first turn, where `ask` paged something in", frac(held.get("same_first_turn_when_ask_paged_in"))],
            [f"general questions ({held.get('general_questions')}): `recall` calls memory relevant / `ask` paged in",
             f"{frac(held.get('recall_relevant_on_general'))} / {frac(held.get('ask_paged_in_on_general'))}"]]
    return table(["figure", "value"], rows)


def replicas(datas: list[dict]) -> str:
    (d,) = datas
    rows = []
    for run in ("many_replicas", "one_replica"):
        r = d["result"].get(run) or {}
        rows.append([r.get("replicas"), "yes" if r.get("killed") else "no", r.get("clients"), r.get("requests"),
                     r.get("retried_requests"), f"{ms(r.get('p50_ms'))} / {ms(r.get('p95_ms'))}",
                     r.get("turns_acknowledged"), r.get("turns_lost"), r.get("order_violations"),
                     f"{r.get('cross_namespace_reads')} of {r.get('cross_namespace_attempts')}"])
    return table(["replicas", "one killed", "clients", "requests", "sent again", "p50 / p95 ms", "turns acknowledged",
                  "turns lost", "out of order", "reads across namespaces"], rows, right_from=0)


def embed_speed(datas: list[dict]) -> str:
    (d,) = datas
    r = d["result"]
    rows = [[f"{name} (the default here)" if name == r.get("chosen") else name,
             f"{c['heldout_1024']['turns_per_s']:,.0f}", f"{c['distinct']['turns_per_s']:,.0f}",
             f"{c['distinct']['turns_per_cpu_s']:,.0f}"] for name, c in r.get("configurations", {}).items()]
    rows.append(["sentence-transformers on torch (the reference)", f"{r.get('sentence_transformers_heldout_turns_per_s', 0):,.0f}",
                 "", ""])
    note = (f"\n\n{r.get('heldout_turns')} held-out turns ({r.get('heldout_distinct')} distinct) and "
            f"{r.get('distinct_turns')} distinct turns; the default ran on {r.get('free_cores')} of "
            f"{r.get('cores')} cores (load average {r.get('load_average', 0):.1f}).")
    return table(["configuration", "held-out turns/s", "distinct turns/s", "distinct turns per CPU s"], rows) + note


def ingest_speed(datas: list[dict]) -> str:
    """``benchmarks/ingest_speed.py``: ingest with embedding, before and now, on LoCoMo and generated text, and
    the stored vectors' cosine to the reference encoder."""
    (d,) = datas
    r = d["result"]
    names = {"locomo": "LoCoMo (real text)", "generated": "generated, held-out phrasings (filler repeats)"}
    rows = [[names.get(source, source), way, f"{row['turns']:,}", f"{row['turns_per_s']:,.0f}", f"{row['wall_s']:,.0f}",
             f"{row['paged_s']:,.0f}", f"{row['cpu_s']:,.0f}", f"{row['free_cores']:.0f}", f"{row['load_average']:.1f}"]
            for source, ways in r.get("ingest", {}).items() for way, row in ways.items()]
    cosine = r.get("cosine") or {}
    said = {"stored_locomo": "vectors stored for LoCoMo", "every_locomo_turn": "every LoCoMo turn"}
    note = "\n\nCosine to sentence-transformers (the reference): " + "; ".join(
        f"{said.get(k, k)} ({c['n']:,} of them): min {c['min']:.4f}, mean {c['mean']:.4f}" for k, c in cosine.items()) + "."
    return table(["text", "way", "turns", "turns/s", "wall s", "of it paging s", "CPU s of the process",
                  "encoder threads", "load average"], rows, right_from=2) + note


def scale(datas: list[dict]) -> str:
    (d,) = datas
    rows = []
    for n, r in sorted(d["result"].get("lengths", {}).items(), key=lambda kv: int(kv[0])):
        extra = r.get("extra") or {}
        real = extra.get("real_text") or {}
        rows.append([f"{int(n):,}", f"{r.get('ingest_s')} s", f"{r.get('ingest_turns_per_s', 0):,.0f}",
                     f"{extra.get('distinct_texts', 0):,}",
                     f"{real['ingest_turns_per_s']:,.0f}" if real else "–", f"{r.get('store_mb')}",
                     f"{r.get('peak_rss_mb'):,.0f}", f"{r.get('rank_ms_p50')} / {r.get('rank_ms_p95')}",
                     f"{ms(r.get('answer_ms_p50'))} / {ms(r.get('answer_ms_p95'))}", ms(r.get("cold_first_answer_ms")),
                     f"{frac(r.get('page_selection'))} of {r.get('questions')}"])
    load = (d["result"].get("machine") or {}).get("load_before")
    note = f"\n\nLoad average {load} on 2 cores when it started." if load is not None else ""
    return table(["turns", "ingest", "turns/s", "distinct texts", "real text turns/s", "store MB", "peak RSS MB",
                  "rank p50 / p95 ms", "answer p50 / p95 ms", "new process's first answer ms", "page selection"],
                 rows, right_from=0) + note


def eval_memory(datas: list[dict]) -> str:
    """The long-term layer's figures of eval runs: fact probes by style, the newest value, general questions,
    and questions about things never said or forgotten."""
    rows = []
    for d in datas:
        r = d["result"]
        style = r.get("by_style") or {}
        lat = r.get("latency_ms") or {}
        never, gone = r.get("abstention_never_said"), r.get("abstention_forgotten")
        rows.append([d["label"], r.get("probes"), frac(r.get("e2e_accuracy")),
                     frac((style.get("explicit") or {}).get("e2e_accuracy")),
                     frac((style.get("implicit") or {}).get("e2e_accuracy")), frac(r.get("standing_fact_recall")),
                     frac(r.get("latest_value_rate")), frac(r.get("general_recall_rate")),
                     frac(r.get("general_contamination")), frac(r.get("general_abstention")),
                     f"{frac(never)} / {frac(gone)}",
                     frac(r.get("unknown_answered_with_a_value")), frac(r.get("false_abstention_rate")),
                     f"{ms(lat.get('p50'))} / {ms(lat.get('p95'))}"])
    return table(["run", "fact probes", "e2e", "asked (explicit)", "implied (implicit)", "its fact in the prompt",
                  "latest value", "general questions paged in", "general answers with a planted value",
                  "general questions answered \"not remembered\"", "\"not remembered\": never said / forgotten",
                  "unknown answered with a value",
                  "fact probes answered \"not remembered\"", "p50 / p95 ms"], rows)


def standing_facts_extraction(datas: list[dict]) -> str:
    (d,) = datas
    ex = d["result"]["extraction"]
    rows = [[name.replace("statements_", "statements, "), section, frac(r["recall"]), frac(r["precision"]),
             "–" if r["kind"] is None else frac(r["kind"]), "–"]
            for name in ("statements_dev", "statements_heldout", "statements_plain_dev", "statements_plain_check")
            if name in ex for section, r in ex[name].items()]
    rows += [[f"generated, {split}", "chat", f"{frac(r['found'])} of {r['planted']}", "–", "–",
              f"{frac(r['superseded'])} of {r['corrections']}"] for split, r in ex["generated"].items()]
    return table(["set", "speakers", "facts found (recall)", "precision", "right kind", "corrections that replace"],
                 rows, right_from=2)


def standing_facts_model(datas: list[dict]) -> str:
    (d,) = datas
    shipped = d["result"]["fact_model"]["shipped"]
    rows = [[key, v["n"], frac(v["rate"])] for key, v in shipped.items()]
    return table(["data / split / questions", "n", "given its fact (fact questions) or any fact (the others)"], rows)


def fact_pairs(datas: list[dict]) -> str:
    """``benchmarks/fact_pairs.py``: per set and kind, the fact model alone and with the shipped pair bank."""
    (d,) = datas
    alone, shipped = d["result"]["alone"], d["result"]["shipped"]
    rows = [[key, v["n"], frac(alone[key]["rate"]), frac(v["rate"])] for key, v in shipped.items()]
    return table(["data / split / questions", "n", "the fact model alone", "with the pair bank"], rows)


def fact_pairs_never_told(datas: list[dict]) -> str:
    """``benchmarks/fact_pairs.py``: per generated set and kind, the share the shipped bank calls never told."""
    (d,) = datas
    rows = [[key, v["n"], frac(v["rate"])] for key, v in d["result"]["never_told_shipped"].items()]
    return table(["split / questions", "n", "answered \"not remembered\" before any recall"], rows)


def abstention(datas: list[dict]) -> str:
    """The shipped floor: the share of each kind of question answered "not remembered" (the floor is asked when no
    standing fact answers), over all of them and over those the recall gate pages in."""
    (d,) = datas
    rates = d["result"]["rates"]
    paged = rates["shipped, paged in"]
    rows = [[key, v["n"], frac(v["not_remembered"]), (paged.get(key) or {}).get("n", "–"),
             frac((paged.get(key) or {}).get("not_remembered"))] for key, v in rates["shipped"].items()]
    return table(["data / split / questions", "n",
                  "\"not remembered\" (of every one; the floor is asked when no fact answers it)", "paged in",
                  "\"not remembered\" of those paged in"], rows)

def new_chat(datas: list[dict]) -> str:
    """``benchmarks/new_chat.py``: a new user's first questions, per chat and kind of question, the share answered
    "not remembered"."""
    (d,) = datas
    chats = {"empty": "new user, nothing said", "told": "new chat of a user who told six facts in an earlier one",
             "said": "the same chat, after six facts told in it"}
    kinds = {"advice": "advice in their own voice (should get help)",
             "personal": "about themselves, never said (should get \"not remembered\")"}
    rows = [[chats[key.split("/")[0]], kinds[key.split("/")[1]], v["n"], frac(v["not_remembered"])]
            for key, v in d["result"].items()]
    return table(["chat", "questions", "n", "answered \"not remembered\""], rows, right_from=2)


def heldout_kinds(datas: list[dict]) -> str:
    """``benchmarks/heldout_kinds.py``: one column per split (kinds trained on, held-out kinds), one row per
    figure: extraction, the newest value, the fact model, the "not remembered" floor, and answers if measured."""
    (d,) = datas
    r = d["result"]
    splits = list(r["extraction"])
    get = lambda section, split, *keys: _dig(r.get(section, {}).get(split), keys)
    rows = [
        ("planted statements that became a fact (recall)", lambda s: get("extraction", s, "recall")),
        ("filler user turns taken for a fact", lambda s: get("extraction", s, "filler_taken")),
        ("precision (user turns taken that were planted)", lambda s: get("extraction", s, "precision")),
        ("newest value: a corrected fact's current value is the correction's",
         lambda s: get("extraction", s, "newest_value")),
        ("explicit question given its fact", lambda s: get("relevance", s, "explicit", "its_fact")),
        ("implicit question given its fact", lambda s: get("relevance", s, "implicit", "its_fact")),
        ("fact question given another fact", lambda s: _mean(get("relevance", s, "explicit", "another_fact"),
                                                             get("relevance", s, "implicit", "another_fact"))),
        ("general question given a fact", lambda s: _sum(get("relevance", s, "general", "its_fact"),
                                                         get("relevance", s, "general", "another_fact"))),
        ("never-said question given a fact", lambda s: _sum(get("relevance", s, "absent", "its_fact"),
                                                            get("relevance", s, "absent", "another_fact"))),
        ('explicit question "not remembered" (false abstention), of those paged in',
         lambda s: get("abstention", s, "probe", "not_remembered_paged_in")),
        ('never-said question "not remembered" (abstention), of those paged in',
         lambda s: get("abstention", s, "absent", "not_remembered_paged_in")),
        ("answer names the value (explicit / implicit), real model",
         lambda s: _pair(get("answers", s, "explicit", "names_value"), get("answers", s, "implicit", "names_value"))),
        ('never-said question answered "I don\'t remember", real model',
         lambda s: get("answers", s, "absent", "not_remembered")),
    ]
    shown = lambda v: v if isinstance(v, str) else frac(v)
    body = [[name] + [shown(value(s)) for s in splits] for name, value in rows]
    n = [["conversations (planted statements)"] + [f"{r['setup']['conversations']} ({r['extraction'][s]['planted']})"
                                                   for s in splits]]
    return table(["figure"] + splits, n + body)


def import_memory(datas: list[dict]) -> str:
    """``benchmarks/import_memory.py``: issue 41's bar Z, one column per export format, and the control (the same
    chats ingested as plain JSONL) under it."""
    (d,) = datas
    r = d["result"]
    formats = [f for f in ("chatgpt", "claude") if f in r]
    of = lambda a, b: f"{a}/{b}"
    rows = [
        ("conversations stored under the user with exactly their visible turns",
         lambda f: of(f["conversations_exact"], f["conversations"])),
        ("abandoned branches' texts found in the store's bytes (bar: 0)",
         lambda f: of(f["abandoned_in_store"], f["abandoned_texts"])),
        ("planted values held by the user's standing facts (bar: 80%)",
         lambda f: f"{of(f['facts']['held'], f['facts']['planted'])} ({frac(f['facts']['held_rate'])})"),
        ("changed facts whose newest value a standing fact holds", lambda f: of(f["facts"]["newest"], f["facts"]["changed"])),
        ("changed facts with an older value still a current fact too",
         lambda f: of(f["facts"]["old_still_current"], f["facts"]["changed"])),
        ('a fact said "yesterday" answered with its day in words', lambda f: of(f["yesterday"]["right"], f["yesterday"]["asked"])),
        ("e2e, the planted facts asked in a new chat of the user (bar: 0.60)",
         lambda f: f"{frac(f['answers']['e2e_accuracy'])} ({f['answers']['probes']} questions)"),
        ("changed facts answered with the newest value only", lambda f: frac(f["answers"]["latest_value_rate"])),
        ("turns stored from the export's .zip", lambda f: f"{f['turns']:,}"),
        ("turns added by the same export imported again (bar: 0)", lambda f: str(f["turns_again"])),
        ("a truncated export: exit status, lines on stderr, traceback, turns stored",
         lambda f: "{exit}, {stderr_lines}, {tb}, {turns_stored}".format(**f["damaged"], tb="yes" if f["damaged"]["traceback"] else "no")),
        ("bar Z items not met", lambda f: ", ".join(k for k, ok in f["bar"].items() if not ok) or "none"),
    ]
    body = [[name] + [cell(r[f]) for f in formats] for name, cell in rows]
    setup, c = r.get("setup", {}), r.get("plain_ingest_facts") or {}
    note = (f"\n\n{setup.get('people')} generated people ({setup.get('phrasing')} phrasings, {setup.get('turns')} turns "
            f"each, cut into {setup.get('parts')} chats a few days apart), each imported as their own user. Control, the "
            f"same chats with the same times ingested as plain JSONL: the standing facts hold {of(c.get('held'), c.get('planted'))} "
            f"planted values, the newest of {of(c.get('newest'), c.get('changed'))} changed ones, an older value still "
            f"current in {of(c.get('old_still_current'), c.get('changed'))}. {r.get('seconds')} s in all, load average "
            f"{r.get('load_average')} at the end.")
    return table(["figure"] + formats, body) + note


def import_speed(datas: list[dict]) -> str:
    """``benchmarks/import_speed.py``: a generated ChatGPT export imported without --embed, beside plain ingest of
    the same turns as JSONL; speed and peak memory above the process's baseline (bar: 300 MB for 200 MB)."""
    (d,) = datas
    r = d["result"]
    names = {"export": f"ChatGPT export, {r.get('size_mb')} MB", "jsonl": f"the same turns as JSONL, {r.get('jsonl_mb')} MB"}
    rows = [[names[way], f"{row['conversations']:,}", f"{row['turns']:,}", f"{row['wall_s']:,.0f}",
             f"{row['turns_per_s']:,.0f}", f"{row['baseline_mb']:,.0f}", f"{row['peak_above_baseline_mb']:,.0f}",
             f"{row['load_average']:.1f}"] for way, row in ((w, r[w]) for w in ("export", "jsonl") if w in r)]
    note = (f"\n\nIssue 41's bar: the export's peak at most 300 MB above the baseline for 200 MB: "
            f"{'met' if r.get('bar_met') else 'not met'}.")
    return table(["file", "conversations", "turns", "wall s", "turns/s", "baseline MB", "peak above baseline MB",
                  "load average"], rows) + note


def _dig(value, keys):
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _mean(*values):
    return None if None in values else sum(values) / len(values)


def _sum(*values):
    return None if None in values else sum(values)


def _pair(a, b) -> str:
    return f"{frac(a)} / {frac(b)}"


def user_scale(datas: list[dict]) -> str:
    """``benchmarks/user_scale.py``: a new chat's first answer for a user of many conversations beside one with no
    user (issue 40's bars: the first answer at most 1.1x, rank p50 at most 50 ms), and the parts that grow."""
    (d,) = datas
    r = d["result"]
    m, c, machine = r["measured"], r.get("cold") or {}, r.get("machine") or {}
    first = m["first_answer"]
    pair = lambda s: f"{ms(s['p50'])} / {ms(s['p95'])}"
    rows = []
    for name, what in (("general", "general questions (the model writes the answer)"),
                       ("facts", "the planted facts' questions (no user: a quick \"not told\")"), ("all", "all")):
        if name in first:
            f = first[name]
            rows.append([f"first answer, {what}", pair(f["nobody_ms"]), pair(f["user_ms"]), f"{f['ratio_p50']}x"])
    rows.append(["outside the chat model (wall less prefill and decode)", pair(first["nobody_outside_model_ms"]),
                 pair(first["user_outside_model_ms"]), f"+{first['added_ms_p50']} ms"])
    rows.append(["a new process's first answer (models loaded first)", ms(c.get("nobody_ms_p50")),
                 ms(c.get("user_ms_p50")), ""])
    body = table(["p50 / p95 ms", "no user", "user", "user / no user"], rows)
    parts = [["user_facts.across (the user's facts)", pair(m["across_ms"])],
             ["a new chat's selector, everything embedded", pair(m["selector_ms"])],
             [f"rank: the question embedded, {m['ranked_turns']:,} turns scored", pair(m["rank_ms"])],
             ["rank after a removal (every turn's place worked out again)", pair(m["rank_after_change_ms"])]]
    ok = lambda met: "met" if met else "not met"
    targets = r.get("targets") or {}
    note = (f"\n\n{r['conversations']} conversations x {r['turns']:,} turns of one user ({m['facts']} standing facts), "
            f"{'the scripted chat model' if r.get('no_model') else 'the real chat model'}. Outside the model, the user's "
            f"answer adds {first['added_ms_p50']} ms at p50: {first['outside_model_ratio']}x a first answer today "
            f"(bar 1.1x: {ok(targets.get('outside_model_ratio<=1.1'))}); the wall-time ratio carries the model's "
            f"own time, which differs with the prompt (the user's facts in its prefix: "
            f"{first['prompt_tokens_p50']['user']:.0f} tokens against {first['prompt_tokens_p50']['nobody']:.0f}) "
            f"and with the answer it writes. Rank p50 {m['rank_ms']['p50']} ms (bar 50 ms: "
            f"{ok(targets.get('rank_ms_p50<=50'))}). Load average {machine.get('load_before')} -> "
            f"{machine.get('load_after')} on {machine.get('cores')} cores.")
    return body + "\n\n" + table(["part that grows with the user", "p50 / p95 ms"], parts) + note


RENDERERS = {
    "eval-summary": ("eval", eval_summary), "eval-by-type": ("eval", eval_by_type),
    "bench-latency": ("bench", bench_latency), "bench-figures": ("bench", bench_figures),
    "faults": ("faults", faults), "recall-gate": ("recall-gate", recall_gate),
    "recall-gate-ranking": ("recall-gate", recall_gate_ranking),
    "bookmark-coverage": ("bookmark-coverage", bookmark_coverage), "threads": ("threads", threads),
    "server-load": ("server-load", server_load), "mcp-recall": ("mcp-recall", mcp_recall),
    "replicas": ("replicas", replicas), "embed-speed": ("embed-speed", embed_speed),
    "ingest-speed": ("ingest-speed", ingest_speed),
    "scale": ("scale", scale), "eval-memory": ("eval", eval_memory),
    "standing-facts-extraction": ("standing-facts", standing_facts_extraction),
    "standing-facts-model": ("standing-facts", standing_facts_model), "abstention": ("abstention", abstention),
    "heldout-kinds": ("heldout-kinds", heldout_kinds), "fact-pairs": ("fact-pairs", fact_pairs),
    "fact-pairs-never-told": ("fact-pairs", fact_pairs_never_told),
    "user-scale": ("user-scale", user_scale), "new-chat": ("new-chat", new_chat),
    "import-memory": ("import-memory", import_memory), "import-speed": ("import-speed", import_speed),
}


def render(kind: str, args: str, page: Path) -> str:
    if kind not in RENDERERS:
        raise SystemExit(f"{page.relative_to(ROOT)}: unknown table {kind!r}; known: {', '.join(RENDERERS)}")
    names = dict(a.split("=", 1) for a in args.split()).get("data", "")
    datas = [load(n) for n in names.split(",") if n]
    if not datas:
        raise SystemExit(f"{page.relative_to(ROOT)}: table {kind} names no data (data=NAME,...)")
    want, renderer = RENDERERS[kind]
    for d in datas:
        if d["kind"] != want:
            raise SystemExit(f"{page.relative_to(ROOT)}: table {kind} wants {want} data; {d['name']} is {d['kind']}")
    commands, where = provenance(datas, page)
    return f"{commands}{renderer(datas)}\n\n{where}\n"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def rewrite(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return MARKER.sub(lambda m: m.group(1) + render(m.group("kind"), m.group("args"), path) + m.group(5), text)


# -- the README's examples, run as written -----------------------------------------------------------------
RUN = re.compile(r"(<!-- run -->\n)(?P<body>.*?)(<!-- /run -->)", re.S)
FENCE = re.compile(r"```(?P<lang>\w*)\n(?P<code>.*?)```", re.S)


def run_examples(path: Path, workdir: Path) -> str:
    """``path``'s text with every run block's output replaced by what its commands print now."""
    # no progress bars: one shows only once a stage has run a second, so whether the output holds one would depend
    # on how busy the machine is (tqdm reads TQDM_DISABLE since 4.66)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "TQDM_DISABLE": "1"}

    def run(argv: list[str], shown: str) -> str:
        done = subprocess.run(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode:
            raise SystemExit(f"{path.name}: `{shown}` exited {done.returncode}:\n{done.stdout}")
        return done.stdout.rstrip("\n")

    def block(m: re.Match) -> str:
        fences = list(FENCE.finditer(m.group("body")))
        if fences and fences[0].group("lang") == "console":
            out = []
            for line in fences[0].group("code").splitlines():
                if line.startswith("$ "):
                    out += [line, run(["bash", "-c", line[2:]], line[2:])]
            return m.group(1) + "```console\n" + "\n".join(o for o in out if o) + "\n```\n" + m.group(3)
        if len(fences) == 2 and fences[0].group("lang") == "python":
            code = fences[0].group("code")
            output = run([sys.executable, "-c", code], "the python example")
            return m.group(1) + f"```python\n{code}```\n\n```text\n{output}\n```\n" + m.group(3)
        raise SystemExit(f"{path.name}: a run block holds a console fence, or a python fence and a text fence")

    return RUN.sub(block, path.read_text(encoding="utf-8"))


def examples(check: bool) -> int:
    import tempfile

    path = ROOT / "README.md"
    with tempfile.TemporaryDirectory() as tmp:
        new = run_examples(path, Path(tmp))
    if new == path.read_text(encoding="utf-8"):
        print("the README's examples print what it shows")
        return 0
    if check:
        print("the README's examples print something else now (run `make docs-examples`)", file=sys.stderr)
        return 1
    path.write_text(new, encoding="utf-8")
    print("README.md: examples' output rewritten")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is out of date")
    sub = parser.add_subparsers(dest="cmd")
    a = sub.add_parser("add", help="copy a results JSON into docs/measurements/data with its provenance")
    a.add_argument("file")
    a.add_argument("--kind", required=True, choices=KINDS)
    a.add_argument("--command", action="append", required=True,
                   help="a command that made it, in order (repeat: setup first, e.g. the generate)")
    a.add_argument("--commit", required=True, help="the commit the figures were measured on")
    a.add_argument("--name", help="data file name (default: the results file's)")
    a.add_argument("--label", help="the run's name in a table")
    a.add_argument("--metric", help="what e2e means for eval data (default accuracy; LoCoMo: token F1)")
    a.add_argument("--measured", help="date (default: the results file's time)")
    a.add_argument("--machine", default="2-core x86-64 (AVX-512), SmolLM2-135M-Instruct Q4_1, all-MiniLM-L6-v2")
    a.add_argument("--note", default="")
    e = sub.add_parser("examples", help="run the README's examples as written and write their output back")
    e.add_argument("--check", action="store_true", help="change nothing; exit 1 if the output differs")
    args = parser.parse_args(argv)
    if args.cmd == "examples":
        return examples(args.check)
    if args.cmd == "add":
        add(args)
        return 0
    stale = []
    for path in pages():
        new = rewrite(path)
        if new != path.read_text(encoding="utf-8"):
            stale.append(path.relative_to(ROOT).as_posix())
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print("out of date (run `make docs`): " + ", ".join(stale), file=sys.stderr)
        return 1
    if not args.check:
        print(f"{len(stale)} file(s) rewritten" + (f": {', '.join(stale)}" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
