// localpager's memory inspector: plain DOM, no libraries, no network beyond this server.
// Every text from a conversation goes in through textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const state = { conv: null, user: params.get("user") || "", key: sessionStorage.getItem("localpager-key") || "",
  features: [], timer: null };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
  return node;
}

function status(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

async function api(path, options = {}) {
  const headers = Object.assign({ "Content-Type": "application/json" }, options.headers || {});
  if (state.key) headers.Authorization = "Bearer " + state.key;
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (response.status === 401) {
    $("key-box").hidden = false;
    throw new Error("this server needs its API key");
  }
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

// Every conversation names its user (null: nobody's). Picking a user narrows the list to theirs and shows the
// standing facts they told any of them; "everyone" lists every conversation, as before users.
async function loadConversations() {
  const all = (await api("/v1/conversations")).data;
  const users = [...new Set(all.map((c) => c.user).filter((u) => u !== null && u !== undefined))].sort();
  if (state.user && !users.includes(state.user)) state.user = "";
  $("user-box").hidden = !users.length;
  $("user").replaceChildren(el("option", { value: "" }, "everyone"), ...users.map((u) => el("option", { value: u }, u)));
  $("user").value = state.user;
  const data = state.user ? all.filter((c) => c.user === state.user) : all;
  const select = $("conversation");
  const wanted = state.conv || params.get("conversation");
  select.replaceChildren(...data.map((c) => el("option", { value: c.id },
    `${c.id}${c.user && !state.user ? ` · ${c.user}` : ""} (${c.turns} turns)`)));
  state.convUser = {};
  for (const c of all) state.convUser[c.id] = c.user;
  if (!data.length) { state.conv = null; $("summary").textContent = "The store holds no conversation yet."; return; }
  state.conv = data.some((c) => c.id === wanted) ? wanted : data[data.length - 1].id;
  select.value = state.conv;
}

async function loadUserFacts() {
  const show = Boolean(state.user) && state.features.includes("users");
  $("user-facts-section").hidden = !show;
  if (!show) return;
  const editable = state.features.includes("fact_edits");
  $("user-remember-box").hidden = !editable;
  const base = `/v1/users/${encodeURIComponent(state.user)}`;
  const { data } = await api(`${base}/facts`);
  $("user-facts-title").firstChild.textContent = `What ${state.user} told every conversation `;
  const rows = data.map((f) => {
    const actions = el("td", {});
    if (editable) {
      const target = { conversation: f.conv_id, fact_id: f.fact_id };
      actions.append(factButtons(f, `${base}/facts/edit`, `${base}/facts/delete`, target, refresh));
    }
    return el("tr", { "data-conversation": f.conv_id, "data-fact": f.fact_id }, el("td", {}, f.conv_id),
      el("td", {}, `#${f.fact_id}`), el("td", {}, f.turn), el("td", {}, f.kind),
      el("td", {}, f.speaker ? `${f.speaker}: ${f.text}` : f.text), actions);
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colSpan: 6, class: "muted" }, "No standing fact yet.")));
  $("user-facts").tBodies[0].replaceChildren(...rows);
}

// Edit and delete erase a fact's old words from the store (the turn that said them, any answer quoting them, in
// every conversation of its user): a dry run first says how many turns go, and nothing changes unless confirmed.
function factButtons(f, editPath, deletePath, target, reload) {
  const edit = el("button", { type: "button", title: "replace its words (the old ones are erased)" }, "edit");
  edit.addEventListener("click", () => changeFact(f, editPath, target, true, reload));
  const del = el("button", { type: "button", title: "erase it from the store" }, "delete");
  del.addEventListener("click", () => changeFact(f, deletePath, target, false, reload));
  const box = document.createDocumentFragment();
  box.append(edit, " ", del);
  return box;
}

async function changeFact(f, path, target, editing, reload) {
  try {
    let text;
    if (editing) {
      text = prompt(`New words for fact #${f.fact_id} (its old words are erased from the store):`, f.text);
      if (text === null || !text.trim() || text === f.text) return;
    }
    const body = Object.assign({}, target, editing ? { text } : {});
    const dry = await api(path, { method: "POST", body: JSON.stringify(Object.assign({}, body, { dry_run: true })) });
    const turns = dry.forgotten.reduce((n, r) => n + r.turns.length, 0);
    const where = new Set(dry.forgotten.map((r) => r.conversation)).size;
    const verb = editing ? "Change" : "Delete";
    if (!confirm(`${verb} fact #${f.fact_id}: "${f.text}"? ${turns} turn(s) in ${where} conversation(s) that hold ` +
      "its words are erased from the store; this cannot be undone.")) return;
    await api(path, { method: "POST", body: JSON.stringify(body) });
    await reload();
    status(`${editing ? "changed" : "deleted"} fact #${f.fact_id}`);
  } catch (e) { status(e.message, true); }
}

async function rememberFact(path, input, reload) {
  const text = input.value.trim();
  if (!text) return;
  try {
    const made = await api(path, { method: "POST", body: JSON.stringify({ text }) });
    input.value = "";
    await reload();
    status(`remembered ${made.data.length} fact(s) in ${made.conversation}`);
  } catch (e) { status(e.message, true); }
}

async function loadConversation() {
  if (!state.conv) return;
  const id = encodeURIComponent(state.conv);
  const wantFacts = state.features.includes("facts");
  const [pages, log, facts] = await Promise.all([api(`/v1/conversations/${id}/pages`),
    api(`/v1/conversations/${id}/log`), wantFacts ? api(`/v1/conversations/${id}/facts?all=true`) : { data: [] }]);
  const traces = log.data;
  const last = traces[traces.length - 1];
  const recalled = new Set(last ? last.injected_page_ids : []);
  renderSummary(pages.data, traces);
  renderFacts(facts.data, last);
  renderPages(pages.data, recalled);
  renderChart(traces);
  renderTraces(traces.slice(-5).reverse());
  status(`updated ${new Date().toLocaleTimeString()}`);
}

function renderSummary(pages, traces) {
  const evicted = pages.filter((p) => p.evicted).length;
  const inPrompt = pages.filter((p) => p.in_prompt).length;
  const tooLong = pages.filter((p) => (p.too_long_turns || []).length).length;
  const recalls = traces.filter((t) => t.decision === "recall").length;
  const whose = (state.convUser || {})[state.conv];
  $("summary").textContent = `${state.conv}${whose ? ` (${whose}'s)` : ""}: ${pages.length} pages, ${inPrompt} in the prompt, ` +
    `${evicted} evicted` + (tooLong ? `, ${tooLong} with a turn too long for any prompt` : "") +
    `; ${traces.length} answers, ${recalls} with a recall.`;
}

// The standing facts: the current ones first, a replaced or corrected one greyed with what replaced it; the one
// the last answer was given is marked. Pin keeps one in the prompt (refused past the facts' room); forget erases its turn.
function renderFacts(facts, last) {
  $("facts-section").hidden = !state.features.includes("facts");
  $("remember-box").hidden = !state.features.includes("fact_edits");
  const used = new Set(last ? (last.facts || []).map((f) => f.fact_id) : []);
  const ordered = facts.filter((f) => f.current).concat(facts.filter((f) => !f.current));
  const rows = ordered.map((f) => {
    const said = el("td", {}, f.speaker ? `${f.speaker}: ${f.text}` : f.text);
    if (f.pinned) said.append(el("span", { class: "badge" }, "pinned"));
    if (used.has(f.fact_id)) said.append(el("span", { class: "badge recalled-badge" }, "used in the last answer"));
    if (f.superseded_by) said.append(el("div", { class: "muted" }, `replaced by #${f.superseded_by}`));
    if (f.corrected) said.append(el("div", { class: "muted" }, "its turn was corrected"));
    const actions = el("td", {});
    if (f.current) {
      const pin = el("button", { type: "button", title: f.pinned ? "let it be chosen by room again" : "always in the prompt" },
        f.pinned ? "unpin" : "pin");
      pin.addEventListener("click", () => setFactPin(f.fact_id, !f.pinned));
      actions.append(pin);
      if (state.features.includes("fact_edits")) {
        const base = `/v1/conversations/${encodeURIComponent(state.conv)}/facts/${f.fact_id}`;
        actions.append(" ", factButtons(f, `${base}/edit`, `${base}/delete`, {}, refresh));
      }
    }
    if (state.features.includes("forget")) {
      const forget = el("button", { type: "button", title: `forget turn ${f.turn}, which stated it` }, "forget");
      forget.addEventListener("click", () => forgetTurn(f.turn));
      actions.append(" ", forget);
    }
    return el("tr", { class: f.current ? "" : "replaced", "data-fact": f.fact_id }, el("td", {}, `#${f.fact_id}`),
      el("td", {}, f.turn), el("td", {}, f.kind), said, actions);
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, "No standing fact yet.")));
  $("facts").tBodies[0].replaceChildren(...rows);
}

async function setFactPin(factId, pinned) {
  try {
    await api(`/v1/conversations/${encodeURIComponent(state.conv)}/facts/${factId}/pin`,
      { method: "POST", body: JSON.stringify({ pinned }) });
    await loadConversation();
  } catch (e) { status(e.message, true); }
}

async function forgetTurn(turn) {
  if (!confirm(`Forget turn ${turn} of ${state.conv}? Its text is erased from the store.`)) return;
  try {
    await api(`/v1/conversations/${encodeURIComponent(state.conv)}/forget`,
      { method: "POST", body: JSON.stringify({ turn }) });
    await loadConversation();
  } catch (e) { status(e.message, true); }
}

// A turn longer than any prompt can hold is stored and searchable, but never shown to the model whole.
function pageState(p) {
  const long = p.too_long_turns || [];
  if (long.length) return [`too long: turn ${long.join(", ")} is stored only (searchable, never in a prompt whole)`, "too-long"];
  return p.evicted ? ["evicted", "evicted"] : ["in prompt", "resident"];
}

function renderPages(pages, recalled) {
  const rows = pages.map((p) => {
    const [stateText, stateClass] = pageState(p);
    const stateCell = el("td", {}, stateText);
    if (p.pinned) stateCell.append(el("span", { class: "badge" }, "pinned"));
    if (recalled.has(p.page_id)) stateCell.append(el("span", { class: "badge recalled-badge" }, "recalled"));
    const pin = el("button", { type: "button", title: p.pinned ? "let it be evicted again" : "never evict it" },
      p.pinned ? "unpin" : "pin");
    pin.addEventListener("click", () => setPin(p.page_id, !p.pinned));
    const actions = el("td", {}, pin);
    if (state.features.includes("forget")) {
      const forget = el("button", { type: "button", title: "forget this page's turns" }, "forget");
      forget.addEventListener("click", () => forgetPage(p.page_id));
      actions.append(" ", forget);
    }
    const bookmark = el("td", {}, el("code", {}, p.bookmark), el("div", { class: "muted" }, p.preview));
    const row = el("tr", { class: stateClass + (recalled.has(p.page_id) ? " recalled" : ""),
      "data-page": p.page_id }, el("td", {}, `p${p.page_id}`), el("td", {}, `${p.first_turn}–${p.last_turn}`),
      el("td", {}, p.token_count), stateCell, bookmark, el("td", {}, `${p.access_count}×`), actions);
    return row;
  });
  $("pages").tBodies[0].replaceChildren(...rows);
}

// what started a recall, in the trace's words (runtime.choices.Fired): the trigger setting's, or the model's
const FIRED = {
  gate: "the recall gate said the message asks about something said before",
  question: "a question while pages were evicted (trigger question)",
  model: "the model asked to recall",
  forced: "the model had to name pages (recall mode always)",
  selector: "the selector's own rule",
  none: "nothing started a recall",
};

function renderTraces(traces) {
  if (!traces.length) { $("traces").replaceChildren(el("p", { class: "muted" }, "No answer yet.")); return; }
  $("traces").replaceChildren(...traces.map((t) => {
    const box = el("div", { class: "trace", "data-turn": t.turn });
    const head = t.injected_page_ids.length
      ? `recalled ${t.injected_page_ids.map((p) => "p" + p).join(", ")} (trigger: ${t.trigger})`
      : `no recall (${t.decision}, trigger: ${t.trigger})`;
    box.append(el("h3", { title: FIRED[t.trigger] || "" }, `turn ${t.turn}: ${head}`),
      el("p", {}, el("b", {}, "Q "), t.question),
      el("p", {}, el("b", {}, "A "), t.answer || "…"));
    if (t.candidates.length) {
      const rows = t.candidates.map((c) => el("tr", { class: c.injected ? "injected" : "" },
        el("td", {}, `p${c.page_id}`), el("td", {}, c.score.toFixed(3)),
        el("td", {}, c.similarity == null ? "–" : c.similarity.toFixed(3)),
        el("td", {}, c.injected ? "injected" : "skipped"), el("td", {}, c.reason || "")));
      box.append(el("table", {}, el("thead", {}, el("tr", {}, ...["candidate", "score", "similarity", "", "why"]
        .map((h) => el("th", {}, h)))), el("tbody", {}, ...rows)));
    }
    for (const c of t.citations || []) {
      const where = c.page_id == null ? `${c.conversation ?? "?"} turn ${c.turn}` : `p${c.page_id} turn ${c.turn}`;
      box.append(el("p", { class: "muted" }, `from memory: ${where} ${c.speaker}: ${c.text}`));
    }
    const ms = t.timings_ms || {};
    box.append(el("p", { class: "muted" }, `tokens: prompt ${t.tokens.prompt}, evaluated ${t.tokens.evaluated}, ` +
      `reused ${t.tokens.reused}, generated ${t.tokens.generated}; ${Math.round(ms.total || 0)} ms`));
    return box;
  }));
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function renderChart(traces) {
  const data = traces.slice(-40);
  const W = 800, H = 180, pad = 34;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "tokens and latency per turn" });
  if (!data.length) { $("chart").replaceChildren(root); return; }
  const maxTok = Math.max(1, ...data.map((t) => t.tokens.prompt + t.tokens.generated));
  const maxMs = Math.max(1, ...data.map((t) => (t.timings_ms || {}).total || 0));
  const step = (W - 2 * pad) / Math.max(data.length, 12);
  const y = (v, max) => H - pad - (v / max) * (H - 2 * pad);
  const points = [];
  data.forEach((t, i) => {
    const x = pad + i * step;
    const bar = Math.min(40, Math.max(2, step * 0.6));
    root.append(svg("rect", { x, y: y(t.tokens.prompt, maxTok), width: bar, height: H - pad - y(t.tokens.prompt, maxTok),
      fill: t.injected_page_ids.length ? "#9cc3ff" : "#c9d1d9" }, undefined));
    root.lastChild.append(svg("title", {}, `turn ${t.turn}: prompt ${t.tokens.prompt} tokens`));
    const top = y(t.tokens.prompt + t.tokens.generated, maxTok);
    root.append(svg("rect", { x, y: top, width: bar, height: y(t.tokens.prompt, maxTok) - top, fill: "#57606a" }));
    const ly = y((t.timings_ms || {}).total || 0, maxMs);
    points.push(`${x + bar / 2},${ly}`);
    root.append(svg("circle", { cx: x + bar / 2, cy: ly, r: 3, fill: "#d1242f" }));
    root.lastChild.append(svg("title", {}, `turn ${t.turn}: ${Math.round((t.timings_ms || {}).total || 0)} ms`));
    if (data.length <= 20 || i % 5 === 0) root.append(svg("text", { x, y: H - pad + 14, "font-size": 10 }, t.turn));
  });
  root.append(svg("polyline", { points: points.join(" "), fill: "none", stroke: "#d1242f", "stroke-width": 2 }));
  root.append(svg("text", { x: 2, y: pad - 8, "font-size": 10 }, `${maxTok} tokens`));
  root.append(svg("text", { x: pad + 80, y: pad - 8, "font-size": 10, fill: "#57606a" },
    "grey: prompt · blue: prompt with a recall · dark: generated · red: total ms"));
  root.append(svg("text", { x: W - pad - 60, y: pad - 8, "font-size": 10, fill: "#d1242f" }, `${Math.round(maxMs)} ms`));
  $("chart").replaceChildren(root);
}

async function setPin(pageId, pinned) {
  try {
    await api(`/v1/conversations/${encodeURIComponent(state.conv)}/pages/${pageId}/pin`,
      { method: "POST", body: JSON.stringify({ pinned }) });
    await loadConversation();
  } catch (e) { status(e.message, true); }
}

async function forgetPage(pageId) {
  if (!confirm(`Forget page p${pageId} of ${state.conv}? Its turns are erased from the store.`)) return;
  try {
    await api(`/v1/conversations/${encodeURIComponent(state.conv)}/forget`,
      { method: "POST", body: JSON.stringify({ page: pageId }) });
    await loadConversation();
  } catch (e) { status(e.message, true); }
}

async function search() {
  const query = $("search-query").value.trim();
  if (!query) return;
  try {
    const { data } = await api(`/v1/conversations/${encodeURIComponent(state.conv)}/search?` +
      new URLSearchParams({ q: query }));
    $("search-results").replaceChildren(...data.map((h) => el("li", {},
      `p${h.page_id ?? "?"} turn ${h.turn ?? "?"}: ${h.text ?? ""}`)));
  } catch (e) { status(e.message, true); }
}

async function refresh() {
  try {
    await loadConversations();
    await Promise.all([loadConversation(), loadUserFacts()]);
  } catch (e) { status(e.message, true); }
}

function schedule() {
  clearInterval(state.timer);
  if ($("auto").checked) state.timer = setInterval(refresh, 5000);
}

async function start() {
  try {
    const health = await (await fetch("/health")).json();
    state.features = health.features || [];
  } catch (e) { state.features = []; }
  $("search-box").hidden = !state.features.includes("search");
  $("conversation").addEventListener("change", (e) => { state.conv = e.target.value; loadConversation().catch((x) => status(x.message, true)); });
  $("user").addEventListener("change", (e) => { state.user = e.target.value; state.conv = null; refresh(); });
  $("refresh").addEventListener("click", refresh);
  $("auto").addEventListener("change", schedule);
  $("search").addEventListener("click", search);
  $("remember").addEventListener("click", () => state.conv && rememberFact(
    `/v1/conversations/${encodeURIComponent(state.conv)}/remember`, $("remember-text"), refresh));
  $("user-remember").addEventListener("click", () => state.user && rememberFact(
    `/v1/users/${encodeURIComponent(state.user)}/remember`, $("user-remember-text"), refresh));
  $("key").value = state.key;
  $("key-save").addEventListener("click", () => {
    state.key = $("key").value.trim();
    sessionStorage.setItem("localpager-key", state.key);
    $("key-box").hidden = true;
    refresh();
  });
  await refresh();
  schedule();
}

start();
