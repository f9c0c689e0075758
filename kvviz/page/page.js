/* kvviz page: one saved run drawn at one step, as the window draws it (kvviz/ui/panels), from the records
   in the <script id="kvviz-data"> element. No network, no library: canvas and DOM only.
   Every sentence and figure and the series the window derives are Python's, in the page's data (kvviz/page
   said_compare.py); a panel's fixed words come by tr(context, English), the window's Chinese (strings.py reads
   the .ts). The JS draws the recorded positions (work-matrix cells, recompute counts, pool slots) and the axes. */
"use strict";
(function () {
const DATA = JSON.parse(document.getElementById("kvviz-data").textContent);
const INFO = DATA.info;
const ENGINES = DATA.engines;
const FIRST = DATA.range[0], LAST = DATA.range[1];
const CELL = { empty: "#f7f7f7", masked: "#d4d4d4", evicted: "#b5179e", cached: "#7fb3e0", recomputed: "#e4572e",
  computed: "#ffb000" };
const BLOCK = { free: "#ececec", used: "#1f77b4", new: "#ffb000", wasted: "#f4a582" };
const FG = "#303030", MUTED = "#8a8a8a", HIGHLIGHT = "#ffd54f", STEP_LINE = "#555555", OUTLINE = "#202020";
const COPY_LINE = "#c62828", HELD = "#9e9e9e";
const ZEBRA = ["#eaf2fb", "#fdf3e1"], SPLIT = ["#d9efd4", "#c6e5f0"];
const EXACT = DATA.exact;  // the catalog's exact engines (kvviz/catalog.py)
function exact(e) { return EXACT.includes(e.engine); }  // a lane is exact as its engine is
const VIRIDIS = "44015444025645045745055946075a46085c460a5d460b5e470d60470e6147106347116447136548146748166848176948186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878472979472a7a472c7a472d7b472e7c462f7d46307e46327e46337f453480453581453781443882443983443a83433c84433d84423e85423f854240864141864143874044874045883f46883f47883e48893e49893e4b893d4c8a3d4d8a3c4e8a3c4f8a3b508b3b518b3a528b3a538b39548c39558c38578c38588c37598c375a8c365b8d365c8d355d8d355e8d345f8d34608d33618d33628d32638d32648e31658e31668e31688e30698e2f6a8e2f6b8e2e6c8e2e6d8e2e6e8e2d6f8e2d708e2c718e2c718e2c728e2b738e2b748e2a758e2a768e2a778e29788e29798e297a8e287b8e287c8e277d8e277e8e277f8e26808e26818e26828e25828e25838e25848e24858e24868e23878e23888e23898d228a8d228b8d228c8d218d8d218e8d218f8d21908c20918c20928c20928c1f938c1f948b1f958b1f968b1f978b1f988a1f998a1e9a8a1e9b891e9c891e9d891f9e881f9f881fa0881fa1871fa1871fa28620a38620a48521a58521a68522a78422a88323a98324aa8225ab8225ac8126ad8127ad8028ae7f29af7f2bb07e2cb17d2db27c2eb37c30b47b31b57a33b67935b77937b87738b9763aba753bbb743dbc733fbc7240bd7142be7044bf6f46c06e48c16d4ac16c4cc26b4ec36a50c46952c56854c56756c66658c7645ac8635cc8625ec96160ca5f63cb5e65cb5d67cc5b69cd5a6ccd596ece5771cf5673d05575d05378d1527ad1507dd24f7fd34d82d34c84d44a87d54889d5478cd6458ed64491d74194d74096d83e99d83c9cd93b9ed939a1da37a3da36a6db34a9db32abdc30aedc2fb1dd2db4dd2bb7de29b9de28bcde26bfdf25c1df23c4df21c7e020c9e01fcce11dcfe11cd1e11bd4e21ad7e219d9e219dce318dee318e1e318e4e418e6e419e9e419ebe51aeee51bf0e51cf3e51df5e61ff7e620fae622fde725";
let lang = DATA.start.lang, step = DATA.start.step, playing = null;
// What a lesson deck's scene marks (kvviz/page/lesson.js: the scene file's highlight, its zoom): a work-matrix
// region {queries: [first, last], keys: [first, last], color}, drawn over every engine's matrix; the page's zoom.
let MARKS = null, ZOOM = 1;
const errors = [];

// -- words ------------------------------------------------------------------------------------
const untranslated = new Set();  // (context, source) looked up in Chinese that the .ts lacks: a test reads it
function tr(context, source) {
  if (lang === "en") return source;
  const table = DATA.strings[context], found = table && table[source];
  if (!found) untranslated.add(context + "\u0000" + source);
  return found || source;
}
function say(texts) { return texts[lang]; }  // Python's words in the reader's language ({en, zh_CN})
// Text Python made for many steps leaves marks where the step shown goes (kvviz/page STEP_MARK, kvviz/page/serve.py
// COUNT_MARK): the step's number, and the steps counted to it as Python's f"{k + 1:,}" writes them.
function atStep(text, k) { return text.replace(/\u0001/g, String(k)).replace(/\u0002/g, (k + 1).toLocaleString("en-US")); }
// Python's sentences (kvviz/page/said.py Spoken): a template per language, its fields formatted by Python; an
// engine's mark (kvviz/page ENGINE_MARK) written as its name. `html`: leaves escaped, for innerHTML.
const SAID = DATA.said;
function spoken(node, html) {
  if (node === null || node === undefined) return "";
  if (node.s !== undefined) return spoken(SAID.shared[node.s], html);  // a sentence said more than once, kept once
  if (typeof node === "string") return (html ? esc(node) : node).replace(/[\ue000-\uf8ff]/g, c => {
    const e = ENGINES.find(x => x.order === c.charCodeAt(0) - 0xe000);
    return html ? esc(label(e)) : label(e);
  });
  if (!Array.isArray(node)) return node.parts.map(p => spoken(p, html)).join(spoken(node.join, html));
  return SAID.templates[lang][node[0]].replace(/\{(\d+)\}/g, (all, i) => spoken(node[1 + Number(i)], html));
}
function at(changes, k) {  // a step's value of those Python stored where they change (kvviz/page/said.py changes)
  let lo = 0, hi = changes.length - 1;
  while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (changes[mid][0] <= k) lo = mid; else hi = mid - 1; }
  return changes[lo][1];
}

// -- the records --------------------------------------------------------------------------------
const HALF = new Float32Array(65536);
for (let h = 0; h < 65536; h++) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
  HALF[h] = e === 0 ? s * Math.pow(2, -14) * (f / 1024) : e === 31 ? (f ? NaN : s * Infinity)
    : s * Math.pow(2, e - 15) * (1 + f / 1024);
}
function decodeHalf(b64) {
  const raw = atob(b64), n = raw.length >> 1, out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = HALF[raw.charCodeAt(2 * i) | (raw.charCodeAt(2 * i + 1) << 8)];
  return out;
}
function col(e, key) { return e.steps[key]; }
function stepOf(e, k) { return Math.min(k, e.steps.pos_stop.length - 1); }  // engine_step: clamped per engine
function prevStop(e, k) { return k > 0 ? e.steps.pos_stop[k - 1] : 0; }
function nulls(e, key) {  // a column of Python's with null where a step has no figure, null read as NaN
  const id = "_" + key;
  if (!e[id]) e[id] = (e.steps[key] || []).map(v => v === null ? NaN : v);
  return e[id];
}
function gbpsOf(e) { return nulls(e, "read_gbps"); }  // each step's read rate (Python's: kvviz.costs.wall)
function dropped(e, k, below) {  // positions under `below` the cache no longer held after step k (trace.evicted)
  const at = e.evicted_at, out = new Set();
  if (at) for (let p = 0; p < Math.min(below, at.length); p++) if (at[p] >= 0 && at[p] <= k) out.add(p);
  return out;
}
function attention(e) {
  if (!e.attention) return null;
  if (e.attention.rows_of) return attention(ENGINES.find(x => x.name === e.attention.rows_of));  // the same rows
  if (!e._rows) e._rows = decodeHalf(e.attention.rows);
  return e._rows;
}

// -- drawing helpers ------------------------------------------------------------------------------
function fitCanvas(canvas) {
  // The box as shown (a zoomed page's: ZOOM times the CSS size); drawn in CSS units, so the type grows with the zoom.
  const r = canvas.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(r.width * dpr)), h = Math.max(1, Math.round(r.height * dpr));
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  const ctx = canvas.getContext("2d");
  canvas._ceiling = null;  // what the last drawing placed (plot's horizontal line) is drawn again or gone
  ctx.setTransform(dpr * ZOOM, 0, 0, dpr * ZOOM, 0, 0);
  ctx.clearRect(0, 0, r.width / ZOOM, r.height / ZOOM);
  return [ctx, r.width / ZOOM, r.height / ZOOM];
}
function niceTicks(lo, hi, want) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, want), p = Math.pow(10, Math.floor(Math.log10(raw)));
  const stepSize = [1, 2, 5, 10].map(m => m * p).find(s => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / stepSize) * stepSize; v <= hi + 1e-9 * stepSize; v += stepSize) out.push(+v.toPrecision(12));
  return out;
}
function byteTicks(lo, hi, want, [unit, size]) {  // ticks at round values of the axis's binary unit (Python's)
  return niceTicks(lo / size, hi / size, want).map(v => [v * size, `${+v.toPrecision(6)} ${unit}`]);
}
function dashOf(e) { return e.dash ? e.dash : []; }
const HLINE_GAP = 4;  // px between a horizontal line's label and the line, and the plot's left edge
function plot(ctx, x0, y0, w, h, o) {
  // o: {title, left, bottom, xMax, yMax, bytes: the byte axis's [unit, size], series: [{color, dash, xs, ys, width, fill, stepMode}], vline, dots, hline}
  ctx.font = "11px sans-serif";
  const top = y0 + (o.title ? 18 : 6), bottom = y0 + h - (o.bottom ? 30 : 18), ph = bottom - top;
  const yMin = o.yMin || 0;
  // A horizontal line's label sits above the line inside the plot: the y range reaches high enough to leave it
  // room (the line at least the label's height below the top), where the plot is tall enough to give it.
  ctx.textBaseline = "alphabetic";  // what the metrics below are measured from: the baseline the label is drawn at
  const hm = o.hline && o.hline.text ? ctx.measureText(o.hline.text) : null;
  const hRoom = hm ? HLINE_GAP + hm.fontBoundingBoxAscent + hm.fontBoundingBoxDescent + 2 : 0;
  const hLabel = hm && ph >= 2 * hRoom;
  if (hLabel) o = Object.assign({}, o, { yMax: Math.max(o.yMax, yMin + (o.hline.y - yMin) / (1 - hRoom / ph)) });
  const yTicks = want => o.bytes ? byteTicks(0, o.yMax, want, o.bytes) : niceTicks(yMin, o.yMax, want).map(v => [v, String(v)]);
  let yt = yTicks(Math.max(2, Math.floor(h / 40)));
  if (yt.length < 2) yt = yTicks(Math.max(2, Math.floor(h / 40)) + 1);  // a round step past the top: a finer one
  const labelW = Math.max(...yt.map(t => ctx.measureText(t[1]).width), 10);
  const left = x0 + labelW + (o.left ? 22 : 8), right = x0 + w - 8;
  const pw = right - left;
  if (pw < 10 || ph < 10) return null;
  const X = v => left + (v - (o.xMin || 0)) / ((o.xMax - (o.xMin || 0)) || 1) * pw;
  const Y = v => bottom - (v - yMin) / ((o.yMax - yMin) || 1) * ph;
  ctx.fillStyle = "#fff"; ctx.fillRect(left, top, pw, ph);
  ctx.strokeStyle = "rgba(48,48,48,0.15)"; ctx.lineWidth = 1;
  const xt = o.xTicks || niceTicks(o.xMin || 0, o.xMax, Math.max(2, Math.floor(pw / 55)));
  ctx.beginPath();
  for (const [v] of yt) { const y = Math.round(Y(v)) + 0.5; ctx.moveTo(left, y); ctx.lineTo(right, y); }
  for (const v of xt) { const x = Math.round(X(v)) + 0.5; ctx.moveTo(x, top); ctx.lineTo(x, bottom); }
  ctx.stroke();
  ctx.fillStyle = FG; ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (const [v, t] of yt) ctx.fillText(t, left - 4, Y(v));
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (const v of xt) ctx.fillText(String(v), X(v), bottom + 3);
  if (o.title) { ctx.font = "13px sans-serif"; ctx.textBaseline = "top"; ctx.fillText(o.title, left + pw / 2, y0 + 2); ctx.font = "11px sans-serif"; }
  if (o.bottom) { ctx.textBaseline = "bottom"; ctx.fillText(o.bottom, left + pw / 2, y0 + h - 1); }
  if (o.left) {
    ctx.save(); ctx.translate(x0 + 8, top + ph / 2); ctx.rotate(-Math.PI / 2); ctx.textBaseline = "middle";
    ctx.fillText(o.left, 0, 0); ctx.restore();
  }
  ctx.strokeStyle = FG; ctx.strokeRect(left + 0.5, top + 0.5, pw - 1, ph - 1);
  ctx.save(); ctx.beginPath(); ctx.rect(left, top, pw, ph); ctx.clip();
  const series = (o.series || []).slice().sort((a, b) => (a.dash && a.dash.length ? 1 : 0) - (b.dash && b.dash.length ? 1 : 0));
  for (const s of series) {
    ctx.beginPath();
    const n = s.ys.length;
    const stride = Math.max(1, Math.floor(n / (pw * 2)));
    for (let i = 0; i < n; i += stride) {
      let y = s.ys[i];
      if (stride > 1) for (let j = i; j < Math.min(n, i + stride); j++) if (s.ys[j] > y) y = s.ys[j];  // peak
      if (!isFinite(y)) continue;
      const x = X(s.xs ? s.xs[i] : i);
      if (s.stepMode) { if (i === 0) ctx.moveTo(x, Y(y)); else ctx.lineTo(x, Y(y)); ctx.lineTo(X(s.xs[i + 1]), Y(y)); }
      else if (i === 0) ctx.moveTo(x, Y(y)); else ctx.lineTo(x, Y(y));
    }
    if (s.fill) {
      ctx.save(); ctx.lineTo(X(s.xs ? s.xs[s.xs.length - 1] : n - 1), Y(0)); ctx.lineTo(X(s.xs ? s.xs[0] : 0), Y(0));
      ctx.fillStyle = s.fill; ctx.fill(); ctx.restore();
    }
    ctx.setLineDash(s.dash || []); ctx.strokeStyle = s.color; ctx.lineWidth = s.dash && s.dash.length ? 1 : (s.width || 2);
    ctx.stroke(); ctx.setLineDash([]);
  }
  if (o.hline) {
    const y = Y(o.hline.y);
    ctx.setLineDash([6, 4]); ctx.strokeStyle = o.hline.color; ctx.lineWidth = 1.5; ctx.beginPath();
    ctx.moveTo(left, y); ctx.lineTo(right, y); ctx.stroke(); ctx.setLineDash([]);
    // The label where it fits whole (the plot tall and wide enough for it), else none rather than a cut one; where
    // it went is kept on the canvas (CSS units) for the page's tests.
    const fits = hLabel && HLINE_GAP + hm.width <= pw - HLINE_GAP;
    const box = fits ? [left + HLINE_GAP, y - HLINE_GAP - hm.fontBoundingBoxDescent - hm.fontBoundingBoxAscent, hm.width,
      hm.fontBoundingBoxAscent + hm.fontBoundingBoxDescent] : null;
    if (box) {
      ctx.fillStyle = o.hline.color; ctx.textAlign = "left"; ctx.textBaseline = "alphabetic";
      ctx.fillText(o.hline.text, box[0], box[1] + hm.fontBoundingBoxAscent);
    }
    ctx.canvas._ceiling = { label: box, line: y, plot: [left, top, pw, ph] };
  }
  if (o.vline !== undefined) {
    ctx.setLineDash(o.vlineDash || [4, 3]); ctx.strokeStyle = o.vlineColor || STEP_LINE; ctx.lineWidth = 1; ctx.beginPath();
    const x = Math.round(X(o.vline)) + 0.5; ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke(); ctx.setLineDash([]);
    if (o.vlineText) {  // right of the line, or left of it where the plot ends first (a short run: "end of p")
      const after = x + 3 + ctx.measureText(o.vlineText).width <= right;
      ctx.fillStyle = MUTED; ctx.textAlign = after ? "left" : "right"; ctx.textBaseline = "top";
      ctx.fillText(o.vlineText, after ? x + 3 : x - 3, top + 3);
    }
  }
  for (const d of o.dots || []) {
    if (!isFinite(d.y)) continue;
    ctx.beginPath(); ctx.arc(X(d.x), Y(d.y), 4, 0, 2 * Math.PI); ctx.fillStyle = d.color; ctx.fill();
  }
  ctx.restore();
  return { left, top, pw, ph, X, Y };
}
function columns(legend) {  // a legend in two columns where that is shorter than one (its entries wrap in a column)
  legend.classList.add("cols");
  const two = legend.offsetHeight;
  legend.classList.remove("cols");
  if (two < legend.offsetHeight) legend.classList.add("cols");
}
// A panel's legends wrap their entries where they take at most 60% of the panel below its title (the cache memory's
// two take 51% at 1280x900); where they would take more (1280x720: 66%), each entry keeps to one line, cut with "..."
// (its tooltip says it whole), in two columns where `twoColumns`. Called before the canvas is measured. Measured
// again when the page's size, zoom or language or a legend's number of entries changes, not at every step (each
// measure lays the page out).
const LEGEND_SHARE = 0.6, legendFits = new Map();
function fitLegends(key, twoColumns) {
  const section = el[key].section, legends = [...section.querySelectorAll(".legend")];
  const shape = `${innerWidth}x${innerHeight} ${ZOOM} ${lang} ${legends.map(l => l.children.length).join(",")}`;
  const known = legendFits.get(key);
  if (known && known.shape === shape) {
    legends.forEach((legend, i) => { legend.classList.toggle("cols", known.cols[i]); legend.classList.toggle("tight", known.tight); });
    return;
  }
  for (const legend of legends) legend.classList.remove("tight");
  if (twoColumns) legends.forEach(columns);
  const room = section.clientHeight - el[key].title.offsetHeight;
  const tight = legends.reduce((sum, legend) => sum + legend.offsetHeight, 0) > LEGEND_SHARE * room;
  if (tight) for (const legend of legends) legend.classList.add("tight", ...(twoColumns ? ["cols"] : []));
  legendFits.set(key, { shape, tight, cols: legends.map(legend => legend.classList.contains("cols")) });
}
function swatch(color, text, mark) {
  const glyph = mark === "line" ? "&#9473;&#9473;" : mark === "dashed" ? "&#9477;&#9477;" : "&#9632;";
  const pale = mark === "square" && lightness(color) > 0.9;
  return `<div class="sw"><span class="mark" style="color:${pale ? "#9e9e9e" : color}">${pale ? "&#9633;" : glyph}</span>` +
    `<span class="text" title="${esc(String(text).replace(/<[^>]*>/g, ""))}">${text}</span></div>`;
}
function lightness(hex) {
  const r = parseInt(hex.slice(1, 3), 16) / 255, g = parseInt(hex.slice(3, 5), 16) / 255, b = parseInt(hex.slice(5, 7), 16) / 255;
  return (Math.max(r, g, b) + Math.min(r, g, b)) / 2;
}
function esc(text) { return String(text).replace(/[&<>"]/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]); }
// An engine's name as shown; a kernel comparison's lane as "static · C step", its kernel in the reader's language.
function label(e) { return e.label ? say(e.label) : e.name; }  // Python's words (kvviz/page page_data)
function outline(ctx, x, y, w, h) {  // the step's rows framed from outside, so a one-pixel row stays seen
  ctx.strokeStyle = OUTLINE; ctx.lineWidth = 2; ctx.strokeRect(x - 1, y - 1, w + 2, h + 2);
}
function hex(c) { return [parseInt(c.slice(1, 3), 16), parseInt(c.slice(3, 5), 16), parseInt(c.slice(5, 7), 16)]; }

// -- panels ---------------------------------------------------------------------------------------
const PANELS = [
  ["token_stream", "TokenStreamPanel", "Token stream", "body"],
  ["work_matrix", "WorkMatrixPanel", "Work matrix", "canvas"],
  ["recompute", "RecomputePanel", "Recompute count", "canvas"],
  ["attention", "AttentionPanel", "Attention weights", "canvas"],
  ["latency", "LatencyPanel", "Latency", "canvas"],
  ["bytes", "BytesPanel", "Bytes copied", "canvas"],
  ["cache_memory", "CacheMemoryPanel", "Cache memory", "canvas"],
  ["quality", "QualityPanel", "Quality", "canvas"],
  ["summary", "SummaryPanel", "Summary", "body"],
];
// The quality panel where it tells something: a run with an approximate cache (as the summary's quality rows).
const APPROXIMATE = ENGINES.some(e => !exact(e));
if (!APPROXIMATE) PANELS.splice(PANELS.findIndex(p => p[0] === "quality"), 1);
const el = {};
function buildPanels() {
  const grid = document.getElementById("grid");
  if (PANELS.length > 8) grid.style.gridTemplateColumns = "repeat(5, minmax(0, 1fr))";
  for (const [key, , , kind] of PANELS) {
    const section = document.createElement("section");
    section.className = "panel"; section.id = "panel-" + key;
    section.innerHTML = `<h2></h2><div class="legend"></div>` + (key === "attention" ?
      `<div class="attn-top"><label></label><select></select><span class="caption"></span></div>` : "") +
      (kind === "canvas" ? `<canvas></canvas>` : `<div class="body"></div>`) + (key === "cache_memory" ? `<div class="legend pool"></div>` : "");
    if (key === "summary" && PANELS.length > 8) section.style.gridColumn = "span 2";  // five columns: room for its figures
    grid.appendChild(section);
    el[key] = { section, title: section.querySelector("h2"), legend: section.querySelector(".legend"),
      canvas: section.querySelector("canvas"), body: section.querySelector(".body") };
  }
  const sel = el.attention.section.querySelector("select");
  for (const e of ENGINES) if (e.attention) { const o = document.createElement("option"); o.value = e.name; o.textContent = label(e); sel.appendChild(o); }
  sel.addEventListener("change", () => draw());
  for (const key of ["work_matrix", "attention"]) el[key].canvas.addEventListener("click", ev => pickRow(el[key].canvas, ev));
  for (const key of ["latency", "bytes", "cache_memory", "quality"]) {
    if (el[key] && el[key].canvas) el[key].canvas.addEventListener("click", ev => pickStep(el[key].canvas, ev));
  }
  el.token_stream.body.addEventListener("click", ev => {  // a generated token shows the step that sampled it
    const span = ev.target.closest("span[data-step]");  // (the body carries the shown step too)
    if (span && !window.getSelection().toString()) setStep(Number(span.dataset.step));
    else if (ev.target.closest(".prompt")) setStep(0);  // the prompt: computed at prefill
  });
  el.attention.select = sel;
  el.attention.caption = el.attention.section.querySelector(".caption");
  el.attention.label = el.attention.section.querySelector("label");
  el.cache_memory.pool = el.cache_memory.section.querySelector(".pool");
}

// Token stream: the prompt grey, each engine's tokens, the step's highlighted, later ones faded.
const WS_MARKS = { " ": "\u00b7", "\t": "\u2192", "\r": "\u240d" };
function tokenHtml(text, prompt) {
  if (text === "\\n") text = "\n";
  const blank = /^\s+$/.test(text);
  if (!blank || (prompt && text === " ")) return esc(text.replace(/\n/g, "\u21b5\n"));
  const marks = [...text.replace(/\n/g, "")].map(ch => WS_MARKS[ch] || "\u00b7").join("");
  return (marks ? `<span class="mark">${marks}</span>\u200b` : "") + "\u21b5\n".repeat((text.match(/\n/g) || []).length);
}
function drawTokens(k) {
  const T = s => tr("TokenStreamPanel", s);
  const prompt = DATA.prompt.shown.map(t => tokenHtml(t, true)).join("");
  const out = [];
  for (const e of ENGINES) {
    const kk = stepOf(e, k), tok = e.tokens, ids = e.steps.token_id, n = ids.length;
    const differing = new Set(e.said.differs);  // the steps its tokens differ from the first engine's (Python's)
    const zebra = n * ENGINES.length <= 400;
    const g0 = tok.start[kk], g1 = tok.stop[kk];
    const parts = [];
    let number = -1;
    for (let i = 0; i < n; i++) {
      if (tok.start[i] === i) number++;
      if (tok.start[i] !== i) continue;
      const body = tokenHtml(tok.shown[i], false);
      const size = tok.stop[i] - tok.start[i];
      let cls = "", style = "";
      if (i === g0) cls = "now";
      else if (i > kk) cls = "later";
      else if (size > 1) style = `background:${SPLIT[number % 2]}`;
      else if (zebra) style = `background:${ZEBRA[number % 2]}`;
      for (let j = tok.start[i]; j < tok.stop[i]; j++) if (differing.has(j)) { cls += " differs"; break; }
      parts.push(`<span class="${cls}" style="${style}" data-step="${i}">${body}</span>`);
    }
    const note = spoken(e.said.token_note, true);
    out.push(`<div class="engine" data-engine="${esc(e.name)}"><span class="name" style="color:${e.color}">${esc(label(e))}</span><span class="note">${note}</span>\n` +
      `<span class="prompt">${prompt}</span>${parts.join("")}</div>`);
    void g1;
  }
  el.token_stream.body.className = "body tokens";
  el.token_stream.body.innerHTML = out.join("");
}

// Work matrix: per engine, what happened to each (query, key) cell at the step, pooled by max.
// The kinds in the window's order (kvviz/ui/panels/work_matrix.py KIND_NAMES): a pooled pixel keeps the highest.
const KIND_NAMES = ["empty", "masked", "evicted", "cached", "recomputed", "computed", "freed", "stale", "accepted", "overwritten"];
const SPEC_COLORS = DATA.spec_colors || {};  // a compare page's (a serve page draws no work matrix)
const KIND_COLORS = KIND_NAMES.filter(k => CELL[k] || SPEC_COLORS[k]).map(k => hex(CELL[k] || SPEC_COLORS[k]));
function kindsImage(e, k, px) {
  const [n, kindAt, plain] = cellKinds(e, k);
  const s = e.steps, a = s.pos_start[k], b = s.pos_stop[k], p = prevStop(e, k), W = s.window[k];
  const m = Math.min(n, px), f = n / m, img = new Uint8Array(m * m);
  if (m === n) { for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) img[i * m + j] = kindAt(i, j); return [img, m]; }
  if (W === null && plain) {
    // The chapter's causal mask, pooled without visiting every cell (the window's pooled_kinds): along a row
    // the kinds only grow (cached, recomputed, computed), so a block's highest is the kind of the last key a
    // computed row in it may see; a block with none is masked where it reaches above the diagonal, else empty.
    const colKind = j => j < a ? 3 : j < p ? 4 : 5;
    for (let bi = 0; bi < m; bi++) {
      const r0 = Math.ceil(bi * f), r1 = Math.min(n, Math.ceil((bi + 1) * f));
      const lastRow = Math.min(r1, b) - 1, active = Math.max(r0, a) <= lastRow;
      for (let bj = 0; bj < m; bj++) {
        const c0 = Math.ceil(bj * f), c1 = Math.min(n, Math.ceil((bj + 1) * f));
        let kind = c1 - 1 > r0 ? 1 : 0;
        if (active && c0 <= lastRow) kind = colKind(Math.min(c1 - 1, lastRow));
        img[bi * m + bj] = kind;
      }
    }
    return [img, m];
  }
  for (let i = 0; i < n; i++) {
    const r = Math.min(m - 1, Math.floor(i / f)) * m;
    for (let j = 0; j < n; j++) { const c = r + Math.min(m - 1, Math.floor(j / f)), v = kindAt(i, j); if (v > img[c]) img[c] = v; }
  }
  return [img, m];
}
const STEP_ROW_PX = 5;  // the step's rows are drawn at least this tall (kvviz/ui/panels/work_matrix.py)
function cellKinds(e, k) {  // [n, kindAt(i, j), whether the step has no tentative cells]: classify's kinds
  const s = e.steps, a = s.pos_start[k], b = s.pos_stop[k], p = prevStop(e, k);
  const W = s.window[k], S = s.sinks[k] || 0, gone = dropped(e, k, a);
  // A speculative round's tentative cells, Python's (kvviz/records/tentative.py): its drafted rows past the sequence
  const T = e.tentative ? e.tentative[k] : null, n = T ? T.n : b, set = new Map();
  if (T) for (const [i, c0, c1, kind] of T.runs) for (let j = c0; j < c1; j++) set.set(i * n + j, KIND_NAMES.indexOf(kind));
  const accepted = T && T.accepted ? T.accepted : [0, 0];
  const kindAt = (i, j) => {
    const given = T ? set.get(i * n + j) : undefined;
    if (given !== undefined) return given;
    if (j > i || i >= b) return 1;
    if (i < a) return 0;
    if (gone.has(j)) return 2;  // the mask allowed them before; the cache had dropped them (classify's order)
    if (W !== null && !(i - j < W - S || j < S)) return 1;
    const v = j < a ? 3 : j < p ? 4 : 5;
    return v === 5 && i >= accepted[0] && i < accepted[1] ? 8 : v;  // computed by its round's forward
  };
  return [n, kindAt, !T];
}
function lastRowImage(e, k, m) {  // the kinds of the step's last row (a round's last drafted one), max-pooled into m pixels
  const [n, kindAt] = cellKinds(e, k), i = n - 1;
  const kinds = new Uint8Array(m), f = n / m;
  for (let j = 0; j < n; j++) {
    const v = kindAt(i, j), c = Math.min(m - 1, Math.floor(j / f));
    if (v > kinds[c]) kinds[c] = v;
  }
  const id = new ImageData(m, 1);
  for (let c = 0; c < m; c++) { const rgb = KIND_COLORS[kinds[c]]; id.data.set([rgb[0], rgb[1], rgb[2], 255], 4 * c); }
  return id;
}
function drawWorkMatrix(k) {
  const Wm = s => tr("WorkMatrixPanel", s);
  const evicting = ENGINES.some(e => e.steps.window.some(v => v !== null));
  const speculating = ENGINES.some(e => e.steps.spec_index);  // a speculative engine (kvviz/page page_data's columns)
  el.work_matrix.legend.innerHTML = [[CELL.computed, Wm("computed this step (new)")], [CELL.cached, Wm("read from the cache")],
    [CELL.recomputed, Wm("recomputed though unchanged")], [CELL.masked, Wm("masked (future)")],
    ...(evicting ? [[CELL.evicted, Wm("evicted, never read again")]] : []),
    ...(speculating ? [[DATA.spec_colors.accepted, Wm("drafted, accepted")], [DATA.spec_colors.stale, Wm("drafted, rejected: left in place")],
      [DATA.spec_colors.freed, Wm("drafted, rejected: freed")], [DATA.spec_colors.overwritten, Wm("written over a rejected slot")]] : []),
    [CELL.empty, Wm("not computed this step")]]
    .map(([c, t]) => swatch(c, t, "square")).join("");
  fitLegends("work_matrix", true);
  const [ctx, w, h] = fitCanvas(el.work_matrix.canvas);
  const cols = ENGINES.length > 1 ? 2 : 1, rows = Math.ceil(ENGINES.length / cols);
  const cw = w / cols, ch = (h - 16) / rows;
  ENGINES.forEach((e, idx) => {
    const kk = stepOf(e, k), s = e.steps;
    const x0 = (idx % cols) * cw, y0 = Math.floor(idx / cols) * ch;
    const detail = spoken(at(e.said.work_matrix, k));  // Python's (the window's WorkMatrixPanel._set_title)
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    ctx.font = "bold 13px sans-serif"; ctx.fillStyle = e.color; ctx.fillText(label(e), x0 + cw / 2, y0 + 2);
    ctx.font = "11px sans-serif"; ctx.fillStyle = FG; ctx.fillText(detail, x0 + cw / 2, y0 + 17);
    const side = Math.max(8, Math.min(cw - 34, ch - 40)), mx = x0 + 28 + (cw - 34 - side) / 2, my = y0 + 32;
    const T = e.tentative && e.tentative[kk], n = T ? T.n : s.pos_stop[kk];  // a round's drafted rows past the sequence
    const framed = n - s.pos_start[kk];
    (el.work_matrix.canvas._rows = el.work_matrix.canvas._rows || {})[e.name] = { x: mx, y: my, side, n };
    const dpr = (window.devicePixelRatio || 1) * ZOOM;
    const [img, m] = kindsImage(e, kk, Math.max(8, Math.floor(side * dpr)));
    const id = new ImageData(m, m);
    for (let i = 0; i < m * m; i++) { const c = KIND_COLORS[img[i]]; id.data[4 * i] = c[0]; id.data[4 * i + 1] = c[1]; id.data[4 * i + 2] = c[2]; id.data[4 * i + 3] = 255; }
    const tmp = document.createElement("canvas"); tmp.width = m; tmp.height = m; tmp.getContext("2d").putImageData(id, 0, 0);
    ctx.imageSmoothingEnabled = false; ctx.drawImage(tmp, mx, my, side, side);
    const cell = side / n;
    if (n <= 64 && cell >= 8) {  // a small matrix: each cell a tile, a thin gap between (the window's _TILE)
      ctx.fillStyle = "#ffffff";
      for (let i = 1; i <= n; i++) { ctx.fillRect(mx + i * cell - cell / 8, my, cell / 8, side); ctx.fillRect(mx, my + i * cell - cell / 8, side, cell / 8); }
    }
    if (framed * cell >= STEP_ROW_PX) outline(ctx, mx, my + side * s.pos_start[kk] / n, side, framed * cell);
    else {  // the step's last row drawn STEP_ROW_PX tall over the matrix, so the keys it read show (_emphasise_step)
      const row = lastRowImage(e, kk, m);
      const strip = document.createElement("canvas"); strip.width = m; strip.height = 1; strip.getContext("2d").putImageData(row, 0, 0);
      ctx.drawImage(strip, mx, my + side - STEP_ROW_PX, side, STEP_ROW_PX);
      outline(ctx, mx, my + side - STEP_ROW_PX, side, STEP_ROW_PX);
    }
    if (MARKS && MARKS.queries && MARKS.queries[0] < n && MARKS.keys[0] < n) {  // the scene's region (stage.py _mark_region)
      const [q0, q1] = MARKS.queries.map(v => Math.min(v, n - 1)), [k0, k1] = MARKS.keys.map(v => Math.min(v, n - 1));
      ctx.strokeStyle = MARKS.color; ctx.lineWidth = 3;
      ctx.strokeRect(mx + cell * k0, my + cell * q0, cell * (k1 - k0 + 1), cell * (q1 - q0 + 1));
    }
    ctx.fillStyle = FG; ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (const v of niceTicks(0, n, 3)) if (v < n) ctx.fillText(String(v), mx - 3, my + side * (v + 0.5) / n);
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (const v of niceTicks(0, n, 3)) if (v < n) ctx.fillText(String(v), mx + side * (v + 0.5) / n, my + side + 2);
  });
  ctx.fillStyle = FG; ctx.textAlign = "center"; ctx.textBaseline = "bottom"; ctx.fillText(Wm("key position"), w / 2, h - 1);
  ctx.save(); ctx.translate(8, h / 2); ctx.rotate(-Math.PI / 2); ctx.textBaseline = "middle"; ctx.fillText(Wm("query position"), 0, 0); ctx.restore();
}

// Recompute count: times each position's K/V was computed over steps 0..k.
function counts(e, k) {
  const n = e.steps.pos_stop[k], diff = new Int32Array(n + 1);
  for (let j = 0; j <= k; j++) { diff[e.steps.pos_start[j]] += 1; diff[e.steps.pos_stop[j]] -= 1; }
  const out = new Int32Array(n);
  let acc = 0;
  for (let i = 0; i < n; i++) { acc += diff[i]; out[i] = acc; }
  return out;
}
function headroom(v) {
  const target = v * 1.25, power = Math.pow(10, Math.floor(Math.log10(target)));
  return [1, 1.5, 2, 3, 4, 5, 6, 8, 10].map(m => m * power).find(x => x >= target);
}
function drawRecompute(k) {
  const R = s => tr("RecomputePanel", s);
  const legend = [], series = [];
  let top = 1, nMax = 0;
  ENGINES.forEach((e, order) => {
    const kk = stepOf(e, k), c = counts(e, kk);
    const xs = new Float64Array(c.length + 1); for (let i = 0; i <= c.length; i++) xs[i] = i;
    series.push({ color: e.color, dash: dashOf(e), xs, ys: c, stepMode: true, width: 2.5, fill: order === 0 ? `rgba(${hex(e.color).join(",")},${45 / 255})` : null });
    for (const v of c) if (v > top) top = v;
    nMax = Math.max(nMax, c.length);
    legend.push(swatch(e.color, spoken(at(e.said.recompute, k), true), e.dash ? "dashed" : "line"));
  });
  el.recompute.legend.innerHTML = legend.join("");
  fitLegends("recompute", false);
  const [ctx, w, h] = fitCanvas(el.recompute.canvas);
  const xTop = Math.max(nMax, INFO.n_prompt + INFO.max_new_tokens, 1);
  const yTop = top < 4 ? top + 0.5 : headroom(top + 0.5);
  plot(ctx, 0, 0, w, h, { left: R("times computed"), bottom: R("token position"), xMax: xTop, yMax: yTop, series,
    vline: 0 < INFO.n_prompt && INFO.n_prompt < nMax ? INFO.n_prompt : undefined, vlineText: R("end of prompt"), vlineDash: [2, 3] });
}

// Attention weights of the recorded layer and head, accumulated from the rows each step computed.
const VIRIDIS_RGB = []; for (let i = 0; i < VIRIDIS.length; i += 6) VIRIDIS_RGB.push(hex("#" + VIRIDIS.slice(i, i + 6)));
function drawAttention(k) {
  const A = s => tr("AttentionPanel", s);
  el.attention.label.textContent = A("Engine:");
  el.attention.legend.innerHTML = "";
  const sel = el.attention.select, e = ENGINES.find(x => x.name === sel.value);
  const [ctx, w, h] = fitCanvas(el.attention.canvas);
  if (!e) { el.attention.caption.textContent = spoken(SAID.attention_none); return; }
  const kk = stepOf(e, k), s = e.steps, n = s.pos_stop[kk], a = s.pos_start[kk], rows = attention(e), rs = e.attention.row_step;
  const filled = i => rs[i] >= 0 && rs[i] <= kk;
  const [title, caption] = at(e.said.attention, k);  // Python's (the window's AttentionPanel.show_step)
  el.attention.caption.textContent = spoken(caption);
  const side = Math.max(8, Math.min(w - 44 - 72, h - 72)), mx = 44, my = 40, dpr = window.devicePixelRatio || 1;
  const m = Math.min(n, Math.max(8, Math.floor(side * dpr))), f = n / m;
  el.attention.canvas._rows = { [e.name]: { x: mx, y: my, side, n } };
  const pooled = new Float32Array(m * m).fill(NaN);
  let topW = 0;
  for (let i = 0; i < n; i++) {
    if (!filled(i)) continue;
    const base = i * (i + 1) / 2, r = Math.min(m - 1, Math.floor(i / f)) * m;
    for (let j = 0; j <= i; j++) {
      const v = rows[base + j];
      if (v !== v) continue;
      const c = r + Math.min(m - 1, Math.floor(j / f)), old = pooled[c];
      if (!(old >= v)) pooled[c] = v;
      if (v > topW) topW = v;
    }
  }
  topW = Math.max(topW, 1e-6);
  const id = new ImageData(m, m), evictedRgb = hex(CELL.evicted), emptyRgb = hex(CELL.empty), maskedRgb = hex(CELL.masked);
  for (let i = 0; i < m; i++) for (let j = 0; j < m; j++) {
    const v = pooled[i * m + j];
    let c;
    if (j * f > i * f + f - 1) c = maskedRgb;  // wholly above the diagonal
    else if (v !== v) c = emptyRgb;
    else if (v < 0) c = evictedRgb;
    else c = VIRIDIS_RGB[Math.max(0, Math.min(252, Math.floor(v * 252 / topW)))];
    const o = 4 * (i * m + j); id.data[o] = c[0]; id.data[o + 1] = c[1]; id.data[o + 2] = c[2]; id.data[o + 3] = 255;
  }
  const tmp = document.createElement("canvas"); tmp.width = m; tmp.height = m; tmp.getContext("2d").putImageData(id, 0, 0);
  ctx.imageSmoothingEnabled = false; ctx.drawImage(tmp, mx, my, side, side);
  outline(ctx, mx, my + side * a / n, side, side * (n - a) / n);
  ctx.textAlign = "center"; ctx.textBaseline = "top"; ctx.font = "bold 13px sans-serif"; ctx.fillStyle = e.color;
  ctx.fillText(label(e), mx + side / 2, 2);
  ctx.font = "11px sans-serif"; ctx.fillStyle = FG;
  ctx.fillText(spoken(title), mx + side / 2, 18);
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (const v of niceTicks(0, n, 5)) if (v < n) ctx.fillText(String(v), mx - 3, my + side * (v + 0.5) / n);
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (const v of niceTicks(0, n, 4)) if (v < n) ctx.fillText(String(v), mx + side * (v + 0.5) / n, my + side + 2);
  ctx.fillText(A("key position"), mx + side / 2, my + side + 15);
  ctx.save(); ctx.translate(10, my + side / 2); ctx.rotate(-Math.PI / 2); ctx.textBaseline = "middle"; ctx.fillText(A("query position"), 0, 0); ctx.restore();
  const bx = mx + side + 14, bw = 12;  // the colour bar, 0 .. the largest weight shown
  for (let y = 0; y < side; y++) { const c = VIRIDIS_RGB[Math.floor((1 - y / side) * 252)]; ctx.fillStyle = `rgb(${c})`; ctx.fillRect(bx, my + y, bw, 1.5); }
  ctx.fillStyle = FG; ctx.textAlign = "left"; ctx.textBaseline = "middle";
  for (const v of niceTicks(0, topW, 4)) ctx.fillText(String(+v.toPrecision(3)), bx + bw + 3, my + side * (1 - v / topW));
  ctx.save(); ctx.translate(bx + bw + 34, my + side / 2); ctx.rotate(Math.PI / 2); ctx.textAlign = "center"; ctx.fillStyle = MUTED; ctx.fillText(A("weight"), 0, 0); ctx.restore();
}

// Series panels: latency (with the memory wall), bytes copied, cache memory.
function seriesOf(e, key, cumulative) { return e.steps[cumulative ? key + "_total" : key]; }  // Python's totals
function stacked(k, specs, canvas) {
  const [ctx, w, h] = fitCanvas(canvas), ph = h / specs.length;
  specs.forEach((spec, r) => {
    let yMax = 0;
    for (const s of spec.series) for (const v of s.ys) if (isFinite(v) && v > yMax) yMax = v;
    if (spec.hline && spec.hline.y > yMax) yMax = spec.hline.y;
    yMax = yMax > 0 ? yMax * 1.05 : 1;
    const area = plot(ctx, 0, r * ph, w, ph, Object.assign({ xMax: Math.max(1, LAST), yMax, vline: k, vlineDash: [4, 3],
      bottom: r === specs.length - 1 ? tr("SeriesPanel", "step") : "" }, spec));
    if (area && r === 0) canvas._steps = { left: area.left, width: area.pw, right: w };
  });
}
function stepOfPosition(e, position) {  // the step that first computed the position (_plots.step_of_position)
  const stops = e.steps.pos_stop;
  let lo = 0, hi = stops.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (stops[mid] <= position) lo = mid + 1; else hi = mid; }
  return position >= 0 && lo < stops.length ? lo : null;
}
function pickRow(canvas, ev) {  // a click on a query row of a matrix shows the step that computed it
  const r = canvas.getBoundingClientRect(), x = (ev.clientX - r.left) / ZOOM, y = (ev.clientY - r.top) / ZOOM;  // CSS units
  for (const [name, at] of Object.entries(canvas._rows || {})) {
    if (x < at.x || x > at.x + at.side || y < at.y || y > at.y + at.side) continue;
    const step = stepOfPosition(ENGINES.find(e => e.name === name), Math.floor((y - at.y) / at.side * at.n));
    if (step !== null) setStep(step);
    return;
  }
}
function pickStep(canvas, ev) {  // a click in a per-step plot shows the step under it, as in the window
  const at = canvas._steps;
  if (!at) return;
  const x = (ev.clientX - canvas.getBoundingClientRect().left) / ZOOM;  // in the canvas's CSS units, as drawn
  if (x < at.left || x > at.left + at.width) return;
  setStep(Math.round((x - at.left) / at.width * Math.max(1, LAST)));
}
function drawLatency(k) {
  const L = s => tr("LatencyPanel", s);
  el.latency.legend.innerHTML = ENGINES.map(e => swatch(e.color, spoken(at(e.said.latency, k), true), e.dash ? "dashed" : "line")).join("");
  fitLegends("latency", false);
  const dots = key => ENGINES.map(e => ({ x: stepOf(e, k), y: key(e)[stepOf(e, k)], color: e.color }));
  const specs = [
    { title: L("per step"), left: L("latency") + " (ms)", series: ENGINES.map(e => ({ color: e.color, dash: dashOf(e), ys: e.steps.latency_ms })), dots: dots(e => e.steps.latency_ms) },
    { title: L("total so far"), left: L("time") + " (ms)", series: ENGINES.map(e => ({ color: e.color, dash: dashOf(e), ys: e.steps.latency_total_ms })), dots: dots(e => e.steps.latency_total_ms) },
  ];
  if (INFO.wall) specs.push({ title: L("weights + K/V read / step time"), left: L("read") + " (GB/s)", series: ENGINES.map(e => ({ color: e.color, dash: dashOf(e), ys: gbpsOf(e) })),
    dots: dots(gbpsOf), hline: INFO.ceiling === null ? null : { y: INFO.ceiling, color: COPY_LINE,
      text: spoken(SAID.ceiling) } });
  stacked(k, specs, el.latency.canvas);
}
function drawBytes(k) {
  const B = s => tr("BytesPanel", s);
  el.bytes.legend.innerHTML = ENGINES.map(e => swatch(e.color, spoken(at(e.said.bytes, k), true), e.dash ? "dashed" : "line")).join("");
  fitLegends("bytes", false);
  const lines = cumulative => ENGINES.flatMap(e => [{ color: e.color, dash: dashOf(e), ys: seriesOf(e, "bytes_copied", cumulative) },
    ...(e.steps.bytes_gathered.some(v => v) ? [{ color: e.color, dash: [6, 3], ys: seriesOf(e, "bytes_gathered", cumulative) }] : [])]);
  const dots = cumulative => ENGINES.map(e => ({ x: stepOf(e, k), y: seriesOf(e, "bytes_copied", cumulative)[stepOf(e, k)], color: e.color }));
  stacked(k, [
    { title: B("per step (dashed: gathered)"), left: B("bytes"), bytes: SAID.axes.bytes_step, series: lines(false), dots: dots(false) },
    { title: B("total so far"), left: B("bytes"), bytes: SAID.axes.bytes_total, series: lines(true), dots: dots(true) },
  ], el.bytes.canvas);
}
function drawCacheMemory(k) {
  const C = s => tr("CacheMemoryPanel", s);
  el.cache_memory.legend.innerHTML = ENGINES.map(e => swatch(e.color, spoken(at(e.said.cache_memory, k), true), e.dash ? "dashed" : "line"))
    .join("") + swatch(HELD, C("tokens held"), "line");
  const paged = ENGINES.find(e => e.block_table);
  const pool = el.cache_memory.pool, said = paged ? at(SAID.pool, k) : null;  // the pool's blocks and legend: Python's
  if (paged) {  // the pool's legend first: its height and the series legend's set the canvas's
    pool.innerHTML = swatch(paged.color, spoken(said.title, true), paged.dash ? "dashed" : "line") +
      swatch(BLOCK.used, spoken(said.used, true), "square") + swatch(BLOCK.new, C("written this step"), "square") +
      swatch(BLOCK.wasted, spoken(said.wasted, true), "square") + swatch(BLOCK.free, C("free block"), "square");
  } else pool.innerHTML = swatch(MUTED, C("no paged engine: no block table"), "square");
  fitLegends("cache_memory", true);
  const [ctx, w, h] = fitCanvas(el.cache_memory.canvas);
  const series = ENGINES.map(e => ({ color: e.color, dash: dashOf(e), ys: e.steps.cache_bytes }));
  if (SAID.held_bytes) series.unshift({ color: HELD, width: 6, ys: SAID.held_bytes });  // the tokens held (Python's)
  let yMax = 1; for (const s of series) for (const v of s.ys) if (v > yMax) yMax = v;
  const plotW = paged ? w * 0.58 : w;
  const area = plot(ctx, 0, 0, plotW, h, { title: C("resident K/V"), left: C("memory"), bottom: tr("SeriesPanel", "step"), bytes: SAID.axes.cache_memory, xMax: Math.max(1, LAST), yMax: yMax * 1.05,
    series, vline: k, dots: ENGINES.map(e => ({ x: stepOf(e, k), y: e.steps.cache_bytes[stepOf(e, k)], color: e.color })) });
  el.cache_memory.canvas._steps = area ? { left: area.left, width: area.pw } : null;
  if (!paged) return;
  const kk = stepOf(paged, k), size = paged.steps.block_size[kk] || 1, table = paged.block_table[kk] || [];
  const nPool = said.n_pool;
  const cacheLen = paged.steps.cache_len[kk], start = paged.steps.pos_start[kk];
  const kinds = []; for (let b = 0; b < nPool; b++) kinds.push(new Array(size).fill("free"));
  table.forEach((b, i) => { for (let s = 0; s < size; s++) { const pos = i * size + s; kinds[b][s] = pos >= cacheLen ? "wasted" : pos >= start ? "new" : "used"; } });
  let sr = 1; for (let d = 1; d * d <= size; d++) if (size % d === 0) sr = d;
  const sc = size / sr, gx = plotW + 6, gw = w - gx - 4, gh = h - 8;
  const bc = Math.max(1, Math.round(Math.sqrt(nPool * (sr * 8 + 6) / (sc * 8 + 6)))), br = Math.ceil(nPool / bc);
  const tile = Math.max(1, Math.min((gw - (bc - 1) * 6) / (bc * sc), (gh - (br - 1) * 6) / (br * sr)));
  const gap = Math.min(6, tile * 0.75);
  const oy = 4 + (gh - (br * sr * tile + (br - 1) * gap)) / 2;
  for (let b = 0; b < nPool; b++) {
    const bx = gx + (b % bc) * (sc * tile + gap), by = oy + Math.floor(b / bc) * (sr * tile + gap);
    for (let s = 0; s < size; s++) {
      ctx.fillStyle = BLOCK[kinds[b][s]];
      ctx.fillRect(bx + (s % sc) * tile, by + Math.floor(s / sc) * tile, tile - (tile >= 4 ? 1 : 0), tile - (tile >= 4 ? 1 : 0));
    }
  }
  if (sc * tile >= 30 && table.length <= 64) {
    ctx.font = "11px sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "middle";
    table.forEach((b, i) => {
      const cx = gx + (b % bc) * (sc * tile + gap) + sc * tile / 2, cy = oy + Math.floor(b / bc) * (sr * tile + gap) + sr * tile / 2;
      ctx.fillStyle = "rgba(255,255,255,0.84)"; ctx.fillRect(cx - 12, cy - 7, 24, 14); ctx.fillStyle = FG; ctx.fillText("#" + i, cx, cy);
    });
  }
}

// Quality: KL(exact || engine) per step and the top-1 disagreements so far (kvviz/ui/panels/quality.py).
function drawQuality(k) {
  const Q = s => tr("QualityPanel", s);
  el.quality.legend.innerHTML = ENGINES.map(e => swatch(e.color, spoken(at(e.said.quality, k), true), e.dash ? "dashed" : "line")).join("");
  fitLegends("quality", false);
  const klOf = e => nulls(e, "kl"), missed = e => e.steps.misses_total;  // Python's series (the window's QualityPanel)
  stacked(k, [
    { title: Q("KL(exact || engine) per step"), left: Q("KL") + " (nats)", series: ENGINES.map(e => ({ color: e.color, dash: dashOf(e), ys: klOf(e) })),
      dots: ENGINES.map(e => ({ x: stepOf(e, k), y: klOf(e)[stepOf(e, k)], color: e.color })) },
    { title: Q("top-1 disagreements so far"), left: Q("steps"), series: ENGINES.map(e => ({ color: e.color, dash: dashOf(e), ys: missed(e) })),
      dots: ENGINES.map(e => ({ x: stepOf(e, k), y: missed(e)[stepOf(e, k)], color: e.color })) },
  ], el.quality.canvas);
}

// Summary: per engine totals up to the step, Python's (the window's SummaryPanel: kvviz/page/said_compare.py Summary).
function drawSummary(k) {
  const said = SAID.summary, cells = at(said.cells, k), best = at(said.best, k), labels = at(said.labels, k);
  let out = `<div class="heading">${spoken(at(said.heading, k), true)}</div>`;
  out += `<div class="table-scroll"><table class="summary"><thead><tr><th></th>${ENGINES.map(e => `<th style="color:${e.color}">${esc(label(e))}</th>`).join("")}</tr></thead><tbody>`;
  said.rows.forEach((key, r) => {
    out += `<tr data-key="${key}"><th class="row">${spoken(labels[r], true)}</th>` + ENGINES.map((e, i) =>
      `<td class="${best[r].includes(e.order) ? "best" : ""}" data-engine="${esc(e.name)}">${esc(cells[i][r])}</td>`).join("") + "</tr>";
  });
  out += "</tbody></table></div>";
  for (const [kind, note] of at(said.notes, k)) out += `<div class="note ${kind}">${spoken(note, true)}</div>`;
  const scrolled = el.summary.body.querySelector(".table-scroll"), left = scrolled ? scrolled.scrollLeft : 0;
  el.summary.body.innerHTML = out;
  el.summary.body.querySelector(".table-scroll").scrollLeft = left;  // the figures the reader scrolled to stay in view
}

// -- the page: bar, slider, keys, language ------------------------------------------------------------
function drawBar(k) {
  const T = s => tr("TransportBar", s);
  document.getElementById("step-name").textContent = T("Step");
  const slider = document.getElementById("slider");
  slider.title = T("Scrub through the recorded steps (Left/Right, Home/End)");
  slider.value = String(k);
  const bar = say(DATA.bar), badge = document.getElementById("badge");  // Python's words (kvviz/page _bar)
  document.getElementById("step-label").textContent = atStep(bar.label[k === 0 ? 0 : 1], k);
  badge.title = T("Whether the engines' tokens so far are the same");
  badge.textContent = bar.badge; badge.className = DATA.bar.badge_kind;
  const box = document.getElementById("narration");
  fitNarration(box);
  box.innerHTML = narrationHtml(k);
  document.getElementById("status").textContent = say(DATA.status);  // the window's status bar fields (Python's)
  for (const b of document.querySelectorAll("#langs button")) b.classList.toggle("on", b.dataset.lang === lang);
  document.getElementById("play").innerHTML = playing ? "&#10074;&#10074;" : "&#9654;";
}
function narrationHtml(k) {  // Python's narration (the window's words); an engine's name where Python marked it (ENGINE_MARK)
  return say(DATA.narration)[k - FIRST].replace(/[\ue000-\uf8ff]/g, c => {
    const e = ENGINES.find(x => x.order === c.charCodeAt(0) - 0xe000);
    return `<b style="color:${e.color}">${esc(label(e))}</b>`;
  });
}
// The narration box holds whole lines: as many as the longest narration takes at the box's width, where the page has
// room for them (at least 4 lines, at most 12% of its height: 4 at 720 px, 6 at 900), else that many and a scroll bar.
// One height for every step, so the panels keep their place; measured again when the size, the zoom or the language
// changes.
const NARRATION_SHARE = 0.12, NARRATION_MIN_LINES = 4, NARRATION_MEASURED = 6;
let narrationFit = "";
function fitNarration(box) {
  const key = `${box.offsetWidth} ${document.body.clientHeight} ${ZOOM} ${lang}`;
  if (key === narrationFit) return;
  narrationFit = key;
  const texts = say(DATA.narration), lineH = parseFloat(getComputedStyle(box).lineHeight);
  // The longest narrations by their text (the lines follow the length); each laid out in the box, without a scroll bar
  const longest = texts.map((t, i) => [t.length, i]).sort((a, b) => b[0] - a[0]).slice(0, NARRATION_MEASURED);
  box.style.overflowY = "hidden"; box.style.height = "auto";
  let lines = 1;
  for (const [, i] of longest) { box.innerHTML = narrationHtml(FIRST + i); lines = Math.max(lines, Math.round(box.scrollHeight / lineH)); }
  const room = Math.max(NARRATION_MIN_LINES, Math.floor(document.body.clientHeight * NARRATION_SHARE / lineH));
  box.style.overflowY = ""; box.style.height = `${Math.min(lines, room) * lineH}px`;
}
const DRAW = { token_stream: drawTokens, work_matrix: drawWorkMatrix, recompute: drawRecompute, attention: drawAttention,
  latency: drawLatency, bytes: drawBytes, cache_memory: drawCacheMemory, quality: drawQuality, summary: drawSummary };
let frames = 0, SERVE = null;  // SERVE: serve.js's drawing of a serve record, when the page is one
function drawServeBar(k) {
  document.getElementById("step-name").textContent = tr("TransportBar", "Step");
  document.getElementById("slider").value = String(k);
  document.getElementById("step-label").textContent = SERVE.label(k);
  document.getElementById("status").textContent = SERVE.status();
  for (const b of document.querySelectorAll("#langs button")) b.classList.toggle("on", b.dataset.lang === lang);
  document.getElementById("play").innerHTML = playing ? "&#10074;&#10074;" : "&#9654;";
}
function draw() {
  document.documentElement.lang = lang === "zh_CN" ? "zh-CN" : "en";
  // The bar and the narration first: the narration's height sets the panels', which the canvases measure.
  if (SERVE) {
    drawServeBar(step);
    try { SERVE.draw(step); } catch (err) { errors.push("serve: " + err); console.error("serve", err); }
  } else {
    drawBar(step);
    for (const [key, context, title] of PANELS) el[key].title.textContent = tr(context, title);
    for (const [key] of PANELS) {
      try { DRAW[key](step); } catch (err) { errors.push(key + ": " + err); console.error(key, err); }
    }
  }
  frames++;
  document.body.dataset.step = String(step);
  document.body.dataset.lang = lang;
  document.body.dataset.frames = String(frames);
}
function setStep(k) {
  k = Math.max(FIRST, Math.min(LAST, k));
  if (k !== step) { step = k; draw(); }
}
function togglePlay() {
  if (playing) { clearInterval(playing); playing = null; draw(); return; }
  if (step >= LAST) setStep(FIRST);
  playing = setInterval(() => { if (step >= LAST) togglePlay(); else setStep(step + 1); }, 125);
  draw();
}
function init() {
  if (DATA.start.embedded) document.body.classList.add("embedded");
  if (DATA.kind === "serve") {
    SERVE = window.kvvizServe({ DATA, say, atStep, esc, hex, fitCanvas, swatch, plot, redraw: draw, zoom: () => ZOOM });
    document.getElementById("badge").style.display = "none";
  } else buildPanels();
  const slider = document.getElementById("slider");
  slider.min = String(FIRST); slider.max = String(LAST);
  slider.addEventListener("input", () => setStep(Number(slider.value)));
  document.getElementById("play").addEventListener("click", ev => { ev.currentTarget.blur(); togglePlay(); });
  for (const b of document.querySelectorAll("#langs button")) b.addEventListener("click", () => { lang = b.dataset.lang; b.blur(); draw(); });
  document.addEventListener("keydown", ev => {
    if (ev.target && ev.target.tagName === "SELECT") return;
    const moves = { ArrowLeft: step - 1, ArrowRight: step + 1, Home: FIRST, End: LAST };
    if (ev.key === " " || ev.code === "Space") { ev.preventDefault(); togglePlay(); }
    else if (ev.key in moves) { ev.preventDefault(); setStep(moves[ev.key]); }
  });
  // Drawn again whenever the page's size changes, the first layout included: in a notebook cell's iframe
  // the script can run before the frame is laid out, when every canvas measures 0 (drawn 1 px, stretched)
  let pending = 0;
  const redraw = () => { cancelAnimationFrame(pending); pending = requestAnimationFrame(draw); };
  if (window.ResizeObserver) {
    const sizes = new ResizeObserver(redraw);
    for (const node of [document.documentElement, ...document.querySelectorAll("canvas")]) sizes.observe(node);
  } else window.addEventListener("resize", redraw);
  draw();
  performance.mark("kvviz-drawn");  // the first step drawn: what the benchmark times
}
// A lesson deck's calls (kvviz/page/lesson.js), as the presenter draws a scene: its marks (a work-matrix region; a
// serve page's request row, pool block), the request selected, the zoom (percent, as the scene file's).
function highlight(marks) { MARKS = marks || null; if (SERVE) SERVE.highlight(MARKS); draw(); }
function selectRequest(request) { if (SERVE) SERVE.select(request); draw(); }
function setZoom(percent) { ZOOM = percent / 100; document.documentElement.style.zoom = String(ZOOM); draw(); }
window.kvviz = { get step() { return step; }, get lang() { return lang; }, get zoom() { return Math.round(ZOOM * 100); },
  setStep, highlight, selectRequest, setZoom, errors,
  get untranslated() { return [...untranslated].map(k => k.split("\u0000")).concat(SAID ? SAID.untranslated : []); } };
init();
})();
