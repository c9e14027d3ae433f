// tolk dashboard: draws the broker's snapshots (one a second over Server-Sent Events from
// /api/dashboard/events; shape in docs/dashboard.md). Plain DOM and hand-written SVG: no
// framework, no charting library, no build step.
'use strict';

const HISTORY_MS = 120 * 1000;
const $ = (id) => document.getElementById(id);
const history = new Map(); // "in>out" -> [{t, p99, mean, rate}], the last 120 s, for the chart
let selected = null; // "in>out" of the plotted pair
let matrixKey = '';
let last = null;

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

function fmtLatency(us) {
  if (us == null) return '';
  if (us < 1000) return `${us < 10 ? us.toFixed(1) : Math.round(us)} µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 2 : 1)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

function fmtRate(r) {
  if (r == null) return '…';
  if (r >= 1000) return `${(r / 1000).toFixed(1)}k/s`;
  return `${r < 10 && r > 0 ? r.toFixed(1) : Math.round(r)}/s`;
}

function fmtBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// Green at 100 µs and below, red at 100 ms and above, on a log scale.
function heat(us) {
  const x = Math.min(1, Math.max(0, (Math.log10(Math.max(us, 1)) - 2) / 3));
  return `hsla(${Math.round(130 - 130 * x)}, 70%, 50%, 0.22)`;
}

function buildMatrix(protocols) {
  const table = $('matrix');
  let html = '<thead><tr><th></th>' + protocols.map((p) => `<th scope="col">${esc(p)}</th>`).join('') + '</tr></thead><tbody>';
  for (const from of protocols) {
    html += `<tr><th scope="row">${esc(from)}</th>`;
    for (const to of protocols) {
      html += `<td class="empty" data-pair="${esc(from)}-${esc(to)}" data-in="${esc(from)}" data-out="${esc(to)}" title="${esc(from)} → ${esc(to)}"></td>`;
    }
    html += '</tr>';
  }
  table.innerHTML = html + '</tbody>';
}

function renderMatrix(snap) {
  const key = snap.protocols.join(',');
  if (key !== matrixKey) { buildMatrix(snap.protocols); matrixKey = key; }
  const cells = new Map(snap.cells.map((c) => [`${c.in}>${c.out}`, c]));
  for (const td of $('matrix').querySelectorAll('td')) {
    const pair = `${td.dataset.in}>${td.dataset.out}`;
    const c = cells.get(pair);
    td.classList.toggle('selected', pair === selected);
    if (!c) {
      // No traffic on this pair, ever: empty, not "0 µs".
      if (!td.classList.contains('empty')) { td.className = 'empty'; td.textContent = ''; td.style.background = ''; }
      delete td.dataset.rate; delete td.dataset.p50; delete td.dataset.p99; delete td.dataset.count;
      continue;
    }
    td.classList.remove('empty');
    td.classList.toggle('idle', !c.rate);
    // The last second's percentiles; an idle pair shows (greyed) those since the start.
    const p50 = c.p50 ?? c.p50_total;
    const p99 = c.p99 ?? c.p99_total;
    td.dataset.rate = c.rate == null ? '' : c.rate.toFixed(2);
    td.dataset.p50 = p50;
    td.dataset.p99 = p99;
    td.dataset.count = c.count;
    td.style.background = heat(p99);
    td.title = `${c.in} → ${c.out} (${c.hop}): ${c.count} messages; since the start p50 ${fmtLatency(c.p50_total)}, p99 ${fmtLatency(c.p99_total)}` +
      (c.p99 == null ? '' : `; last second p50 ${fmtLatency(c.p50)}, p99 ${fmtLatency(c.p99)}, mean ${fmtLatency(c.mean)}`);
    td.innerHTML = `<b>${fmtLatency(p99)}</b><span>${fmtLatency(p50)}</span><span>${fmtRate(c.rate)}</span>`;
  }
}

function remember(snap) {
  const t = snap.at_ms;
  for (const c of snap.cells) {
    const key = `${c.in}>${c.out}`;
    let points = history.get(key);
    if (!points) history.set(key, (points = []));
    points.push({ t, p99: c.p99, mean: c.mean, rate: c.rate ?? 0 }); // null latencies: a gap
    while (points.length && points[0].t < t - HISTORY_MS) points.shift();
  }
  if (!selected && snap.cells.length) {
    // Until someone clicks: the busiest pair.
    selected = snap.cells.reduce((a, b) => ((b.rate ?? 0) > (a.rate ?? 0) ? b : a), snap.cells[0]);
    selected = `${selected.in}>${selected.out}`;
  }
}

// Round up to 1, 2 or 5 times a power of ten, for axis maxima.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v);
}

function renderChart(now) {
  const svg = $('chart');
  $('pair-name').textContent = selected ? selected.replace('>', ' → ') : 'none';
  const points = (selected && history.get(selected)) || [];
  // Drawn at the chart's own width in CSS pixels, so that its text stays legible on a phone.
  const W = Math.max(300, Math.round(svg.clientWidth || 640)), H = 180, L = 52, R = 44, T = 8, B = 20;
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const x = (t) => L + ((t - (now - HISTORY_MS)) / HISTORY_MS) * (W - L - R);
  const latMax = niceMax(Math.max(0, ...points.map((p) => Math.max(p.p99 ?? 0, p.mean ?? 0))));
  const rateMax = niceMax(Math.max(0, ...points.map((p) => p.rate)));
  const yl = (v) => T + (1 - v / latMax) * (H - T - B);
  const yr = (v) => T + (1 - v / rateMax) * (H - T - B);
  let out = '';
  for (let i = 0; i <= 4; i++) {
    const y = T + (i / 4) * (H - T - B);
    out += `<line class="grid" x1="${L}" x2="${W - R}" y1="${y}" y2="${y}"/>`;
    out += `<text x="${L - 4}" y="${y + 3}" text-anchor="end">${fmtLatency(latMax * (1 - i / 4))}</text>`;
    out += `<text x="${W - R + 4}" y="${y + 3}">${fmtRate(rateMax * (1 - i / 4))}</text>`;
  }
  for (const s of [120, 90, 60, 30, 0]) {
    out += `<text x="${x(now - s * 1000)}" y="${H - 4}" text-anchor="middle">${s ? `-${s}s` : 'now'}</text>`;
  }
  const line = (cls, pick, y) => {
    const pts = points.filter((p) => pick(p) != null).map((p) => `${x(p.t).toFixed(1)},${y(pick(p)).toFixed(1)}`);
    return pts.length ? `<polyline class="${cls}" points="${pts.join(' ')}"/>` : '';
  };
  out += line('rate', (p) => p.rate, yr) + line('mean', (p) => p.mean, yl) + line('p99', (p) => p.p99, yl);
  if (!points.length) out += `<text x="${W / 2}" y="${H / 2}" text-anchor="middle">no traffic yet</text>`;
  svg.innerHTML = out;
}

function renderSide(snap) {
  const conns = Object.entries(snap.connections);
  const most = Math.max(1, ...conns.map(([, n]) => n));
  $('connections').innerHTML = conns
    .map(([p, n]) => `<div><span>${esc(p)}</span><span class="bar"><i style="width:${(100 * n) / most}%"></i></span><span class="num">${n}</span></div>`)
    .join('');

  const m = snap.memory;
  const share = m.limit ? m.held / m.limit : 0;
  $('memory').innerHTML =
    `<div class="bars"><div><span>held</span><span class="bar${share > 0.8 ? ' warn' : ''}"><i style="width:${Math.min(100, 100 * share)}%"></i></span>` +
    `<span class="num">${m.limit ? Math.round(100 * share) + '%' : ''}</span></div></div>` +
    `<p class="muted">${fmtBytes(m.held)} of ${m.limit ? fmtBytes(m.limit) : 'no budget'}</p>` +
    `<p class="muted">${Object.entries(m.by_kind).filter(([, n]) => n).map(([k, n]) => `${esc(k)} ${fmtBytes(n)}`).join(' · ')}</p>`;

  $('dropped').innerHTML = snap.dropped.length
    ? '<table class="list"><tr><th>protocol</th><th>reason</th><th class="num">total</th><th class="num">now</th></tr>' +
      snap.dropped.map((d) => `<tr><td>${esc(d.protocol)}</td><td>${esc(d.reason)}</td><td class="num">${d.count}</td><td class="num">${fmtRate(d.rate)}</td></tr>`).join('') +
      '</table>'
    : '<p class="muted">none since start</p>';

  $('bridges-card').hidden = !snap.bridges.length;
  $('bridges').innerHTML =
    '<table class="list"><tr><th>bridge</th><th>state</th><th class="num">in</th><th class="num">out</th><th class="num">spool</th></tr>' +
    snap.bridges.map((b) => `<tr title="${esc(b.last_error ?? '')}"><td>${esc(b.name)} <span class="muted">${esc(b.kind)}</span></td>` +
      `<td class="${b.state}">${b.state}</td><td class="num">${b.messages_in}</td><td class="num">${b.messages_out}</td>` +
      `<td class="num">${b.spool_messages}</td></tr>`).join('') + '</table>';

  const c = snap.cluster;
  $('cluster-card').hidden = !c;
  if (c) {
    $('cluster').innerHTML =
      `<p>node <b>${esc(c.node)}</b>: <span class="${c.state}">${c.state}</span>${c.server ? ` via ${esc(c.server)}` : ''}</p>` +
      `<p class="muted">in ${c.messages_in} · out ${c.messages_out} · lag ${c.lag_messages} · spool ${c.spool_messages}` +
      `${c.last_error ? ` · last error: ${esc(c.last_error)}` : ''}</p>`;
  }
}

function render(snap) {
  last = snap;
  remember(snap);
  renderMatrix(snap);
  renderChart(snap.at_ms);
  renderSide(snap);
  $('updated').textContent = new Date(snap.at_ms).toLocaleTimeString();
}

$('matrix').addEventListener('click', (e) => {
  const td = e.target.closest('td');
  if (!td || td.classList.contains('empty')) return;
  selected = `${td.dataset.in}>${td.dataset.out}`;
  if (last) { renderMatrix(last); renderChart(last.at_ms); }
});

function connect() {
  const status = $('status');
  const events = new EventSource('api/dashboard/events');
  events.addEventListener('snapshot', (e) => {
    status.textContent = 'live';
    status.className = 'status live';
    render(JSON.parse(e.data));
  });
  // EventSource reconnects by itself (the broker asks for 2 s); this only says so.
  events.onerror = () => { status.textContent = 'reconnecting…'; status.className = 'status down'; };
}

connect();
