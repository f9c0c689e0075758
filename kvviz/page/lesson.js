/* kvviz lesson deck: a lesson's scenes, one at a time, each the run's own page (kvviz/page/page.js or serve.js,
   in an iframe made from the text kvviz/page/lesson.py stored once per run) laid out for the scene: its panels,
   the large one first; or a memory scene's tables. The captions and every figure in them come filled from Python
   in both languages, and so does the line saying where the lesson is at each step; this script only moves: PageDown / PageUp and the arrow keys walk the scene's steps (its
   step, then its bookmarks) and then the scenes, B blanks the screen, the language buttons switch captions
   and pages. Each scene's page is told the scene's zoom and highlight (window.kvviz.setZoom, highlight,
   selectRequest), which it draws as the presenter does. No network. */
"use strict";
(function () {
const DATA = JSON.parse(document.getElementById("kvviz-lesson").textContent);
const SCENES = DATA.scenes;
const stage = document.getElementById("stage");
const frames = {};  // scene index -> its iframe or memory element, made when first shown
let lang = DATA.start.lang, scene = 0, stop = 0, moves = 0;

function text(table) { return table[lang] || table.en; }
function layoutCss(s) {  // the page laid out for the scene: its panels only, the large one on the left
  const others = s.panels.filter(p => p !== s.large);
  const rows = Math.max(others.length, 1);
  let css = `#grid { grid-template-columns: ${others.length ? "minmax(0, 2fr) minmax(0, 1fr)" : "minmax(0, 1fr)"} !important;
    grid-template-rows: repeat(${rows}, minmax(0, 1fr)) !important; }
    #grid > .panel { display: none !important; }
    body { min-height: 0 !important; }
    #grid > #panel-${s.large} { display: flex !important; grid-column: 1 !important; grid-row: 1 / span ${rows} !important; }`;
  for (const p of others) css += `#grid > #panel-${p} { display: flex !important; grid-column: 2 !important; grid-row: auto !important; }`;
  return css;
}
function pageApi(i) {  // the scene's page script (window.kvviz of page.js), once loaded
  const f = frames[i];
  return f && f.tagName === "IFRAME" && f.contentWindow && f.contentWindow.kvviz ? f.contentWindow.kvviz : null;
}
function setPageLang(i) {
  const f = frames[i];
  if (!pageApi(i)) return;
  const want = lang === "zh" ? "zh_CN" : "en";
  if (pageApi(i).lang !== want) {
    const b = f.contentDocument.querySelector(`#langs button[data-lang="${want}"]`);
    if (b) b.click();
  }
}
function make(i) {
  if (frames[i]) return frames[i];
  const s = SCENES[i];
  let node;
  if (s.kind === "memory") {
    node = document.createElement("div");
    node.className = "memory";
    node.dataset.ready = "1";
  } else {
    node = document.createElement("iframe");
    node.title = s.title.en;
    node.addEventListener("load", () => {
      const doc = node.contentDocument;
      const style = doc.createElement("style");
      style.textContent = layoutCss(s) + "#bar #langs { display: none; }";
      doc.head.appendChild(style);
      doc.addEventListener("keydown", onKey, true);  // PageDown in the page moves the deck
      node.dataset.ready = "1";
      setPageLang(i);
      marks(i);
      if (i === scene) showStop();
      else if (pageApi(i)) pageApi(i).setStep(s.stops[0]);
    });
    node.srcdoc = DATA.pages[s.page];
  }
  node.style.visibility = "hidden";
  node.dataset.scene = String(i);
  stage.appendChild(node);
  frames[i] = node;
  return node;
}
function marks(i) {  // the scene's zoom and highlight, as the presenter draws them (the page's window.kvviz calls)
  const s = SCENES[i], api = pageApi(i);
  if (!api) return;
  if (s.zoom !== 100) api.setZoom(s.zoom);
  if (s.highlight) {
    api.highlight(s.highlight);
    if (s.highlight.request !== null) api.selectRequest(s.highlight.request);
  }
}
function drawMemory(i) {
  const s = SCENES[i], node = frames[i];
  node.innerHTML = s.panels.map(p => `<section class="${p === s.large ? "large" : ""}" id="memory-${p}">` +
    `<h2>${s.memory[lang][p].title}</h2>${s.memory[lang][p].body}</section>`).join("");
}
function showStop() {
  const s = SCENES[scene];
  if (s.kind === "memory") drawMemory(scene);
  else if (pageApi(scene)) { setPageLang(scene); pageApi(scene).setStep(s.stops[stop]); }
}
function draw() {
  const s = SCENES[scene];
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  document.getElementById("lesson-title").textContent = text(DATA.title);
  document.querySelector("#caption h1").textContent = text(s.title);
  document.querySelector("#caption p").textContent = text(s.caption);
  document.getElementById("where").textContent = text(s.where)[stop];
  for (const b of document.querySelectorAll("#langs button")) b.classList.toggle("on", b.dataset.lang === lang);
  const node = make(scene);
  for (const [i, f] of Object.entries(frames)) f.style.visibility = Number(i) === scene ? "visible" : "hidden";
  showStop();
  if (scene + 1 < SCENES.length) make(scene + 1);  // the next scene loads while this one is shown
  moves++;
  document.body.dataset.scene = String(scene);
  document.body.dataset.stop = String(stop);
  document.body.dataset.lang = lang;
  document.body.dataset.moves = String(moves);
  document.body.dataset.frames = String(moves);  // what tests/html_page_cdp.py's open() waits for
  return node;
}
function move(delta) {
  const s = SCENES[scene];
  if (delta > 0) {
    if (stop + 1 < s.stops.length) stop++;
    else if (scene + 1 < SCENES.length) { scene++; stop = 0; }
    else return;
  } else {
    if (stop > 0) stop--;
    else if (scene > 0) { scene--; stop = SCENES[scene].stops.length - 1; }
    else return;
  }
  draw();
}
function onKey(ev) {
  const next = ["PageDown", "ArrowDown", "ArrowRight"], prev = ["PageUp", "ArrowUp", "ArrowLeft"];
  const inPage = ev.target && ev.target.ownerDocument !== document;
  // Inside a scene's page Left/Right scrub its steps (page.js); PageDown/PageUp/Up/Down move the deck.
  if (inPage && (ev.key === "ArrowLeft" || ev.key === "ArrowRight")) return;
  if (next.includes(ev.key)) { ev.preventDefault(); ev.stopPropagation(); move(1); }
  else if (prev.includes(ev.key)) { ev.preventDefault(); ev.stopPropagation(); move(-1); }
  else if (ev.key === "b" || ev.key === "B" || ev.key === ".") {
    ev.preventDefault(); document.body.classList.toggle("blank");
  }
}
document.addEventListener("keydown", onKey, true);
document.getElementById("next").addEventListener("click", ev => { ev.currentTarget.blur(); move(1); });
document.getElementById("prev").addEventListener("click", ev => { ev.currentTarget.blur(); move(-1); });
for (const b of document.querySelectorAll("#langs button")) b.addEventListener("click", () => {
  lang = b.dataset.lang; b.blur();
  for (const i of Object.keys(frames)) setPageLang(Number(i));
  draw();
});
window.kvvizLesson = { get scene() { return scene; }, get stop() { return stop; }, get lang() { return lang; },
  get step() { const api = pageApi(scene); return api ? api.step : null; }, move,
  ready(i) { const f = frames[i === undefined ? scene : i]; return !!(f && f.dataset.ready && (SCENES[i === undefined ? scene : i].kind === "memory" || pageApi(i === undefined ? scene : i))); },
  get count() { return SCENES.length; } };
draw();
performance.mark("kvviz-lesson-drawn");
})();
