// Artimon's dashboard page: plain JavaScript over uPlot (static/vendor/), no build step.
//
// The page shows either one ad hoc query (?q=...) or a saved dashboard (?d=name), over the
// last `range` (?range=1h) refreshed every `refresh` seconds (?refresh=30), as charts or
// tables (?view=table): the URL holds the whole state, so a link shows what you see.
// Every query is POST api/v1/query with {query, start, end}; a fetch() that names no range
// of its own reads the picked one. Data never goes through innerHTML.
"use strict";

(() => {
  const UNITS = { ms: 1, s: 1e3, m: 6e4, h: 3.6e6, d: 8.64e7, w: 6.048e8 };
  const COLORS = [
    "#2f6fdf", "#e8743b", "#19a979", "#d64550", "#945ecf", "#13a4b4", "#bf8b2e",
    "#e56db1", "#6c8893", "#88b04b", "#525df4", "#a3502f",
  ];
  const TOKEN_KEY = "artimon.token";
  const CHART_HEIGHT = 240;
  const MAX_TABLE_ROWS = 500;
  const $ = (id) => document.getElementById(id);
  const stamp = uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}");

  const state = { name: "", query: "", range: "1h", refresh: 0, table: false };
  let panels = [];
  let timer = null;
  let generation = 0; // bumped by every show(): answers for an older page are dropped

  // ---- small helpers ----------------------------------------------------------------

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function durationMs(text) {
    const match = /^(\d+)(ms|s|m|h|d|w)$/.exec(text || "");
    return match ? Number(match[1]) * UNITS[match[2]] : null;
  }

  function format(value) {
    if (value === null || value === undefined || Number.isNaN(value)) return "—";
    const size = Math.abs(value);
    for (const [scale, suffix] of [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (size >= scale) return `${Number((value / scale).toPrecision(3))}${suffix}`;
    }
    if (size !== 0 && size < 1e-3) return value.toExponential(2);
    return String(Number(value.toPrecision(4)));
  }

  function lastValue(values) {
    for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i];
    return null;
  }

  function seriesKey(series) {
    const labels = Object.keys(series.labels).sort().map((k) => `${k}=${series.labels[k]}`);
    return `${series.name}{${labels.join(",")}}`;
  }

  // Legend labels: only the labels that differ between series (and the name if names
  // differ), as query_dsl/dashboards/render.py does for the PNG.
  function seriesLabels(list) {
    const keys = new Set();
    list.forEach((s) => Object.keys(s.labels).forEach((k) => keys.add(k)));
    const varying = [...keys].filter((k) => new Set(list.map((s) => s.labels[k])).size > 1).sort();
    const namesDiffer = new Set(list.map((s) => s.name)).size > 1;
    return list.map((s) => {
      const parts = varying.filter((k) => k in s.labels).map((k) => `${k}=${s.labels[k]}`).join(", ");
      if (namesDiffer || !parts) return parts ? `${s.name}{${parts}}` : s.name;
      return parts;
    });
  }

  // ---- the URL is the state ---------------------------------------------------------

  function readUrl() {
    const params = new URLSearchParams(location.search);
    state.query = params.get("q") || "";
    state.name = state.query ? "" : params.get("d") || "";
    state.range = durationMs(params.get("range")) ? params.get("range") : "";
    state.refresh = params.has("refresh") ? Math.max(0, Number(params.get("refresh")) || 0) : null;
    state.table = params.get("view") === "table";
  }

  function writeUrl(push) {
    const params = new URLSearchParams();
    if (state.query) params.set("q", state.query);
    else if (state.name) params.set("d", state.name);
    params.set("range", state.range);
    params.set("refresh", String(state.refresh));
    if (state.table) params.set("view", "table");
    const url = `?${params}`;
    if (url !== location.search) history[push ? "pushState" : "replaceState"](null, "", url);
  }

  function syncControls() {
    $("query").value = state.query;
    fitQueryBox();
    ensureOption($("range"), state.range, `last ${state.range}`);
    ensureOption($("refresh"), String(state.refresh), `${state.refresh}s`);
    $("table-toggle").checked = state.table;
    $("dashboard-select").value = state.query ? "" : state.name;
  }

  function ensureOption(select, value, text) {
    if (![...select.options].some((o) => o.value === value)) select.append(new Option(text, value));
    select.value = value;
  }

  // ---- the API ----------------------------------------------------------------------

  async function api(path, init = {}) {
    const headers = { ...init.headers };
    const token = localStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(path, { ...init, headers });
    const json = (response.headers.get("content-type") || "").includes("json");
    if (response.ok) return json ? response.json() : response;
    const body = json ? await response.json() : null;
    const detail = body && body.error
      ? { ...body.error }
      : { kind: `HTTP ${response.status}`, message: body && body.detail ? JSON.stringify(body.detail) : response.statusText };
    if (response.status === 401) detail.message += " (set the API token: Token, top right)";
    throw Object.assign(new Error(detail.message), { detail });
  }

  function timeRange() {
    const end = Date.now();
    return { start: end - durationMs(state.range), end };
  }

  function query(text) {
    return api("api/v1/query", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query: text, ...timeRange() }),
    });
  }

  // ---- panels -----------------------------------------------------------------------

  const resizer = new ResizeObserver((entries) => {
    for (const entry of entries) {
      const panel = panels.find((p) => p.element === entry.target);
      if (panel && panel.plot) panel.plot.setSize({ width: chartWidth(panel), height: CHART_HEIGHT });
    }
  });

  function chartWidth(panel) {
    return Math.max(200, panel.body.clientWidth);
  }

  function createPanel(spec, adhoc) {
    const panel = { spec, adhoc, plot: null, keys: "", answer: null, busy: false, again: false };
    panel.element = element("section", "panel");
    panel.element.style.gridColumn = `span ${spec.width}`;
    panel.element.dataset.state = "loading";
    const header = element("header");
    const title = element("h2");
    panel.link = element("a", "", spec.title || spec.query);
    panel.link.title = adhoc ? spec.query : `Explore: ${spec.query}`;
    title.append(panel.link);
    panel.meta = element("span", "meta");
    const png = element("button", "png", "PNG");
    png.type = "button";
    png.title = "Download this panel as a PNG (api/v1/render)";
    png.addEventListener("click", () => downloadPng(panel));
    header.append(title, panel.meta, png);
    panel.body = element("div", "body");
    panel.error = element("pre", "panel-error");
    panel.error.hidden = true;
    panel.warning = element("pre", "panel-warning"); // why an answer is empty, when the server knows
    panel.warning.hidden = true;
    panel.element.append(header, panel.body, panel.warning, panel.error);
    resizer.observe(panel.element);
    return panel;
  }

  async function update(panel, page) {
    if (panel.busy) {
      panel.again = true; // asked again mid-flight (a new range): run once more after this answer
      return;
    }
    panel.busy = true;
    panel.link.href = `?${new URLSearchParams({ q: panel.spec.query, range: state.range })}`;
    try {
      const answer = await query(panel.spec.query);
      if (page !== generation) return;
      panel.answer = answer;
      panel.error.hidden = true;
      const warnings = answer.warnings || [];
      panel.warning.textContent = warnings.map((w) => `⚠ ${w}`).join("\n");
      panel.warning.hidden = warnings.length === 0;
      if (panel.adhoc) hideQueryError();
      draw(panel);
      panel.element.dataset.state = "ok";
    } catch (error) {
      if (page !== generation) return;
      const detail = error.detail || { kind: "Error", message: String(error.message || error) };
      panel.element.dataset.state = "error";
      panel.warning.hidden = true;
      panel.meta.textContent = detail.kind;
      clearBody(panel);
      if (panel.adhoc) {
        showQueryError(detail);
      } else {
        panel.error.textContent = detail.message;
        panel.error.hidden = false;
      }
    } finally {
      panel.busy = false;
      if (panel.again && page === generation) {
        panel.again = false;
        update(panel, page);
      }
    }
  }

  function clearBody(panel) {
    if (panel.plot) panel.plot.destroy();
    panel.plot = null;
    panel.keys = "";
    panel.body.textContent = "";
  }

  function draw(panel) {
    const answer = panel.answer;
    if (!answer) return;
    if (answer.series === null || answer.series === undefined) {
      clearBody(panel);
      panel.element.dataset.series = "0";
      panel.meta.textContent = `a number · ${Math.round(answer.took_ms)} ms`;
      panel.body.append(element("div", "scalar", format(answer.scalar)));
      return;
    }
    // STRING series come as text (answer.strings), their numeric rows only as nulls
    const texts = answer.strings || [];
    const textKeys = new Set(texts.map(seriesKey));
    const list = answer.series.filter((s) => !textKeys.has(seriesKey(s)));
    panel.element.dataset.series = String(list.length);
    panel.element.dataset.strings = String(texts.length);
    panel.element.dataset.points = String(list.length ? list[0].timestamps.length : 0);
    panel.meta.textContent = `${list.length} series${texts.length ? ` · ${texts.length} texts` : ""} · ${Math.round(answer.took_ms)} ms`;
    if (list.length === 0) {
      clearBody(panel);
      if (!texts.length) panel.body.append(element("div", "empty", "no series in this range"));
    } else if (state.table || panel.spec.type === "table") {
      drawTable(panel, list);
    } else {
      drawChart(panel, list);
    }
    if (texts.length) drawStrings(panel, texts);
  }

  function drawStrings(panel, texts) {
    // after a chart, uPlot keeps its plot: the text table goes below it, replaced each time
    panel.body.querySelectorAll("table.strings-table").forEach((old) => old.remove());
    const labelNames = [...new Set(texts.flatMap((s) => Object.keys(s.labels)))].sort();
    const table = element("table", "series-table strings-table");
    const head = table.createTHead().insertRow();
    for (const name of ["name", ...labelNames, "value", "sampled"]) head.append(element("th", "", name));
    const rows = table.createTBody();
    for (const s of texts.slice(0, MAX_TABLE_ROWS)) {
      const row = rows.insertRow();
      row.insertCell().textContent = s.name;
      for (const name of labelNames) row.insertCell().textContent = s.labels[name] ?? "";
      row.insertCell().textContent = s.value;
      row.insertCell().textContent = stamp(new Date(s.timestamp));
    }
    panel.body.append(table);
  }

  function drawChart(panel, list) {
    const data = [list[0].timestamps.map((t) => t / 1000), ...list.map((s) => s.values)];
    const keys = list.map(seriesKey).join("\n");
    if (panel.plot && panel.keys === keys) {
      panel.plot.setData(data);
      return;
    }
    clearBody(panel);
    panel.keys = keys;
    const labels = seriesLabels(list);
    const grid = { stroke: "#e8ecf2", width: 1 };
    // off the chart the legend shows each series' latest value, on it the value under the cursor
    const latest = (u, v, i, idx) => format(idx === null ? lastValue(u.data[i]) : v);
    panel.plot = new uPlot(
      {
        width: chartWidth(panel),
        height: CHART_HEIGHT,
        series: [
          { value: (u, v, i, idx) => (idx === null ? "latest" : stamp(new Date(v * 1000))) },
          ...labels.map((label, i) => ({ label, stroke: COLORS[i % COLORS.length], width: 1.5, value: latest })),
        ],
        axes: [
          { stroke: "#5b6675", grid, ticks: grid },
          { stroke: "#5b6675", grid, ticks: grid, size: 56, values: (u, splits) => splits.map(format) },
        ],
        cursor: { focus: { prox: 24 } },
        focus: { alpha: 0.35 },
      },
      data,
      panel.body,
    );
    panel.body.querySelectorAll(".u-legend .u-series").forEach((row, i) => {
      if (i > 0) row.title = seriesKey(list[i - 1]);
    });
  }

  function drawTable(panel, list) {
    clearBody(panel);
    const allNames = [...new Set(list.flatMap((s) => Object.keys(s.labels)))].sort();
    // a label with one value in every row tells the rows apart no better than the title: it is
    // said once above the table, so a narrow panel keeps room for last, min, max and mean
    const everywhere = (n) => list.every((s) => s.labels[n] === list[0].labels[n]);
    const shared = list.length > 1 ? allNames.filter(everywhere) : [];
    const labelNames = allNames.filter((n) => !shared.includes(n));
    if (shared.length) {
      panel.body.append(element("div", "table-shared", shared.map((n) => `${n}=${list[0].labels[n]}`).join(" ")));
    }
    const named = list.some((s) => s.name); // an operator's result has no name: no empty column
    const table = element("table", "series-table");
    const head = table.createTHead().insertRow();
    for (const name of [...(named ? ["name"] : []), ...labelNames, "last", "min", "max", "mean"]) {
      head.append(element("th", "", name));
    }
    const rows = table.createTBody();
    for (const s of list.slice(0, MAX_TABLE_ROWS)) {
      const values = s.values.filter((v) => v !== null);
      const row = rows.insertRow();
      if (named) row.insertCell().textContent = s.name;
      for (const name of labelNames) row.insertCell().textContent = s.labels[name] ?? "";
      const some = values.length > 0;
      const mean = some ? values.reduce((a, b) => a + b, 0) / values.length : null;
      const stats = [lastValue(s.values), some ? Math.min(...values) : null, some ? Math.max(...values) : null, mean];
      for (const v of stats) {
        const cell = row.insertCell();
        cell.className = "number";
        cell.textContent = format(v);
        if (v !== null) cell.title = String(v);
      }
    }
    panel.body.append(table);
    if (list.length > MAX_TABLE_ROWS) {
      panel.body.append(element("div", "empty", `the first ${MAX_TABLE_ROWS} of ${list.length} series`));
    }
  }

  async function downloadPng(panel) {
    const params = new URLSearchParams({ q: panel.spec.query, width: "1000", height: "450", ...timeRange() });
    if (panel.spec.title) params.set("title", panel.spec.title);
    try {
      const response = await api(`api/v1/render?${params}`);
      const url = URL.createObjectURL(await response.blob());
      const link = element("a");
      link.href = url;
      link.download = `${(panel.spec.title || "query").replace(/[^\w.-]+/g, "_")}.png`;
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (error) {
      panel.error.textContent = (error.detail || error).message;
      panel.error.hidden = false;
    }
  }

  // ---- the query box and its error ----------------------------------------------------

  function showQueryError(detail) {
    const box = $("query-error");
    box.textContent = "";
    box.append(element("span", "kind", detail.kind));
    if (detail.line) {
      const where = element("button", "where", `line ${detail.line}, column ${detail.column}`);
      where.type = "button";
      where.title = "Put the cursor there";
      where.addEventListener("click", () => focusAt(detail.line, detail.column));
      box.append(where);
      box.dataset.line = detail.line;
      box.dataset.column = detail.column;
    } else {
      delete box.dataset.line;
      delete box.dataset.column;
    }
    box.append(element("pre", "message", detail.message));
    box.hidden = false;
    $("query").classList.add("invalid");
  }

  function hideQueryError() {
    $("query-error").hidden = true;
    $("query").classList.remove("invalid");
  }

  function focusAt(line, column) {
    const box = $("query");
    const lines = box.value.split("\n");
    let offset = column - 1;
    for (let i = 0; i < line - 1 && i < lines.length; i++) offset += lines[i].length + 1;
    box.focus();
    box.setSelectionRange(offset, Math.min(offset + 1, box.value.length));
  }

  function fitQueryBox() {
    const box = $("query");
    box.rows = Math.min(8, Math.max(1, box.value.split("\n").length));
  }

  // ---- pages --------------------------------------------------------------------------

  async function loadList() {
    const select = $("dashboard-select");
    const list = $("dashboard-list");
    select.length = 1;
    list.textContent = "";
    let dashboards = [];
    try {
      dashboards = (await api("api/v1/dashboards")).dashboards;
    } catch (error) {
      notice(`Dashboards could not be listed: ${error.message}`);
    }
    for (const d of dashboards) {
      select.append(new Option(d.error ? `${d.name} (invalid)` : d.title, d.name));
      const item = element("li");
      const link = element("a", "", d.title || d.name);
      link.href = `?${new URLSearchParams({ d: d.name })}`;
      item.append(link, element("span", "meta", d.error ? "" : ` ${d.name} · ${d.panels} panels`));
      if (d.error) item.append(element("pre", "panel-error", d.error));
      list.append(item);
    }
    if (!dashboards.length) list.append(element("li", "meta", "No saved dashboards (artimon api --dashboards DIR)."));
    select.value = state.name;
  }

  function notice(text) {
    $("notice").textContent = text;
    $("notice").hidden = !text;
  }

  async function show(useDefaults) {
    const page = ++generation;
    stopTimer();
    panels.forEach((p) => { resizer.unobserve(p.element); clearBody(p); });
    panels = [];
    $("panels").textContent = "";
    $("dashboard-list").hidden = true;
    notice("");
    hideQueryError();
    let specs = [];
    if (state.query) {
      $("title").textContent = "Query";
      specs = [{ title: "", query: state.query, type: "line", width: 12 }];
    } else if (state.name) {
      $("title").textContent = state.name;
      let dashboard;
      try {
        dashboard = await api(`api/v1/dashboards/${encodeURIComponent(state.name)}`);
      } catch (error) {
        if (page === generation) notice(error.message);
        return;
      }
      if (page !== generation) return;
      $("title").textContent = dashboard.title;
      if (useDefaults || !state.range) state.range = dashboard.range;
      if (useDefaults || state.refresh === null) state.refresh = dashboard.refresh;
      specs = dashboard.panels;
    } else {
      $("title").textContent = "Dashboards";
      $("dashboard-list").hidden = false;
    }
    state.range = state.range || "1h";
    state.refresh = state.refresh || 0;
    document.title = `${$("title").textContent} · Artimon`;
    syncControls();
    writeUrl(false);
    panels = specs.map((spec) => createPanel(spec, Boolean(state.query)));
    $("panels").append(...panels.map((p) => p.element));
    refreshAll();
    startTimer();
  }

  function refreshAll() {
    const page = generation;
    panels.forEach((panel) => update(panel, page));
    $("updated").textContent = panels.length ? `updated ${new Date().toLocaleTimeString()}` : "";
  }

  function startTimer() {
    if (state.refresh > 0) {
      timer = setInterval(() => { if (!document.hidden) refreshAll(); }, state.refresh * 1000);
    }
  }

  function stopTimer() {
    clearInterval(timer);
    timer = null;
  }

  // ---- controls -------------------------------------------------------------------------

  function run() {
    state.query = $("query").value.trim();
    writeUrl(true);
    show(false);
  }

  $("run").addEventListener("click", run);
  $("query").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      run();
    }
  });
  $("query").addEventListener("input", () => { fitQueryBox(); hideQueryError(); });
  $("dashboard-select").addEventListener("change", (event) => {
    state.name = event.target.value;
    state.query = "";
    writeUrl(true);
    show(true);
  });
  $("range").addEventListener("change", (event) => {
    state.range = event.target.value;
    writeUrl(false);
    refreshAll();
  });
  $("refresh").addEventListener("change", (event) => {
    state.refresh = Number(event.target.value);
    writeUrl(false);
    stopTimer();
    startTimer();
  });
  $("refresh-now").addEventListener("click", refreshAll);
  $("table-toggle").addEventListener("change", (event) => {
    state.table = event.target.checked;
    writeUrl(false);
    panels.forEach((p) => { clearBody(p); draw(p); });
  });
  $("token").value = localStorage.getItem(TOKEN_KEY) || "";
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    $("token").blur(); // commits the value: "change" below
  });
  $("token").addEventListener("change", (event) => {
    const token = event.target.value.trim();
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
    loadList();
    show(false);
  });
  window.addEventListener("popstate", () => { readUrl(); show(false); });

  readUrl();
  loadList();
  show(false);
})();
