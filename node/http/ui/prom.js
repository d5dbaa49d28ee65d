// Prometheus text exposition (what GET /metrics answers), read into samples.

const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescape(v) {
  return v.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
}

function number(text) {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  return Number(text); // NaN stays NaN
}

// Map of metric name -> [{labels, value}], in the order the lines come.
export function parseMetrics(text) {
  const out = new Map();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    let name, labels = {}, rest;
    const brace = line.indexOf("{");
    const space = line.indexOf(" ");
    if (brace !== -1 && (space === -1 || brace < space)) {
      const close = line.lastIndexOf("}");
      name = line.slice(0, brace);
      for (const m of line.slice(brace + 1, close).matchAll(LABEL)) labels[m[1]] = unescape(m[2]);
      rest = line.slice(close + 1).trim();
    } else {
      name = line.slice(0, space);
      rest = line.slice(space + 1).trim();
    }
    const value = number(rest.split(/\s+/)[0]);
    if (!out.has(name)) out.set(name, []);
    out.get(name).push({ labels, value });
  }
  return out;
}

// {labelValue: value} of a metric with one label.
export function byLabel(metrics, name, label) {
  const out = {};
  for (const s of metrics.get(name) || []) out[s.labels[label]] = s.value;
  return out;
}

export function scalar(metrics, name) {
  const s = (metrics.get(name) || [])[0];
  return s ? s.value : undefined;
}

// A histogram's buckets as [{le, count}] (count in that bucket alone), with total and sum.
export function histogram(metrics, name) {
  const cumulative = (metrics.get(`${name}_bucket`) || [])
    .map((s) => ({ le: number(s.labels.le), value: s.value }))
    .sort((a, b) => a.le - b.le);
  const buckets = cumulative.map((b, i) => ({ le: b.le, count: b.value - (i ? cumulative[i - 1].value : 0) }));
  return { buckets, total: scalar(metrics, `${name}_count`) || 0, sum: scalar(metrics, `${name}_sum`) || 0 };
}

// The upper bound of the bucket where the q-quantile falls (Prometheus' bucket estimate, without interpolation).
export function quantileBound(h, q) {
  let seen = 0;
  for (const b of h.buckets) {
    seen += b.count;
    if (h.total > 0 && seen >= q * h.total) return b.le;
  }
  return undefined;
}
