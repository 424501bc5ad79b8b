// tailguard's live charts and units, in the browser. The layout, palette, tick rules and
// number formats are those of report::svg and report::units (Rust), so a live page draws
// what the static HTML report draws. No dependency; nothing is fetched.
"use strict";
const TG = (() => {
  const PALETTE = /*PALETTE*/[];
  const TOP = 36, LEFT = 72, RIGHT = 180, BOTTOM = 52, CHAR_WIDTH = 7, TICKS = 5;

  const esc = (s) => String(s).replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

  // report::units, Unit::Auto: 260µs, 42.1ms, 1.71s.
  function three(v) {
    return v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0);
  }
  function us(v) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    v = Math.round(v);
    if (v < 1000) return v + "µs";
    if (v < 1e6) return three(v / 1e3) + "ms";
    return three(v / 1e6) + "s";
  }
  // report::svg::number: 0.25, 40, 2.5k, 1M.
  function number(v) {
    let s = "";
    if (Math.abs(v) >= 1e6) { v /= 1e6; s = "M"; } else if (Math.abs(v) >= 1e3) { v /= 1e3; s = "k"; }
    let t = v.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
    if (t === "-0") t = "0";
    return t + s;
  }
  const rate = (v) => (v === null || v === undefined) ? "-" : v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0);
  const pct = (v) => (v === null || v === undefined) ? "-" : (100 * v).toFixed(v >= 0.9995 || v === 0 ? 0 : v >= 0.99 ? 2 : 1) + "%";

  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) {
      const half = Math.max(Math.abs(lo) * 0.5, 0.5);
      hi = lo + half; lo = lo === 0 ? 0 : lo - half;
    }
    const raw = (hi - lo) / Math.max(count, 1);
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    let step = 10 * power;
    for (const m of [1, 2, 2.5, 5, 10]) { if (m * power >= raw * (1 - 1e-9)) { step = m * power; break; } }
    const first = Math.floor(lo / step + 1e-9), last = Math.ceil(hi / step - 1e-9);
    const out = [];
    for (let i = first; i <= last; i++) out.push(i * step);
    return out;
  }
  function linearScale(lo, hi, format) {
    const t = niceTicks(lo, hi, TICKS);
    return { lo: t[0], hi: t[t.length - 1], ticks: t.map((v) => [v, format(v)]) };
  }
  function logScale(lo, hi, format) {
    const first = Math.floor(lo), last = Math.max(Math.ceil(hi), first + 1);
    const ticks = [];
    for (let d = first; d <= last; d++) {
      const decade = Math.pow(10, d);
      ticks.push([d, format(decade)]);
      if (last - first <= 2 && d < last) for (const m of [2, 5]) ticks.push([Math.log10(m * decade), format(m * decade)]);
    }
    return { lo: first, hi: last, ticks };
  }

  // chart({title, xTitle, yTitle, yLog, yFormat, xFormat, xRange: [lo, hi], yRange: [lo, hi],
  //        series: [{name, points: [[x, y|null]], color, dashed}]}) -> an <svg> string; each
  // series is <path class="series" data-series="NAME">, as report::svg writes it.
  function chart(c) {
    const w = c.width || 640, h = c.height || 360;
    const yF = c.yFormat || number, xF = c.xFormat || number;
    const yu = (y) => { if (y === null || y === undefined) return null; const v = c.yLog ? (y > 0 ? Math.log10(y) : NaN) : y; return isFinite(v) ? v : null; };
    const xs = [], ys = [];
    for (const s of c.series) for (const [x, y] of s.points) { const v = yu(y); if (v !== null && isFinite(x)) { xs.push(x); ys.push(v); } }
    const x = c.xRange ? linearScale(c.xRange[0], c.xRange[1], xF)
      : linearScale(xs.length ? Math.min(...xs) : 0, xs.length ? Math.max(...xs) : 1, xF);
    let y;
    if (c.yRange) y = c.yLog ? logScale(Math.log10(c.yRange[0]), Math.log10(c.yRange[1]), yF) : linearScale(c.yRange[0], c.yRange[1], yF);
    else if (!ys.length) y = c.yLog ? logScale(2, 5, yF) : linearScale(0, 1, yF);
    else if (c.yLog) y = logScale(Math.min(...ys), Math.max(...ys), yF);
    else y = linearScale(Math.min(0, ...ys), Math.max(0, ...ys), yF);
    const longest = Math.max(0, ...c.series.map((s) => s.name.length));
    const right = Math.max(RIGHT, 16 + 32 + CHAR_WIDTH * longest);
    const left = LEFT, top = TOP, width = Math.max(w - LEFT - right, 40), height = h - TOP - BOTTOM;
    const frac = (sc, u) => Math.min(1, Math.max(0, (u - sc.lo) / (sc.hi - sc.lo)));
    const at = (ux, uy) => [left + width * frac(x, ux), top + height * (1 - frac(y, uy))];
    const r = left + width, b = top + height;
    let o = `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 ${w} ${h}" font-family="sans-serif" font-size="12">`;
    o += `<title>${esc(c.title)}</title><rect width="100%" height="100%" fill="white"/>`;
    o += `<text x="${LEFT}" y="22" font-size="14" font-weight="bold">${esc(c.title)}</text>`;
    o += `<g stroke="#e4e4e4" fill="none">`;
    for (const [u] of x.ticks) o += `<path d="M${at(u, 0)[0].toFixed(1)},${top} V${b.toFixed(1)}"/>`;
    for (const [u] of y.ticks) o += `<path d="M${left},${at(0, u)[1].toFixed(1)} H${r.toFixed(1)}"/>`;
    o += `<path d="M${left},${top} V${b.toFixed(1)} H${r.toFixed(1)}" stroke="#888"/></g>`;
    for (const [u, l] of x.ticks) o += `<text x="${at(u, 0)[0].toFixed(1)}" y="${(b + 16).toFixed(1)}" text-anchor="middle">${esc(l)}</text>`;
    for (const [u, l] of y.ticks) o += `<text x="${(left - 6).toFixed(1)}" y="${(at(0, u)[1] + 4).toFixed(1)}" text-anchor="end">${esc(l)}</text>`;
    o += `<text x="${((left + r) / 2).toFixed(1)}" y="${(b + 38).toFixed(1)}" text-anchor="middle">${esc(c.xTitle || "")}</text>`;
    o += `<text transform="rotate(-90)" x="${(-(top + b) / 2).toFixed(1)}" y="16" text-anchor="middle">${esc(c.yTitle || "")}</text>`;
    c.series.forEach((s, i) => {
      const color = PALETTE[(s.color === undefined ? i : s.color) % PALETTE.length];
      let d = "", down = false;
      const ops = [];
      for (const [px, py] of s.points) {
        const v = yu(py);
        if (v === null || !isFinite(px)) { down = false; continue; }
        const [sx, sy] = at(px, v);
        ops.push((down ? "L" : "M") + sx.toFixed(1) + "," + sy.toFixed(1));
        down = true;
      }
      // A lone point has no length: h0 with round caps draws it as a dot.
      ops.forEach((op, k) => { d += op + " "; if (op[0] === "M" && !(ops[k + 1] || "").startsWith("L")) d += "h0 "; });
      const dash = s.dashed ? ` stroke-dasharray="6,4"` : "";
      o += `<path class="series" data-series="${esc(s.name)}" fill="none" stroke="${color}" stroke-width="2" stroke-linecap="round" stroke-linejoin="round"${dash} d="${d.trim()}"/>`;
      const lx = w - right + 16, ly = TOP + 18 * i;
      o += `<line x1="${lx}" y1="${ly}" x2="${lx + 24}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/><text x="${lx + 30}" y="${ly + 4}">${esc(s.name)}</text>`;
    });
    return o + "</svg>";
  }

  // A figure in a tile, and a table cell with its raw value in data-v: the pages' building
  // blocks, and what tests read back from the DOM.
  function tile(key, label, value) {
    return `<div class="tile" data-k="${key}"><div class="k">${label}</div><div class="v">${value}</div></div>`;
  }
  function cell(key, text, value, cls) {
    const v = value === null || value === undefined ? "" : ` data-v="${esc(value)}"`;
    return `<td class="${cls || "num"}" data-k="${key}"${v}>${text}</td>`;
  }

  return { PALETTE, esc, us, number, rate, pct, chart, tile, cell };
})();
