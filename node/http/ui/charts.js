// Bar charts on the vendored uPlot (vendor/README.md), loaded as the global `uPlot`.

const made = new Map(); // element id -> {chart, shape}

function bars(color) {
  return {
    label: "count",
    stroke: color,
    fill: `${color}99`,
    width: 1,
    points: { show: false },
    paths: uPlot.paths.bars({ size: [0.8, 48], gap: 1 }),
  };
}

// One chart per element, made again only when its shape (x labels, kind) changes.
function draw(el, shape, data, opts) {
  const old = made.get(el.id);
  if (old && old.shape === shape) {
    old.chart.setData(data);
    return;
  }
  if (old) old.chart.destroy();
  el.textContent = "";
  const chart = new uPlot({ width: Math.max(320, el.clientWidth - 8), height: 200, legend: { show: false }, ...opts }, data, el);
  made.set(el.id, { chart, shape });
}

// Counts under category labels (a histogram's buckets' upper bounds), x being their index;
// a label every few bars, as many as fit.
export function categoryBars(el, labels, counts, color = "#3b7dd8") {
  const xs = labels.map((_, i) => i);
  const every = Math.max(1, Math.ceil((labels.length * 60) / Math.max(320, el.clientWidth)));
  draw(el, `cat:${labels.join("|")}`, [xs, counts], {
    scales: {
      x: { time: false, range: [-0.6, labels.length - 0.4] },
      y: { range: (u, min, max) => [0, Math.max(1, max)] },
    },
    axes: [
      { splits: () => xs.filter((i) => i % every === 0), values: (u, splits) => splits.map((i) => labels[i]) },
      { size: 50 },
    ],
    series: [{}, bars(color)],
  });
}

// Counts per time bucket, ``starts`` in epoch seconds.
export function timeBars(el, starts, counts, color = "#2e9d6a") {
  draw(el, `time:${starts.length}:${starts[0]}`, [starts, counts], {
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    axes: [{}, { size: 50 }],
    series: [{}, bars(color)],
  });
}

export function clear(el) {
  const old = made.get(el.id);
  if (old) old.chart.destroy();
  made.delete(el.id);
  el.textContent = "";
}
