// Sluice dashboard: polls the admin API once a second and renders it.
//
// The admin token is asked for once, kept in sessionStorage (this tab only, gone when it closes)
// and sent as `Authorization: Bearer`; it never appears in a URL. Every value from the server is
// written with textContent: identities come from clients and are never interpreted as HTML.
"use strict";

const TOKEN_KEY = "sluice-admin-token";
const POLL_MS = 1000;
const $ = (selector) => document.querySelector(selector);

let timer = null;
let clockOffsetMs = 0;      // server clock minus this browser's clock
let previous = null;        // the last stats, for rates
let blocks = [];

function token() { return sessionStorage.getItem(TOKEN_KEY); }

async function api(method, path, body) {
  const headers = { "Authorization": "Bearer " + token() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401 || response.status === 404 && path !== "/v1/rules") {
    const text = await response.json().then((j) => j.error.message).catch(() => response.statusText);
    throw Object.assign(new Error(text), { auth: true });
  }
  if (!response.ok) {
    const text = await response.json().then((j) => j.error.message).catch(() => response.statusText);
    throw new Error(path + ": " + text);
  }
  return response.json();
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function describeLimit(limit) {
  const by = (limit.by || []).join(", ") || "everyone";
  if (limit.algorithm === "concurrency") {
    return limit.max_leases + " at once (concurrency, leases of " + limit.lease + ") per " + by;
  }
  const burst = limit.burst ? " burst " + limit.burst : "";
  const block = limit.block ? ", block " + limit.block : "";
  const settable = limit.settable ? " (settable)" : "";
  return limit.rate + " " + limit.algorithm + burst + " per " + by + block + settable;
}

function renderRules(rules, stats) {
  const tbody = $("#rules tbody");
  tbody.replaceChildren();
  const seconds = previous ? (stats.now_ms - previous.now_ms) / 1000 : 0;
  for (const [name, rule] of Object.entries(rules.rules)) {
    const counts = stats.rules[name] || {};
    const before = (previous && previous.rules[name]) || {};
    const rate = (key) => seconds > 0
      ? (((counts[key] || 0) - (before[key] || 0)) / seconds).toFixed(1) : "–";
    const row = tbody.insertRow();
    row.dataset.rule = name;
    cell(row, name);
    cell(row, (rule.limits || []).map(describeLimit).join("; "), "limits");
    cell(row, rate("allowed"), "num allowed-rate");
    cell(row, rate("denied"), "num denied-rate");
    cell(row, String(counts.allowed || 0), "num allowed");
    cell(row, String(counts.denied || 0), "num denied" + (counts.denied ? " hot" : ""));
    cell(row, String(counts.shadow_denied || 0), "num shadow-denied");
    cell(row, String(counts.degraded || 0), "num degraded");
    const batch = counts.batch;
    cell(row, batch ? String(batch.held) : "–", "num held");
    cell(row, batch ? String(batch.given_back) : "–", "num given-back");
  }
  const top = $("#top tbody");
  top.replaceChildren();
  for (const [name, counts] of Object.entries(stats.rules)) {
    for (const entry of counts.top_denied || []) {
      const row = top.insertRow();
      cell(row, name);
      cell(row, entry.identity, "identity");
      cell(row, String(entry.denials), "num");
    }
  }
}

function countdown(untilMs) {
  const left = Math.max(0, Math.ceil((untilMs - (Date.now() + clockOffsetMs)) / 1000));
  const h = Math.floor(left / 3600), m = Math.floor(left / 60) % 60, s = left % 60;
  const pad = (n) => String(n).padStart(2, "0");
  return (h ? h + ":" + pad(m) : String(m)) + ":" + pad(s);
}

function renderBlocks() {
  const tbody = $("#blocks tbody");
  tbody.replaceChildren();
  for (const block of blocks) {
    const row = tbody.insertRow();
    row.dataset.rule = block.rule;
    row.dataset.identity = block.identity;
    cell(row, block.rule);
    cell(row, block.limit);
    cell(row, block.identity, "identity");
    cell(row, countdown(block.blocked_until_ms), "num countdown").dataset.until = block.blocked_until_ms;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "lift";
    button.textContent = "Lift";
    button.addEventListener("click", () => lift(block, button));
    row.insertCell().append(button);
  }
  $("#no-blocks").hidden = blocks.length > 0;
}

function describeRuntime(entry) {
  if (entry.max_leases !== undefined) return entry.max_leases + " at once";
  if (entry.quota !== undefined || entry.anchor !== undefined) {
    // A quota: its own count, its own billing day, or both.
    const parts = [];
    if (entry.quota !== undefined) parts.push("quota " + entry.quota);
    if (entry.anchor !== undefined) parts.push("from day " + entry.anchor);
    return parts.join(", ");
  }
  return entry.rate + (entry.burst ? " burst " + entry.burst : "");
}

function renderRuntime(entries) {
  const tbody = $("#runtime tbody");
  tbody.replaceChildren();
  for (const entry of entries) {
    const row = tbody.insertRow();
    row.dataset.rule = entry.rule;
    row.dataset.identity = entry.identity;
    cell(row, entry.rule);
    cell(row, entry.limit);
    cell(row, entry.identity, "identity");
    cell(row, describeRuntime(entry), "runtime-set");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "remove";
    button.textContent = "Remove";
    button.addEventListener("click", () => removeRuntime(entry, button));
    row.insertCell().append(button);
  }
  $("#no-runtime").hidden = entries.length > 0;
}

// Listings show escaped identities (`customer=42`); removal takes attributes, so an entry is
// removed by its attributes when its identity is plain `name=value` pairs.
async function removeRuntime(entry, button) {
  const attributes = {};
  for (const part of entry.identity.split(",")) {
    const at = part.indexOf("=");
    if (at <= 0 || part.slice(at + 1).startsWith("~")) {
      showError(new Error("remove " + entry.identity + " with `sluice limits remove`: its value is hashed"));
      return;
    }
    attributes[part.slice(0, at)] = part.slice(at + 1);
  }
  button.disabled = true;
  try {
    await api("DELETE", "/v1/limits", { rule: entry.rule, limit: entry.limit, attributes });
    button.closest("tr").remove();
    $("#no-runtime").hidden = $("#runtime tbody").rows.length > 0;
  } catch (error) {
    button.disabled = false;
    showError(error);
  }
}

function tickCountdowns() {
  for (const td of document.querySelectorAll("#blocks .countdown")) {
    td.textContent = countdown(Number(td.dataset.until));
  }
}

async function lift(block, button) {
  button.disabled = true;
  try {
    await api("POST", "/v1/blocks/lift", { rule: block.rule, limit: block.limit, identity: block.identity });
    blocks = blocks.filter((b) => b !== block);
    renderBlocks();
  } catch (error) {
    button.disabled = false;
    showError(error);
  }
}

function showError(error) {
  if (error.auth) {
    signOut(error.message);
  } else {
    $("#error").textContent = error.message;
  }
}

async function refresh() {
  try {
    const [stats, rules, listed, runtime] = await Promise.all([
      api("GET", "/v1/stats"), api("GET", "/v1/rules"), api("GET", "/v1/blocks"),
      api("GET", "/v1/limits"),
    ]);
    clockOffsetMs = stats.now_ms - Date.now();
    $("#version").textContent = "rules " + stats.version.slice(0, 12) + " loaded "
      + new Date(stats.loaded_at_ms).toLocaleString() + (stats.enabled ? "" : " — limiter disabled");
    const store = $("#store");
    store.textContent = stats.store.name + (stats.store.healthy ? " healthy" : " down")
      + (stats.store.skipped ? " (skipped)" : "");
    store.title = stats.store.error || "";
    store.className = "badge " + (stats.store.healthy ? "ok" : "bad");
    renderRules(rules, stats);
    blocks = listed.blocks;
    renderBlocks();
    renderRuntime(runtime.limits);
    previous = stats;
    $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
    $("#error").textContent = "";
  } catch (error) {
    showError(error);
  }
}

function start() {
  $("#login").hidden = true;
  $("#board").hidden = false;
  $("#logout").hidden = false;
  previous = null;
  refresh();
  clearInterval(timer);
  timer = setInterval(() => { refresh(); }, POLL_MS);
}

function signOut(message) {
  clearInterval(timer);
  sessionStorage.removeItem(TOKEN_KEY);
  $("#board").hidden = true;
  $("#logout").hidden = true;
  $("#login").hidden = false;
  $("#login-error").textContent = message || "";
  $("#token").focus();
}

document.addEventListener("DOMContentLoaded", () => {
  $("#login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
    $("#token").value = "";
    start();
  });
  $("#logout").addEventListener("click", () => signOut());
  setInterval(tickCountdowns, 250);
  if (token()) start(); else signOut();
});
