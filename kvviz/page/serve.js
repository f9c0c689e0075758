/* kvviz serve page: a serve record drawn at one step, scheduler beside scheduler, as the Serve view draws it
   (kvviz/ui/serve): the request timeline, the block pool, the counters and the narration. page.js (after this
   file) gives the words, formatters and drawing helpers, then calls window.kvvizServe. */
"use strict";
window.kvvizServe = function (lib) {
  const { DATA, tr, pyFormat, fixed, commas, esc, hex, fitCanvas, swatch } = lib;
  const RUNS = DATA.schedulers, KINDS = DATA.cell_kinds, COLORS = KINDS.map(k => hex(DATA.cell_colors[k]));
  const FREE = "#ececec", CACHED = "#555555", SELECTED = "#202020";
  for (const r of RUNS) { const raw = atob(r.cells); r.grid = new Uint8Array(raw.length); for (let i = 0; i < raw.length; i++) r.grid[i] = raw.charCodeAt(i); }
  const el = {};
  const grid = document.getElementById("grid");
  grid.style.gridTemplateColumns = "minmax(0, 3fr) minmax(0, 2fr)";
  grid.style.gridTemplateRows = "minmax(0, 3fr) minmax(0, 2fr)";
  for (const key of ["timeline", "pool", "counters"]) {
    const section = document.createElement("section");
    section.className = "panel"; section.id = "panel-" + key;
    section.innerHTML = `<h2></h2><div class="legend cols"></div>` + (key === "counters" ? `<div class="body"></div>` : `<canvas></canvas>`);
    if (key === "timeline") section.style.gridRow = "1 / span 2";
    grid.appendChild(section);
    el[key] = { title: section.querySelector("h2"), legend: section.querySelector(".legend"), canvas: section.querySelector("canvas"), body: section.querySelector(".body") };
  }
  const clamp = (r, k) => Math.min(k, r.steps.length - 1);
  function requestColor(i) { return DATA.palette[i % DATA.palette.length]; }

  // The narration (kvviz/ui/serve/narration.py): one sentence per scheduler.
  function describeStep(s) {
    const N = t => tr("ServeNarration", t), out = [];
    for (const r of s.fin) out.push(pyFormat(N("request {0} finished and left"), { 0: r }));
    for (const r of s.adm) {
      const hit = s.hit[String(r)];
      out.push(hit ? pyFormat(N("request {0} joined and reused {1} blocks of a cached prefix ({2} tokens not prefilled)"), { 0: r, 1: hit[0], 2: hit[1] })
        : pyFormat(N("request {0} joined"), { 0: r }));
    }
    for (const p of s.pre) out.push(pyFormat(N("request {0} was preempted ({1} blocks freed, {2} positions to compute again)"), { 0: p[0], 1: p[1], 2: p[2] }));
    if (s.pad) out.push(pyFormat(N("{0} padding slots computed and thrown away"), { 0: s.pad }));
    if (s.idle) out.push(pyFormat(N("{0} idle slots of finished requests"), { 0: s.idle }));
    if (!s.work) out.push(N("nothing to run"));
    const used = [...s.states].filter(c => c === "u").length, cached = [...s.states].filter(c => c === "c").length;
    let tail = pyFormat(N("{0} of {1} blocks free"), { 0: s.states.length - used - cached, 1: s.states.length });
    if (cached) tail += pyFormat(N(" ({0} more cached)"), { 0: cached });
    out.push(tail);
    return out;
  }
  function narrate(k) {
    const N = t => tr("ServeNarration", t);
    return RUNS.map(r => k >= r.steps.length ? pyFormat(N("{0}: done after {1} steps"), { 0: r.name, 1: r.steps.length })
      : pyFormat(N("{0}, step {1}: {2}"), { 0: r.name, 1: k, 2: describeStep(r.steps[k]).join("; ") })).join(".  ");
  }

  function drawTimeline(k) {
    const T = t => tr("TimelinePanel", t);
    el.timeline.title.textContent = T("Request timeline");
    const names = { none: T("not arrived"), waiting: T("waiting"), prefill: T("prefill"), decode: T("decode"), padding: T("padding"),
      idle: T("idle slot"), preempted: T("preempted"), finished: T("finished") };
    el.timeline.legend.innerHTML = KINDS.filter(x => x !== "none").map(x => swatch(DATA.cell_colors[x], names[x], "square")).join("");
    const [ctx, w, h] = fitCanvas(el.timeline.canvas), n = DATA.n_requests, band = h / RUNS.length;
    RUNS.forEach((r, i) => {
      const y0 = i * band + 16, ph = band - 22, pw = w - 40, x0 = 34;
      ctx.font = "bold 12px sans-serif"; ctx.fillStyle = r.color; ctx.textAlign = "left"; ctx.textBaseline = "top";
      ctx.fillText(r.name, x0, i * band + 1);
      const cols = r.cols, img = new ImageData(Math.max(1, cols), Math.max(1, n));
      for (let q = 0; q < n; q++) for (let c = 0; c < cols; c++) {
        const rgb = COLORS[r.grid[q * cols + c]], o = 4 * (q * cols + c);
        img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
      }
      const tmp = document.createElement("canvas"); tmp.width = img.width; tmp.height = img.height; tmp.getContext("2d").putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = false; ctx.drawImage(tmp, x0, y0, pw, ph);
      ctx.strokeStyle = "#b0b0b0"; ctx.lineWidth = 1; ctx.strokeRect(x0 + 0.5, y0 + 0.5, pw - 1, ph - 1);
      const kk = clamp(r, k), a = r.x0[kk] / cols * pw, b = r.x0[kk + 1] / cols * pw;
      ctx.strokeStyle = SELECTED; ctx.lineWidth = 2; ctx.strokeRect(x0 + a - 1, y0 - 1, Math.max(2, b - a) + 2, ph + 2);
      ctx.font = "10px sans-serif"; ctx.fillStyle = "#303030"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
      const every = Math.max(1, Math.ceil(n / Math.max(1, ph / 12)));
      for (let q = 0; q < n; q += every) ctx.fillText(String(q), x0 - 3, y0 + (q + 0.5) * ph / n);
    });
  }
  function drawPool(k) {
    const P = t => tr("PoolPanel", t);
    el.pool.title.textContent = P("Block pool");
    el.pool.legend.innerHTML = "";
    const [ctx, w, h] = fitCanvas(el.pool.canvas), band = h / RUNS.length;
    RUNS.forEach((r, i) => {
      const s = r.steps[clamp(r, k)], n = s.states.length;
      const used = [...s.states].filter(c => c === "u").length, cached = [...s.states].filter(c => c === "c").length;
      let head = pyFormat(P("{0}: {1} of {2} blocks free"), { 0: r.name, 1: n - used - cached, 2: n });
      if (cached) head += pyFormat(P(", {0} cached"), { 0: cached });
      ctx.font = "12px sans-serif"; ctx.fillStyle = r.color; ctx.textAlign = "left"; ctx.textBaseline = "top";
      ctx.fillText(head, 4, i * band + 1);
      const top = i * band + 16, rw = w - 8, rh = band - 20, gap = 2;
      const cols = Math.max(1, Math.ceil(Math.sqrt(n * rw / Math.max(1, rh)))), rows = Math.ceil(n / cols);
      const size = Math.max(3, Math.min((rw - gap * cols) / cols, (rh - gap * rows) / Math.max(1, rows), 40));
      for (let b = 0; b < n; b++) {
        const x = 4 + (b % cols) * (size + gap), y = top + Math.floor(b / cols) * (size + gap), st = s.states[b];
        if (st === "u") {
          const c = requestColor(s.owner[b]);
          ctx.fillStyle = c; ctx.globalAlpha = 0.35; ctx.fillRect(x, y, size, size); ctx.globalAlpha = 1;
          const fill = Math.round(size * s.filled[b] / s.bs); ctx.fillRect(x, y + size - fill, size, fill);
        } else if (st === "c") {
          ctx.fillStyle = "#f4f4f4"; ctx.fillRect(x, y, size, size);  // cached, free: hatched (Qt's BDiagPattern)
          ctx.save(); ctx.beginPath(); ctx.rect(x, y, size, size); ctx.clip();
          ctx.strokeStyle = CACHED; ctx.lineWidth = 1; ctx.beginPath();
          for (let d = 0; d < 2 * size; d += 4) { ctx.moveTo(x + d, y); ctx.lineTo(x + d - size, y + size); }
          ctx.stroke(); ctx.restore();
        } else { ctx.fillStyle = FREE; ctx.fillRect(x, y, size, size); }
        ctx.strokeStyle = "#b0b0b0"; ctx.lineWidth = 1; ctx.strokeRect(x + 0.5, y + 0.5, size - 1, size - 1);
        if (s.refs[b] > 1 && size >= 12) { ctx.fillStyle = "#000"; ctx.textAlign = "center"; ctx.textBaseline = "middle"; ctx.font = "9px sans-serif"; ctx.fillText("\u00d7" + s.refs[b], x + size / 2, y + size / 2); }
      }
    });
  }
  function cellText(key, c) {
    if (key === "padding_share" || key === "idle_share" || key === "hit_rate") return fixed(100 * c[key], 0) + "%";
    if (key === "tokens_per_s") return commas(fixed(c[key], 0));
    return commas(String(Math.trunc(c[key])));
  }
  function drawCounters(k) {
    const C = t => tr("CountersPanel", t);
    el.counters.title.textContent = C("Counters");
    el.counters.legend.innerHTML = "";
    const rows = [["steps", C("steps")], ["padding", C("padding")], ["padding_share", C("padding %")], ["idle", C("idle")], ["idle_share", C("idle %")],
      ["hit_rate", C("prefix hits")], ["saved", C("tokens saved")], ["prefill", C("prefilled")], ["preemptions", C("preempted")], ["tokens", C("tokens")],
      ["tokens_per_s", C("tokens/s")], ["peak_blocks", C("peak blocks")]];
    let out = `<table class="summary"><thead><tr><th></th>${RUNS.map(r => `<th style="color:${r.color}">${esc(r.name)}</th>`).join("")}</tr></thead><tbody>`;
    for (const [key, name] of rows) out += `<tr data-key="${key}"><th class="row">${esc(name)}</th>` +
      RUNS.map(r => `<td data-scheduler="${esc(r.name)}">${cellText(key, r.counters[clamp(r, k)])}</td>`).join("") + "</tr>";
    el.counters.body.innerHTML = out + "</tbody></table>";
  }
  return {
    draw(k) {
      document.getElementById("narration").textContent = narrate(k);  // first: its height sets the panels'
      drawTimeline(k); drawPool(k); drawCounters(k);
    },
    label(k) { return pyFormat(tr("TransportBar", "{0} / {1} steps"), { 0: k, 1: DATA.range[1] }); },
    status() { return `${DATA.model.name}, ${DATA.model.device}, ${DATA.model.dtype} · ${DATA.workload}: ${DATA.n_requests} requests`; },
  };
};
