// The dashboard page: cluster, wheel, pending and forecast, groups and their DLQs.
// Reads every REFRESH_MS; nothing is written unless a button is pressed.

import { ApiError, call, setTokens, token } from "./api.js";
import { categoryBars, clear, timeBars } from "./charts.js";
import { byLabel, histogram, parseMetrics, quantileBound, scalar } from "./prom.js";

const REFRESH_MS = 2000;
const FORECAST_BUCKETS = 48;
const BUCKET_MS = { "1m": 60_000, "1h": 3_600_000, "1d": 86_400_000 };
const $ = (id) => document.getElementById(id);

const state = { self: null, nodes: [], master: null, dlq: null, timer: null };

// -- small DOM helpers: text only, never HTML from data --------------------------------

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === undefined || text === null ? "–" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function rows(tbody, items, key, fill) {
  tbody.textContent = "";
  for (const item of items) {
    const tr = document.createElement("tr");
    tr.dataset[key] = item[key];
    fill(tr, item);
    tbody.appendChild(tr);
  }
}

function when(ms) {
  return ms === undefined || ms === null ? "–" : new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}

function seconds(s, space = " ") {
  if (s === undefined) return "–";
  if (s === Infinity) return "+Inf";
  return s < 1 ? `${+(s * 1000).toPrecision(3)}${space}ms` : `${s}${space}s`;
}

function problem(text) {
  $("problem").hidden = !text;
  $("problem").textContent = text || "";
}

function describe(e) {
  return e instanceof ApiError ? `${e.status} ${e.code}: ${e.message}` : String(e.message || e);
}

// -- cluster ------------------------------------------------------------------------

async function readCluster() {
  const self = await call("/admin/status");
  const ids = [self.node_id, ...self.peers.map((p) => p.node_id)];
  const answers = await Promise.allSettled(ids.slice(1).map((id) => call("/admin/status", { to: id })));
  const nodes = [{ id: self.node_id, status: self }];
  answers.forEach((a, k) => nodes.push({ id: ids[k + 1], status: a.value, error: a.reason }));
  nodes.sort((a, b) => a.id.localeCompare(b.id));
  state.self = self;
  state.nodes = nodes;
  const master = nodes.find((n) => n.status && n.status.role === "master");
  state.master = master ? master.status : null;
  return nodes;
}

function showCluster() {
  const m = state.master;
  $("master").textContent = m ? m.node_id : "none known";
  $("served-by").textContent = `page served by ${state.self.node_id}`;
  const top = m ? m.commit_index : Math.max(...state.nodes.map((n) => (n.status ? n.status.commit_index : 0)));
  rows($("nodes"), state.nodes.map((n) => ({ node: n.id, ...n })), "node", (tr, n) => {
    const s = n.status;
    cell(tr, n.id + (n.id === state.self.node_id ? " (this page)" : ""));
    if (!s) {
      cell(tr, "unreachable", "role bad");
      const td = cell(tr, describe(n.error), "muted");
      td.colSpan = 7;
      return;
    }
    const role = s.role === "slave" ? "follower" : s.role; // a node's old word for follower, for one release
    cell(tr, role, `role ${role}`);
    cell(tr, s.leader);
    cell(tr, s.term);
    cell(tr, s.commit_index);
    cell(tr, s.applied_index);
    cell(tr, Math.max(0, top - s.applied_index), "lag");
    cell(tr, s.clock_offset_ms === null ? "unknown" : `${s.clock_offset_ms} ms`);
    cell(tr, s.peers.map((p) => `${p.node_id}${p.connected ? "✓" : "✗"}`).join(" "));
  });
  const select = $("release-to");
  const wanted = state.nodes.map((n) => n.id).filter((id) => !m || id !== m.node_id);
  const have = [...select.options].slice(1).map((o) => o.value);
  if (wanted.join() !== have.join()) {
    const keep = select.value;
    while (select.options.length > 1) select.remove(1);
    for (const id of wanted) select.add(new Option(id, id));
    select.value = wanted.includes(keep) ? keep : "";
  }
}

async function releaseMaster() {
  const to = $("release-to").value;
  const out = $("release-result");
  $("release-btn").disabled = true;
  out.textContent = "releasing…";
  try {
    const r = await call("/admin/release-master", { method: "POST", body: to ? { to } : {}, to: "master" });
    out.textContent = `${r.old_master} handed over to ${r.new_master} (gap ${r.gap_ms ?? "?"} ms; followed by ${r.heard_by.join(", ")})`;
  } catch (e) {
    out.textContent = `release failed: ${describe(e)}`;
  } finally {
    $("release-btn").disabled = false;
    refreshSoon();
  }
}

// -- wheel ------------------------------------------------------------------------

function showWheel(masterMetrics) {
  const facts = $("wheel-facts");
  facts.textContent = "";
  const m = state.master;
  const add = (k, v) => {
    const dt = document.createElement("dt");
    const dd = document.createElement("dd");
    dt.textContent = k;
    dd.textContent = v;
    facts.append(dt, dd);
  };
  if (!m) {
    add("master", "none known");
    return;
  }
  const local = m.wheel.local_index >= 0 ? ` (local index ${m.wheel.local_index})` : "";
  add("tick", `${when(m.wheel.tick * 1000)}${local}`);
  add("last delivered", when(m.wheel.ms));
  add("syncs led", `${m.wheel.syncs_led} (last ${when(m.wheel.last_sync_led_ms)})`);
  add("master clock offset", m.clock_offset_ms === null ? "unknown" : `${m.clock_offset_ms} ms`);
  add("pending", m.pending);
  if (!masterMetrics) return;
  const h = histogram(masterMetrics, "horologe_handout_lateness_seconds");
  const labels = h.buckets.map((b) => seconds(b.le, ""));
  categoryBars($("lateness-chart"), labels, h.buckets.map((b) => b.count));
  $("lateness-summary").textContent = h.total
    ? `${h.total} hand-outs on ${m.node_id}; p50 ≤ ${seconds(quantileBound(h, 0.5))}, p99 ≤ ${seconds(quantileBound(h, 0.99))}`
    : `no hand-out on ${m.node_id} yet`;
}

// -- pending and forecast ---------------------------------------------------------

function showPending(metrics) {
  const byTopic = byLabel(metrics, "horologe_pending_by_topic", "topic");
  const topics = Object.keys(byTopic).sort();
  const due = byLabel(metrics, "horologe_pending_due", "within");
  const soon = ["1m", "1h", "1d"].filter((w) => w in due).map((w) => `${due[w]} within ${w}`);
  $("pending-total").textContent = `${scalar(metrics, "horologe_pending") ?? "?"} in all`;
  $("pending-due").textContent = soon.length ? `due: ${soon.join(", ")}` : "";
  rows($("pending"), topics.map((t) => ({ topic: t, n: byTopic[t] })), "topic", (tr, r) => {
    cell(tr, r.topic);
    cell(tr, r.n, "num");
  });
  const select = $("forecast-topic");
  const have = [...select.options].slice(1).map((o) => o.value);
  for (const t of topics) if (!have.includes(t) && t !== "other") select.add(new Option(t, t));
}

async function showForecast() {
  const bucket = $("forecast-bucket").value;
  const topic = $("forecast-topic").value;
  const size = BUCKET_MS[bucket];
  const from = Math.floor(Date.now() / size) * size;
  const q = new URLSearchParams({ bucket, from, to: from + FORECAST_BUCKETS * size });
  if (topic) q.set("topic", topic);
  const status = $("forecast-status");
  try {
    const r = await call(`/v1/forecast?${q}`, { to: "master" });
    const total = r.buckets.reduce((n, b) => n + b.count, 0);
    const overdue = r.before ? `; ${r.before} overdue` : "";
    status.textContent = `${total} due in the next ${FORECAST_BUCKETS} × ${bucket}${topic ? ` on ${topic}` : ""}${overdue}`;
    timeBars($("forecast-chart"), r.buckets.map((b) => b.start / 1000), r.buckets.map((b) => b.count));
  } catch (e) {
    status.textContent = e instanceof ApiError && e.status === 404 ? "forecast unavailable" : `forecast: ${describe(e)}`;
    clear($("forecast-chart"));
  }
}

// -- groups and DLQ ---------------------------------------------------------------

function showGroups(metrics) {
  const backlog = byLabel(metrics, "horologe_ready_unacked", "group");
  const dlq = byLabel(metrics, "horologe_dlq_messages", "group");
  const groups = [...new Set([...Object.keys(backlog), ...Object.keys(dlq)])].sort();
  rows($("groups"), groups.map((g) => ({ group: g })), "group", (tr, r) => {
    cell(tr, r.group);
    cell(tr, backlog[r.group] ?? 0, "num");
    cell(tr, dlq[r.group] ?? 0, "num dlq");
    const td = cell(tr, "");
    if (dlq[r.group] && r.group !== "other") {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "browse";
      b.textContent = "Browse DLQ";
      b.addEventListener("click", () => openDlq(r.group));
      td.textContent = "";
      td.appendChild(b);
    }
  });
}

async function openDlq(group, after) {
  state.dlq = { group, after };
  $("dlq").hidden = false;
  $("dlq-group").textContent = group;
  $("requeue-result").textContent = "";
  await loadDlq();
}

async function loadDlq() {
  const { group, after } = state.dlq;
  const q = new URLSearchParams({ limit: 50 });
  if (after !== undefined) q.set("after", after);
  try {
    const r = await call(`/admin/dlq/${encodeURIComponent(group)}?${q}`, { to: "master" });
    state.dlq.next = r.next_after;
    $("dlq-unacked").textContent = `${r.unacked} not yet acked`;
    $("dlq-more").hidden = r.next_after === null;
    $("dlq-select-all").checked = false;
    rows($("dlq-entries"), r.messages, "id", (tr, m) => {
      tr.dataset.position = m.position;
      const box = document.createElement("input");
      box.type = "checkbox";
      box.className = "pick";
      cell(tr, "").appendChild(box);
      cell(tr, m.position, "num");
      cell(tr, m.id, "mono");
      cell(tr, m.topic);
      cell(tr, (m.tags || []).join(", "));
      cell(tr, m.attempt, "num");
      cell(tr, when(m.deliver_at));
      cell(tr, when(m.delivered_at));
      const body = m.expired ? "(removed by retention)" : m.body ?? `(binary, base64 ${m.body_b64.length} chars)`;
      cell(tr, body.length > 80 ? `${body.slice(0, 80)}…` : body, "body");
    });
  } catch (e) {
    $("requeue-result").textContent = `could not read the DLQ: ${describe(e)}`;
  }
}

async function requeue(all) {
  const { group } = state.dlq;
  const ids = [...$("dlq-entries").querySelectorAll("tr")]
    .filter((tr) => tr.querySelector("input.pick").checked)
    .map((tr) => tr.dataset.id);
  if (!all && !ids.length) {
    $("requeue-result").textContent = "select entries first";
    return;
  }
  const body = all ? { all: true } : { ids: [...new Set(ids)] };
  try {
    const r = await call(`/admin/dlq/${encodeURIComponent(group)}/requeue`, { method: "POST", body, to: "master" });
    const topics = [...new Set(r.requeued.map((m) => m.topic))].join(", ");
    let text = `requeued ${r.requeued.length}${topics ? ` to ${topics}` : ""}; ${r.remaining} left in the DLQ`;
    if (r.missing.length) text += `; not found: ${r.missing.join(", ")}`;
    if (r.expired.length) text += `; removed by retention (acked): ${r.expired.join(", ")}`;
    if (r.leased?.length) text += `; held by a consumer of the DLQ, left to it: ${r.leased.join(", ")}`;
    $("requeue-result").textContent = text;
  } catch (e) {
    $("requeue-result").textContent = `requeue failed: ${describe(e)}`;
  }
  state.dlq.after = undefined;
  await loadDlq();
  refreshSoon();
}

// -- the loop ---------------------------------------------------------------------

async function refresh() {
  if (!token("admin") || !token("client")) {
    problem("Enter the client and admin tokens to read the cluster.");
    return;
  }
  try {
    await readCluster();
    showCluster();
    const local = parseMetrics(await call("/metrics"));
    let masterMetrics = null;
    if (state.master && state.master.node_id === state.self.node_id) masterMetrics = local;
    else if (state.master) masterMetrics = parseMetrics(await call("/metrics", { to: "master" }).catch(() => ""));
    showWheel(masterMetrics);
    showPending(local);
    showGroups(local);
    await showForecast();
    problem(state.nodes.some((n) => !n.status) ? "Some nodes do not answer (see Cluster)." : "");
    $("refreshed").textContent = `read ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    problem(`Cannot read this node: ${describe(e)}`);
  }
}

function refreshSoon(delay = 0) {
  clearTimeout(state.timer);
  state.timer = setTimeout(async () => {
    await refresh();
    refreshSoon(REFRESH_MS);
  }, delay);
}

function start() {
  $("token-client").value = token("client");
  $("token-admin").value = token("admin");
  $("tokens").addEventListener("submit", (ev) => {
    ev.preventDefault();
    setTokens($("token-client").value.trim(), $("token-admin").value.trim());
    refreshSoon();
  });
  $("token-forget").addEventListener("click", () => {
    setTokens("", "");
    $("token-client").value = $("token-admin").value = "";
    refreshSoon();
  });
  $("release-btn").addEventListener("click", releaseMaster);
  $("forecast-bucket").addEventListener("change", showForecast);
  $("forecast-topic").addEventListener("change", showForecast);
  $("requeue-selected").addEventListener("click", () => requeue(false));
  $("requeue-all").addEventListener("click", () => requeue(true));
  $("dlq-more").addEventListener("click", () => {
    state.dlq.after = state.dlq.next;
    loadDlq();
  });
  $("dlq-close").addEventListener("click", () => {
    $("dlq").hidden = true;
    state.dlq = null;
  });
  $("dlq-select-all").addEventListener("change", (ev) => {
    for (const box of $("dlq-entries").querySelectorAll("input.pick")) box.checked = ev.target.checked;
  });
  refreshSoon();
}

start();
