/* kvviz watch page: a recorded watch session of vLLM servers drawn at one moment the slider picks: the prefix
   cache's hash chains as a tree (a trunk shared by several requests branches), usage and requests, prefix hit
   rate, TTFT and ITL over the session, the counters and the narration. kvviz/page/watch.py computes every
   figure, sentence, series, axis label and the tree's layout into the data; this file draws them and navigates.
   No network, canvas and DOM only. Every text comes in both languages ({en, zh_CN}); the buttons at the top pick
   one (DATA.lang the first). */
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("kvviz-data").textContent);
  const SERVERS = DATA.servers, FRAMES = DATA.frames, LAST = FRAMES.length - 1;
  const TRUNK = "#1f77b4", BRANCH = "#9ecae1", PICKED = "#ffb000", FG = "#303030", MUTED = "#8a8a8a";
  const LONE_DOT = 10;  // CSS px across: a series' only value, as the Watch view's marker (style.px(10))
  let frame = LAST, picked = null, playing = null, frames = 0, lang = DATA.lang || "en";
  const say = v => (v !== null && typeof v === "object") ? (v[lang] ?? v.en) : v;  // a text in the page's language
  const word = name => say(DATA.words[name]);  // one of the page's fixed words (Python's)
  const errors = [];
  const esc = t => String(t).replace(/[&<>"]/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const grid = document.getElementById("grid");
  grid.style.gridTemplateColumns = "minmax(0, 2fr) minmax(0, 2fr) minmax(0, 2fr)";
  grid.style.gridTemplateRows = "minmax(0, 3fr) minmax(0, 2fr)";
  const el = {};
  const PANELS = [["tree", "1 / span 2", "1", true], ["text", "3", "1", false], ["usage", "1", "2", true],
    ["hits", "2", "2", true], ["latency", "3", "2", true]];
  for (const [key, col, row, canvas] of PANELS) {
    const s = document.createElement("section");
    s.className = "panel"; s.id = "panel-" + key; s.style.gridColumn = col; s.style.gridRow = row;
    s.innerHTML = `<h2></h2><div class="legend"></div>` + (canvas ? "<canvas></canvas>" : `<div class="body"></div>`) +
      (canvas && key !== "tree" ? `<div class="caption empty" style="display:none;flex:1;align-items:center;` +
        `justify-content:center"></div>` : "");
    grid.appendChild(s);
    el[key] = { title: s.querySelector("h2"), legend: s.querySelector(".legend"), canvas: s.querySelector("canvas"),
      body: s.querySelector(".body"), empty: s.querySelector(".empty") };
  }
  document.getElementById("badge").style.display = "none";
  for (const b of document.querySelectorAll("#langs button")) b.addEventListener("click", () => { lang = b.dataset.lang; b.blur(); draw(); });

  function fit(canvas) {
    const r = canvas.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(r.width * dpr)), h = Math.max(1, Math.round(r.height * dpr));
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0); ctx.clearRect(0, 0, r.width, r.height);
    return [ctx, r.width, r.height];
  }
  let boxes = [];  // the tree's drawn rectangles: [x, y, w, h, server, rank, segment] for picking
  function drawTree(k) {
    const [ctx, W, H] = fit(el.tree.canvas);
    boxes = [];
    const trees = [];
    FRAMES[k].servers.forEach((s, i) => s.trees.forEach((t, r) => trees.push([i, r, t])));
    const band = H / Math.max(1, trees.length);
    ctx.font = "11px sans-serif";
    trees.forEach(([i, r, t], n) => {
      const y0 = n * band, left = 8, top = y0 + 16, w = W - 16, h = band - 22;
      ctx.fillStyle = SERVERS[i].color;
      ctx.fillText(say(DATA.phrases[t.head]), left, y0 + 12);
      if (!t.segs.length) return;
      const xs = w / Math.max(1, t.depth), ys = h / Math.max(1, t.rows);
      for (let j = 0; j < t.segs.length; j++) {
        const [x0, len, r0, r1, branches] = t.segs[j];
        const x = left + x0 * xs, y = top + r0 * ys, bw = Math.max(1, len * xs - 1), bh = Math.max(1, (r1 - r0) * ys - 1);
        const isPicked = picked && picked[0] === i && picked[1] === r && picked[2] === j;
        ctx.fillStyle = isPicked ? PICKED : branches > 1 ? TRUNK : BRANCH;
        ctx.fillRect(x, y, bw, bh);
        if (xs >= 3 && len > 1) {  // block boundaries inside the segment
          ctx.fillStyle = "#ffffff";
          for (let b = 1; b < len; b++) ctx.fillRect(x + b * xs - 1, y, 1, bh);
        }
        boxes.push([x, y, bw, bh, i, r, j]);
      }
    });
    el.tree.legend.innerHTML = `<span style="color:${TRUNK}">&#9632;</span> ${esc(word("trunk"))} &nbsp; ` +
      `<span style="color:${BRANCH}">&#9632;</span> ${esc(word("branch"))} &nbsp; ${esc(word("width"))}`;
  }
  el.tree.canvas.addEventListener("click", ev => {
    const r = el.tree.canvas.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    const hit = boxes.find(b => x >= b[0] && x <= b[0] + b[2] && y >= b[1] && y <= b[1] + b[3]);
    picked = hit ? [hit[4], hit[5], hit[6]] : null;
    draw();
  });
  function drawText(k) {
    let out = "";
    FRAMES[k].servers.forEach((s, i) => {
      out += `<div class="heading" style="color:${SERVERS[i].color}">${esc(SERVERS[i].url)}: ${esc(say(s.state))}</div>` +
        `<div>${esc(say(s.events))}</div><div>${esc(say(s.figures))}</div><div class="caption">${esc(say(s.counters))}</div>`;
    });
    if (picked) {
      const t = FRAMES[k].servers[picked[0]] && FRAMES[k].servers[picked[0]].trees[picked[1]];
      const seg = t && t.segs[picked[2]];
      if (seg) out += `<div class="note"><b>${esc(say(DATA.phrases[seg[7]]))}</b>` +
        `<pre style="white-space:pre-wrap;word-break:break-all">${esc(seg[6] || word("no_text"))}</pre></div>`;
    }
    el.text.body.innerHTML = out;
  }
  // A plot of Python's (DATA.plots[key]): its lines over each server's sample times, its y ticks, the moment's line.
  function lines(canvas, p) {
    const [ctx, W, H] = fit(canvas);
    const left = 44, right = W - 8, top = 8, bottom = H - 20, t = FRAMES[frame].t, [tMax, tLast] = DATA.t_axis;
    const X = v => left + v / tMax * (right - left), Y = v => bottom - v / (p.ymax || 1) * (bottom - top);
    ctx.strokeStyle = "#d0d0d0"; ctx.fillStyle = MUTED; ctx.font = "11px sans-serif";
    for (const [v, text] of p.ticks) {
      const y = Y(v);
      ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(right, y); ctx.stroke();
      ctx.fillText(text, 2, y + 4);
    }
    ctx.fillText(tLast, right - 30, H - 4); ctx.fillText("0 s", left, H - 4);
    for (const [server, dash, ys] of p.lines) {
      const xs = SERVERS[server].series.t, color = SERVERS[server].color;
      ctx.strokeStyle = color; ctx.setLineDash(dash || []); ctx.lineWidth = 1.5; ctx.beginPath();
      let on = false;
      ys.forEach((v, i) => {
        if (v === null) { on = false; return; }
        const x = X(xs[i]), y = Y(v);
        if (on) ctx.lineTo(x, y); else ctx.moveTo(x, y);
        on = true;
      });
      ctx.stroke(); ctx.setLineDash([]);
      ctx.fillStyle = color;
      const only = ys.filter(v => v !== null).length === 1;  // one value is no line: a dot
      ys.forEach((v, i) => {  // a mark per sample of a solid line, and on any line where a sample has no neighbour
        if (v === null) return;
        if (only) { ctx.beginPath(); ctx.arc(X(xs[i]), Y(v), LONE_DOT / 2, 0, 2 * Math.PI); ctx.fill(); }
        else if (!dash || ((i === 0 || ys[i - 1] === null) && (i === ys.length - 1 || ys[i + 1] === null))) {
          ctx.fillRect(X(xs[i]) - 1.5, Y(v) - 1.5, 3, 3);
        }
      });
    }
    ctx.strokeStyle = "#555555"; ctx.beginPath(); ctx.moveTo(X(t), top); ctx.lineTo(X(t), bottom); ctx.stroke();
  }
  function drawPlots() {
    for (const key of ["usage", "hits", "latency"]) {
      const p = DATA.plots[key];
      el[key].legend.innerHTML = SERVERS.map((s, i) => `<div><span style="color:${s.color}">&#9632;</span> ${esc(say(p.legend[i]))}</div>`).join("");
      el[key].canvas.style.display = p.empty ? "none" : "";  // no value on any line: Python's words, no axes
      el[key].empty.style.display = p.empty ? "flex" : "none";
      el[key].empty.textContent = p.empty ? say(p.empty) : "";
      if (!p.empty) lines(el[key].canvas, p);
    }
  }
  function narrate(k) {
    let out = "";
    FRAMES[k].servers.forEach((s, i) => {
      const said = SERVERS[i].narration.slice(Math.max(0, s.said - 4), s.said);
      for (const [t, text] of said) out += `<div><b style="color:${SERVERS[i].color}">${esc(t)}</b> ${esc(say(text))}</div>`;
    });
    document.getElementById("narration").innerHTML = out || `<div class="caption">${esc(word("nothing"))}</div>`;
  }
  function draw() {
    const k = frame;
    for (const b of document.querySelectorAll("#langs button")) b.classList.toggle("on", b.dataset.lang === lang);
    document.body.dataset.lang = lang;
    document.getElementById("step-name").textContent = word("moment");
    for (const key of Object.keys(el)) el[key].title.textContent = word(key);
    document.getElementById("slider").value = String(k);
    document.getElementById("step-label").textContent = say(FRAMES[k].label);
    document.getElementById("status").textContent = say(DATA.status);
    document.getElementById("play").innerHTML = playing ? "&#10074;&#10074;" : "&#9654;";
    narrate(k);
    for (const [name, fn] of [["tree", drawTree], ["text", drawText], ["plots", drawPlots]]) {
      try { fn(k); } catch (err) { errors.push(name + ": " + err); console.error(name, err); }
    }
    frames++;
    document.body.dataset.step = String(k);
    document.body.dataset.frames = String(frames);
    document.body.dataset.errors = String(errors.length);
  }
  function setFrame(k) { k = Math.max(0, Math.min(LAST, k)); if (k !== frame) { frame = k; draw(); } }
  function togglePlay() {
    if (playing) { clearInterval(playing); playing = null; draw(); return; }
    if (frame >= LAST) setFrame(0);
    playing = setInterval(() => { if (frame >= LAST) togglePlay(); else setFrame(frame + 1); }, 250);
    draw();
  }
  const slider = document.getElementById("slider");
  slider.min = "0"; slider.max = String(LAST);
  slider.addEventListener("input", () => setFrame(Number(slider.value)));
  document.getElementById("play").addEventListener("click", ev => { ev.currentTarget.blur(); togglePlay(); });
  document.addEventListener("keydown", ev => {
    const moves = { ArrowLeft: frame - 1, ArrowRight: frame + 1, Home: 0, End: LAST };
    if (ev.key === " ") { ev.preventDefault(); togglePlay(); } else if (ev.key in moves) { ev.preventDefault(); setFrame(moves[ev.key]); }
  });
  let pending = 0;
  const redraw = () => { cancelAnimationFrame(pending); pending = requestAnimationFrame(draw); };
  if (window.ResizeObserver) new ResizeObserver(redraw).observe(document.documentElement); else window.addEventListener("resize", redraw);
  draw();
  window.kvviz = { get step() { return frame; }, setStep: setFrame, errors };
})();
