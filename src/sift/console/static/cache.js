// Cache and health: /healthz for everyone; /v1/stats (fleet callers and the operator) for
// the cache and batch numbers, sampled while the page is open to chart the hit rate.

import { api, ApiError } from "./api.js";
import { $, badge, bytes, h, num, replace, showError } from "./dom.js";

const MAX_SAMPLES = 60;

export class CachePage {
  constructor(identity) {
    this.identity = identity;
    this.samples = []; // {t, hit, miss, revalidated}: cumulative outcome counts
  }

  async refresh() {
    await this.drawHealth();
    if (this.identity.class !== "fleet") {
      replace($("cache-view"), h("p", { class: "notice", id: "cache-restricted" },
        "The cache and batch numbers are for fleet callers and the operator. Sign in with a ",
        "fleet key, or with the operator key of this run (DATA_DIR/operator.json on the ",
        "server's machine)."));
      return false;
    }
    try {
      const stats = await api("GET", "/v1/stats");
      this.sample(stats);
      this.draw(stats);
      showError($("cache-error"), null);
    } catch (err) {
      showError($("cache-error"), err);
    }
    return true; // keep sampling while the page is open
  }

  async drawHealth() {
    let health;
    try {
      health = await api("GET", "/healthz", { key: "" });
    } catch (err) {
      const e = err instanceof ApiError ? err : { code: "error", message: String(err) };
      health = { ok: false, version: "–", browser: "–", error: `${e.code}: ${e.message}` };
    }
    replace($("health"),
      h("h2", {}, "Health"),
      h("dl", { class: "fields", id: "health-fields" },
        h("dt", {}, "Server"), h("dd", {}, badge(health.ok ? "ok" : "bad"), " ", health.error || "answering"),
        h("dt", {}, "Version"), h("dd", { id: "health-version" }, health.version),
        h("dt", {}, "Browser engine"), h("dd", {}, health.browser)));
  }

  sample(stats) {
    this.samples.push({ t: stats.now, ...stats.cache.outcomes });
    if (this.samples.length > MAX_SAMPLES) this.samples.shift();
  }

  // Hit rate (hits and revalidations over all answers) since the server started, per sample.
  rates() {
    return this.samples.map((s) => {
      const all = s.hit + s.revalidated + s.miss;
      return all > 0 ? (s.hit + s.revalidated) / all : null;
    });
  }

  chart() {
    const rates = this.rates();
    const w = 300;
    const hgt = 100;
    const step = w / (MAX_SAMPLES - 1);
    const points = [];
    rates.forEach((r, i) => {
      if (r !== null) points.push([i * step, hgt - r * hgt]);
    });
    return h("svg:svg", { class: "chart", viewBox: `-4 -4 ${w + 8} ${hgt + 8}`, preserveAspectRatio: "none",
      role: "img", "aria-labelledby": "chart-title", id: "hit-chart" },
      h("svg:title", { id: "chart-title" }, "Hit rate since the server started, one point per sample, 0 to 100 %"),
      [0, 25, 50, 75, 100].map((y) => h("svg:line", { class: "grid", x1: "0", x2: String(w), y1: String(y), y2: String(y) })),
      points.length ? h("svg:polyline", { class: "line", points: points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ") }) : null,
      points.map(([x, y]) => h("svg:circle", { class: "dot", cx: x.toFixed(1), cy: y.toFixed(1), r: "2.5" })));
  }

  draw(stats) {
    const c = stats.cache;
    const b = stats.batch;
    const o = c.outcomes;
    const answered = o.hit + o.miss + o.revalidated;
    const rate = answered ? Math.round(((o.hit + o.revalidated) / answered) * 100) : null;
    replace($("cache-view"),
      h("div", { class: "stats" },
        h("div", { class: "card" },
          h("h2", {}, "Content cache"),
          h("label", { for: "cache-bar" }, `${bytes(c.bytes)} of ${bytes(c.max_bytes)} budget`),
          h("progress", { id: "cache-bar", class: "wide", max: String(Math.max(c.max_bytes, 1)), value: String(c.bytes) }),
          h("dl", { class: "fields", id: "cache-fields" },
            h("dt", {}, "Pages"), h("dd", { "data-stat": "pages" }, num(c.pages)),
            h("dt", {}, "Bodies"), h("dd", {}, num(c.bodies)),
            h("dt", {}, "Renders"), h("dd", {}, num(c.renders)),
            h("dt", {}, "Evictions"), h("dd", {}, num(c.evictions)))),
        h("div", { class: "card" },
          h("h2", {}, "Hit rate"),
          h("p", {}, h("span", { class: "big", id: "hit-rate" }, rate === null ? "–" : `${rate} %`),
            ` of ${num(answered)} answers since the server started`),
          h("p", { class: "small muted", id: "outcomes" },
            `hit ${num(o.hit)} · revalidated ${num(o.revalidated)} · miss ${num(o.miss)}`),
          this.chart(),
          h("p", { class: "small muted" },
            `One point every 2 s while this page is open (${this.samples.length} so far, the last ${MAX_SAMPLES} kept).`)),
        h("div", { class: "card" },
          h("h2", {}, "Batch"),
          h("label", { for: "batch-bar" }, `${bytes(b.bytes)} of ${bytes(b.max_bytes)} of stored results`),
          h("progress", { id: "batch-bar", class: "wide", max: String(Math.max(b.max_bytes, 1)), value: String(b.bytes) }),
          h("dl", { class: "fields" },
            h("dt", {}, "Live jobs"), h("dd", { id: "live-jobs" }, num(b.live_jobs)),
            h("dt", {}, "Jobs held"), h("dd", {}, num(b.jobs)),
            h("dt", {}, "Version"), h("dd", {}, stats.version),
            h("dt", {}, "Browser engine"), h("dd", {}, stats.browser)))));
  }
}
