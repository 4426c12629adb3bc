// One job: status, counts, progress, its targets paged, a target's result or error,
// cancel, and results.ndjson as a download (fetched with the key, saved from a Blob).
// A crawl also shows its parameters, whether it reached max_pages, and each page's depth
// and parent (the page whose link found it).

import { api, apiRaw } from "./api.js";
import { $, badge, bytes, cell, h, keepingFocus, num, replace, showError, when } from "./dom.js";
import { ContentView } from "./envelope.js";
import { kindTag, LIVE, progressOf, reachedBadge, reachedMaxPages } from "./jobs.js";

const PAGE = 20;
const COUNTS = ["pending", "running", "done", "failed", "cancelled"];
const SCOPES = {
  prefix: "the start URL's host, at its path or below",
  host: "the start URL's host",
  domain: "the start URL's domain and its subdomains",
};

function field(name, ...value) {
  return [h("dt", {}, name), h("dd", { "data-field": name }, ...value)];
}

// A crawl's parameters and how far it got, as dl rows.
function crawlFields(job) {
  const c = job.crawl;
  const pages = reachedMaxPages(job)
    ? [reachedBadge(job), ` the crawl stopped adding pages at ${num(c.max_pages)}; `,
      "a larger max_pages may find more"]
    : `${num(job.targets_total)} found, at most ${num(c.max_pages)}`;
  return [
    field("Start URL", h("span", { class: "url" }, c.url)),
    field("Scope", h("code", {}, c.scope), ` (${SCOPES[c.scope] || "see docs/crawl.md"})`),
    field("Max depth", `${num(c.max_depth)} links from the start page`),
    field("Pages", pages),
    c.include.length ? field("Include", h("code", {}, c.include.join(" "))) : null,
    c.exclude.length ? field("Exclude", h("code", {}, c.exclude.join(" "))) : null,
    field("Sitemaps", c.sitemap ? "read" : "not read"),
  ];
}

export class JobPage {
  constructor(jobId) {
    this.id = jobId;
    this.offset = 0;
    this.job = null;
    this.items = [];
    this.detail = null; // idx of the target whose result or error is open
  }

  path(suffix = "") {
    return `/v1/batch/${encodeURIComponent(this.id)}${suffix}`;
  }

  // Returns whether the job is still live (the router then polls again).
  async refresh() {
    this.job = await api("GET", this.path());
    const page = await api("GET", this.path(`/results?offset=${this.offset}&limit=${PAGE}`));
    this.items = page.items;
    this.next = page.next_offset;
    keepingFocus(() => this.draw());
    return LIVE.has(this.job.status);
  }

  draw() {
    const job = this.job;
    const crawl = job.kind === "crawl" && job.crawl;
    $("job-h").textContent = `${crawl ? "Crawl" : "Job"} ${job.id}`;
    const error = h("div", { class: "error", role: "alert", id: "job-action-error", hidden: true });
    const view = $("job-view");
    const detail = $("target-detail") || h("div", { id: "target-detail" });
    replace(
      view,
      h("div", { class: "card" },
        h("dl", { class: "fields" },
          h("dt", {}, "Kind"), h("dd", { id: "job-kind" }, kindTag(job)),
          crawl ? crawlFields(job) : null,
          h("dt", {}, "Status"), h("dd", { id: "job-status" }, badge(job.status)),
          job.error ? [h("dt", {}, "Reason"), h("dd", { id: "job-reason" }, job.error)] : null,
          h("dt", {}, "Progress"), h("dd", {}, progressOf(job), " ",
            `${num(job.targets_done)} of ${num(job.targets_total)} targets finished`),
          h("dt", {}, "Created"), h("dd", {}, when(job.created_at)),
          h("dt", {}, "Expires"), h("dd", {}, when(job.expires_at), " (each read extends the lease)"),
        ),
        h("ul", { class: "counts", "aria-label": "Targets by status" },
          COUNTS.map((c) => h("li", { "data-count": c }, badge(c), " ", num(job.counts[c])))),
        h("div", { class: "row" },
          h("button", { type: "button", id: "job-cancel", class: "danger",
            disabled: !LIVE.has(job.status), onclick: () => this.cancel(error) }, "Cancel job"),
          h("button", { type: "button", id: "job-download", class: "secondary",
            onclick: () => this.download(error) }, "Download results.ndjson")),
      ),
      error,
      h("h2", {}, "Targets"),
      this.targetsTable(),
      this.pager(),
      detail,
    );
  }

  targetsTable() {
    const crawl = this.job.kind === "crawl";
    const col = (name) => h("th", { scope: "col" }, name);
    return h("div", { class: "table-wrap", id: "targets-wrap", tabindex: "0", role: "region", "aria-label": "Targets" },
      h("table", { class: "list stack", id: "targets-table" },
        h("thead", {}, h("tr", {},
          col("#"), crawl ? [col("Depth"), col("Parent")] : null,
          col("Status"), col("URL"), col("Outcome"))),
        h("tbody", {}, this.items.map((t) => h("tr", { "data-idx": String(t.idx) },
          cell("#", {}, String(t.idx)),
          crawl ? [
            cell("Depth", { "data-depth": "" }, String(t.depth)),
            cell("Parent", { "data-parent": "" }, t.parent === null ? "start page" : `#${t.parent}`),
          ] : null,
          cell("Status", {}, badge(t.status)),
          cell("URL", { class: "url" }, t.url),
          cell("Outcome", {}, this.outcome(t)))))));
  }

  outcome(t) {
    if (t.result) {
      return [`${t.result.status} · ${bytes(t.result.total_bytes)} `,
        h("button", { type: "button", class: "secondary", id: `target-${t.idx}-view`, "aria-label": `View the result of target ${t.idx}`,
          onclick: () => this.showResult(t) }, "View result")];
    }
    if (t.error) {
      return [h("code", {}, t.error.code), " ",
        h("button", { type: "button", class: "secondary", id: `target-${t.idx}-error`, "aria-label": `Error details of target ${t.idx}`,
          onclick: () => this.showError(t) }, "Error details"),
        h("div", { class: "small muted" }, t.error.hint)];
    }
    return "–";
  }

  pager() {
    const total = this.job.targets_total;
    const last = Math.min(this.offset + this.items.length, total);
    return h("div", { class: "pager" },
      h("button", { type: "button", class: "secondary", id: "page-prev", disabled: this.offset === 0,
        onclick: () => { this.offset = Math.max(0, this.offset - PAGE); this.refresh(); } }, "Previous"),
      h("span", {}, `${total === 0 ? 0 : this.offset + 1}–${last} of ${num(total)}`),
      h("button", { type: "button", class: "secondary", id: "page-next", disabled: this.next === null,
        onclick: () => { this.offset = this.next; this.refresh(); } }, "Next"));
  }

  detailBox(title) {
    const box = $("target-detail");
    const heading = h("h2", { id: "target-detail-h", tabindex: "-1" }, title);
    replace(box, heading);
    box.setAttribute("role", "region");
    box.setAttribute("aria-labelledby", "target-detail-h");
    return [box, heading];
  }

  showError(t) {
    const [box, heading] = this.detailBox(`Target ${t.idx}: ${t.error.code}`);
    const err = h("div", { class: "error", id: "target-error" });
    showError(err, t.error);
    box.append(h("p", { class: "url" }, t.url), err);
    heading.focus();
  }

  async showResult(t) {
    const [box, heading] = this.detailBox(`Target ${t.idx}: result`);
    const holder = h("div", { id: "target-result" });
    box.append(holder);
    // A stored result is the one slice the job asked for; the job's options are not in it,
    // so reading on is left to "Try a URL" (which knows its options) rather than guessed.
    const view = new ContentView(holder, { idPrefix: "target", more: null });
    await view.show(t.result);
    heading.focus();
  }

  async cancel(error) {
    showError(error, null);
    try {
      this.job = await api("DELETE", this.path());
      await this.refresh();
    } catch (err) {
      showError(error, err);
    }
  }

  async download(error) {
    showError(error, null);
    try {
      const response = await apiRaw("GET", this.path("/results.ndjson"));
      const blob = await response.blob();
      const url = URL.createObjectURL(blob);
      const a = h("a", { href: url, download: `${this.id}.ndjson`, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      showError(error, err);
    }
  }
}
