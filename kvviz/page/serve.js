/* kvviz serve page: a serve record drawn at one step, scheduler beside scheduler, as the Serve view draws it
   (kvviz/ui/serve): the request timeline, the block pool, pool use and batch size, latency per request, the
   counters, the selected request's text and the narration. A click on the timeline selects a request. Where vLLM ran
   beside the schedulers (DATA.vllm), its rows under theirs, its column in the counters, its line in the pool use and
   its sentence in the narration. Every sentence, figure and series is Python's (kvviz/page/serve.py), in both
   languages (the panels' titles, legends and axes too: DATA.words): this file draws and navigates. page.js (after
   this file) gives the drawing helpers, then calls window.kvvizServe. */
"use strict";
window.kvvizServe = function (lib) {
  const { DATA, say, atStep, esc, hex, fitCanvas, swatch, plot, redraw, zoom } = lib;
  const RUNS = DATA.schedulers, KINDS = DATA.cell_kinds, COLORS = KINDS.map(k => hex(DATA.cell_colors[k]));
  const FREE = "#ececec", CACHED = "#555555", SELECTED = "#202020", SELECTED_ROW = "#ffd54f";
  const V = DATA.vllm, BANDS = RUNS.concat(V ? [V] : []);  // the timeline's blocks: the schedulers', then vLLM's
  if (V) V.steps = new Array(V.at.length - 1);  // its timeline's records (rec and column read their count)
  const W = () => say(DATA.words);  // the panels' titles, legends, axes and counter names (Python's)
  for (const r of BANDS) { const raw = atob(r.cells); r.grid = new Uint8Array(raw.length); for (let i = 0; i < raw.length; i++) r.grid[i] = raw.charCodeAt(i); }
  const el = {};
  const grid = document.getElementById("grid");
  grid.style.gridTemplateColumns = "minmax(0, 5fr) minmax(0, 3fr) minmax(0, 3fr)";
  grid.style.gridTemplateRows = "minmax(0, 2fr) minmax(0, 2fr) minmax(0, 1fr)";
  const PLACE = { timeline: ["1", "1 / span 2"], text: ["1", "3"], pool: ["2", "1"], usage: ["3", "1"],
    counters: ["2", "2 / span 2"], latency: ["3", "2 / span 2"] };
  for (const key of ["timeline", "pool", "usage", "counters", "latency", "text"]) {
    const section = document.createElement("section");
    section.className = "panel"; section.id = "panel-" + key;
    const body = key === "counters" || key === "text";
    section.innerHTML = `<h2></h2><div class="legend ${key === "timeline" ? "cols" : ""}"></div>` + (body ? `<div class="body"></div>` : `<canvas></canvas>`);
    [section.style.gridColumn, section.style.gridRow] = PLACE[key];
    grid.appendChild(section);
    el[key] = { title: section.querySelector("h2"), legend: section.querySelector(".legend"), canvas: section.querySelector("canvas"), body: section.querySelector(".body") };
  }
  // r.steps holds one record per step, except a stretch with no request to run: one record from step r.at[i] to
  // r.at[i + 1] - 1 (r.at ends with the step count r.n). rec: the record that stands for step k (clamped).
  const clamp = (r, k) => Math.min(k, r.n - 1);
  function lastAt(xs, k, n = xs.length) {  // the last of xs[0..n) at or before k (xs ascending), -1 before the first
    let lo = -1, hi = n - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (xs[mid] <= k) lo = mid; else hi = mid - 1; }
    return lo;
  }
  const engineAt = k => lastAt(V.eng, k);  // vLLM's engine step at or before step k (its index in V.eng)
  const rec = (r, k) => Math.max(0, lastAt(r.at, clamp(r, k), r.steps.length));
  function column(r, k) {  // the first column of step k: a stretch's steps share its column in equal fractions
    if (k >= r.n) return r.x0[r.x0.length - 1];
    const i = rec(r, k);
    return r.x0[i] + (k - r.at[i]) / (r.at[i + 1] - r.at[i]) * (r.x0[i + 1] - r.x0[i]);
  }
  let request = 0;  // the selected request (the text panel's)
  let marks = null;  // a lesson scene's highlight: {request, block, scheduler, color} (page.js highlight)
  const css = document.createElement("style");  // the text panel's look (the view's: muted prompt, red note)
  css.textContent = "#panel-text p { margin: 2px 0; white-space: pre-wrap; word-break: break-all; } " +
    "#panel-text .prompt-text { color: #8a8a8a; } #panel-text .differ { color: #b00020; } #panel-text .same { color: #1b7f3b; } " +
    "#panel-text .solo-head { margin-top: 6px; }";
  document.head.appendChild(css);
  const legendOf = (runs = RUNS) => runs.map(r => `<span style="color:${r.color}">&#9632;&nbsp;<b>${esc(r.name)}</b></span>`).join(" ");
  el.timeline.canvas.addEventListener("click", ev => {  // a cell picks its request, as in the Serve view
    const box = el.timeline.canvas.getBoundingClientRect(), z = zoom(), band = box.height / z / BANDS.length;  // CSS units
    const y = (ev.clientY - box.top) / z % band - 16, ph = band - 22;
    if (y >= 0 && y < ph) { request = Math.min(DATA.n_requests - 1, Math.floor(y / ph * DATA.n_requests)); redraw(); }
  });
  function requestColor(i) { return DATA.palette[i % DATA.palette.length]; }

  function vllmHeading(k) { return say(V.head[Math.max(0, engineAt(k))]); }  // the line above vLLM's rows

  function drawTimeline(k) {
    el.timeline.title.textContent = W().titles.timeline;
    el.timeline.legend.innerHTML = KINDS.filter(x => x !== "none").map(x => swatch(DATA.cell_colors[x], esc(W().kinds[x]), "square")).join("");
    const [ctx, w, h] = fitCanvas(el.timeline.canvas), n = DATA.n_requests, band = h / BANDS.length;
    BANDS.forEach((r, i) => {
      const y0 = i * band + 16, ph = band - 22, pw = w - 40, x0 = 34;
      ctx.font = "bold 12px sans-serif"; ctx.fillStyle = r.color; ctx.textAlign = "left"; ctx.textBaseline = "top";
      ctx.fillText(r === V ? vllmHeading(k) : say(r.head), x0, i * band + 1);
      const cols = r.cols, img = new ImageData(Math.max(1, cols), Math.max(1, n));
      for (let q = 0; q < n; q++) for (let c = 0; c < cols; c++) {
        const rgb = COLORS[r.grid[q * cols + c]], o = 4 * (q * cols + c);
        img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
      }
      const tmp = document.createElement("canvas"); tmp.width = img.width; tmp.height = img.height; tmp.getContext("2d").putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = false; ctx.drawImage(tmp, x0, y0, pw, ph);
      ctx.strokeStyle = "#b0b0b0"; ctx.lineWidth = 1; ctx.strokeRect(x0 + 0.5, y0 + 0.5, pw - 1, ph - 1);
      const kk = clamp(r, k), a = column(r, kk) / cols * pw, b = column(r, kk + 1) / cols * pw;
      ctx.strokeStyle = SELECTED; ctx.lineWidth = 2; ctx.strokeRect(x0 + a - 1, y0 - 1, Math.max(2, b - a) + 2, ph + 2);
      ctx.fillStyle = SELECTED_ROW; ctx.fillRect(0, y0 + request * ph / n, x0 - 2, Math.max(1, ph / n));  // the view's mark
      if (marks && marks.request !== null && marks.request !== undefined && marks.request < n) {  // the scene's request row
        ctx.strokeStyle = marks.color; ctx.lineWidth = 3; ctx.strokeRect(x0 - 1, y0 + marks.request * ph / n - 1, pw + 2, Math.max(1, ph / n) + 2);
      }
      ctx.font = "10px sans-serif"; ctx.fillStyle = "#303030"; ctx.textAlign = "right"; ctx.textBaseline = "middle";
      const every = Math.max(1, Math.ceil(n / Math.max(1, ph / 12)));
      for (let q = 0; q < n; q += every) ctx.fillText(String(q), x0 - 3, y0 + (q + 0.5) * ph / n);
    });
  }
  function drawPool(k) {
    el.pool.title.textContent = W().titles.pool;
    el.pool.legend.innerHTML = "";
    const [ctx, w, h] = fitCanvas(el.pool.canvas), band = h / RUNS.length;
    RUNS.forEach((r, i) => {
      const s = r.steps[rec(r, k)], n = s.states.length, head = say(s.head);
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
        if (marks && marks.block === b && (marks.scheduler || RUNS[0].name) === r.name) {  // the scene's block (stage.py BlockMark)
          ctx.strokeStyle = marks.color; ctx.lineWidth = 4; ctx.strokeRect(x - 3, y - 3, size + 6, size + 6);
        }
      }
    });
  }
  function countersAt(r, k) {  // a stretch's record holds the counters as of its first step: the steps go on
    if (r !== V) return r.counters[rec(r, k)].map(text => atStep(text, clamp(r, k)));
    const i = engineAt(k);
    return i < 0 ? V.before : V.counters[i].map(text => atStep(text, clamp(V, k)));
  }
  function drawCounters(k) {
    el.counters.title.textContent = W().titles.counters;
    el.counters.legend.innerHTML = "";
    const names = W().counters;
    let out = `<div class="table-scroll"><table class="summary"><thead><tr><th></th>${BANDS.map(r => `<th style="color:${r.color}">${esc(r.name)}</th>`).join("")}</tr></thead><tbody>`;
    const cells = BANDS.map(r => countersAt(r, k));
    DATA.counter_keys.forEach((key, i) => { out += `<tr data-key="${key}"><th class="row">${esc(names[i])}</th>` +
      BANDS.map((r, j) => `<td data-scheduler="${esc(r.name)}">${cells[j][i]}</td>`).join("") + "</tr>"; });
    const scrolled = el.counters.body.querySelector(".table-scroll"), left = scrolled ? scrolled.scrollLeft : 0;
    el.counters.body.innerHTML = out + "</tbody></table></div>";
    el.counters.body.querySelector(".table-scroll").scrollLeft = left;  // the columns scrolled to stay in view
  }

  // Pool use and batch size (kvviz/ui/serve/panels/usage.py): a line per scheduler, a cross per preemption.
  function drawUsage(k) {
    const [used, batch, stepName] = W().usage;
    el.usage.title.textContent = W().titles.usage;
    el.usage.legend.innerHTML = legendOf(BANDS);
    const [ctx, w, h] = fitCanvas(el.usage.canvas), half = Math.floor(h / 2);
    const [xMax, top, batchTop] = DATA.usage_range;  // Python's (serve.py _usage_range)
    const line = key => BANDS.map(r => ({ color: r.color, xs: r.series.step, ys: r.series[key], width: 2 }));
    const a = plot(ctx, 0, 0, w, half, { left: used, xMax, yMax: top, series: line("used"), vline: k, vlineDash: [] });
    const b = plot(ctx, 0, half, w, h - half, { left: batch, bottom: stepName, xMax, yMax: batchTop, series: line("batch"), vline: k, vlineDash: [] });
    if (a) for (const r of RUNS) r.series.preemptions.forEach((p, i) => {
      if (!p) return;
      const x = a.X(r.series.step[i]), y = a.Y(r.series.used[i]);
      ctx.strokeStyle = r.color; ctx.lineWidth = 2; ctx.beginPath();
      ctx.moveTo(x - 4, y - 4); ctx.lineTo(x + 4, y + 4); ctx.moveTo(x + 4, y - 4); ctx.lineTo(x - 4, y + 4); ctx.stroke();
    });
    el.usage.canvas.dataset.plots = JSON.stringify([a, b].map(p => p && [p.left, p.top, p.pw, p.ph]));
  }

  // Latency per request (kvviz/ui/serve/panels/latency.py, ServeHistory.latency_marks): each request's values
  // after the tokens it emitted by step k.
  function latency(r, k) {
    const ttft = [], tpot = [];
    for (const [at, first, after] of r.latency) {
      const c = lastAt(at, clamp(r, k)) + 1;  // its tokens at or before the step
      ttft.push(c >= 1 ? first : NaN); tpot.push(c >= 2 ? after[c - 1] : NaN);
    }
    return [ttft, tpot];
  }
  function drawLatency(k) {
    const axes = W().latency;
    el.latency.title.textContent = W().titles.latency;
    el.latency.legend.innerHTML = legendOf();
    const [ctx, w, h] = fitCanvas(el.latency.canvas), half = Math.floor(h / 2), n = DATA.n_requests;
    const values = RUNS.map(r => latency(r, k)), width = 0.8 / RUNS.length;
    const every = Math.max(1, Math.floor(n / 10)), xTicks = [];
    for (let q = 0; q < n; q += every) xTicks.push(q);
    const boxes = [0, 1].map(j => {
      const known = values.flatMap(v => v[j].filter(x => isFinite(x)));
      const yMax = Math.max(1e-9, ...known) * 1.05;
      const p = plot(ctx, 0, j ? half : 0, w, j ? h - half : half, { left: axes[j], bottom: j ? axes[2] : undefined,
        xMin: -0.6, xMax: Math.max(0, n - 1) + 0.6, yMax, xTicks });
      if (p) RUNS.forEach((r, i) => values[i][j].forEach((v, q) => {
        if (!isFinite(v)) return;
        const x = q - 0.4 + width * (i + 0.5);
        ctx.fillStyle = r.color; ctx.fillRect(p.X(x - width / 2), p.Y(v), p.X(x + width / 2) - p.X(x - width / 2), p.Y(0) - p.Y(v));
      }));
      return p && [p.left, p.top, p.pw, p.ph, yMax];
    });
    el.latency.canvas.dataset.plots = JSON.stringify(boxes);
    el.latency.canvas.dataset.values = JSON.stringify(values.map(v => v.map(a => a.map(x => isFinite(x) ? x : null))));
  }

  // The selected request's text (kvviz/ui/serve/panels/text.py): its prompt, then each scheduler's words so far.
  function drawText(k) {
    const q = Math.min(request, Math.max(0, DATA.n_requests - 1));
    el.text.title.textContent = say(DATA.text_titles)[q];
    el.text.legend.innerHTML = "";
    const words = BANDS.map(r => {  // Python's text after the request's tokens at or before step k
      const t = r.texts[q], c = lastAt(t.at, k) + 1;
      return t.ends[c] >= 0 ? t.full.slice(0, t.ends[c]) : t.odd[String(c)];
    });
    const differ = DATA.differ[q].some(([first, past]) => k >= first && k < past);  // Python's rule (serve.py _differ)
    el.text.body.innerHTML = `<p class="prompt-text">${esc(DATA.prompts[q] || "")}</p>` +
      BANDS.map((r, i) => `<p class="said" data-scheduler="${esc(r.name)}"><b style="color:${r.color}">${esc(r.name)}</b> <span>${esc(words[i])}</span></p>`).join("") +
      (differ ? `<p class="differ">${esc(W().differ)}</p>` : "") + soloLines();
  }
  // Every request's tokens against its own solo run (text.py's solo_text): a line per scheduler, whatever the step.
  function soloLines() {
    const lines = RUNS.filter(r => r.solo_said).map(r => `<p class="solo" data-scheduler="${esc(r.name)}"><b style="color:${r.color}">` +
      `${esc(r.name)}</b> <span class="${r.solo_said.same ? "same" : "differ"}">${esc(say(r.solo_said))}</span></p>`);
    return lines.length ? `<p class="prompt-text solo-head">${esc(say(DATA.workload_text))}</p>` + lines.join("") : "";
  }
  return {
    draw(k) {
      const said = DATA.narration;  // first: its height sets the panels'
      document.getElementById("narration").textContent = atStep(say(said)[Math.max(0, lastAt(said.at, k))], k);
      drawTimeline(k); drawPool(k); drawUsage(k); drawCounters(k); drawLatency(k); drawText(k);
    },
    label(k) { return atStep(say(DATA.label), k); },
    highlight(given) { marks = given; },
    select(q) { request = Math.max(0, Math.min(DATA.n_requests - 1, q)); },
    status() { return say(DATA.status); },
  };
};
