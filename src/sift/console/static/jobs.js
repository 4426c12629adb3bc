// The caller's jobs: submit a batch from a textarea; a live list of batches and crawls
// with progress bars, each crawl labelled with its start URL and limits.

import { api } from "./api.js";
import { $, badge, cell, h, keepingFocus, num, replace, showError, when } from "./dom.js";

export const LIVE = new Set(["queued", "running"]);

export function newIdemKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `console-${new Date().toISOString().slice(0, 10)}-${hex}`;
}

export function progressOf(job) {
  return h("progress", {
    max: String(Math.max(job.targets_total, 1)),
    value: String(job.targets_done),
    "aria-label": `Progress of job ${job.id}: ${job.targets_done} of ${job.targets_total} targets`,
  });
}

// Whether a crawl reached its max_pages: its targets stop growing there (the API's
// targets_total never exceeds crawl.max_pages, as capped by the caller's class).
export function reachedMaxPages(job) {
  return job.kind === "crawl" && Boolean(job.crawl) && job.targets_total >= job.crawl.max_pages;
}

export function reachedBadge(job) {
  return reachedMaxPages(job)
    ? h("span", { class: "tag reached", title: "The crawl stopped adding pages at max_pages" },
        "max_pages reached")
    : null;
}

// A job's kind as a tag (styled like a status badge, but not one: .badge is the status).
export function kindTag(job) {
  const kind = job.kind || "batch";
  return h("span", { class: `tag ${kind}` }, kind);
}

// What a job is: "batch", or "crawl" with its start URL, depth and page limits.
function kindOf(job) {
  if (job.kind !== "crawl" || !job.crawl) return kindTag(job);
  const c = job.crawl;
  return [kindTag(job), " ", reachedBadge(job),
    h("div", { class: "url small" }, c.url),
    h("div", { class: "small muted" },
      `${c.scope} · depth ≤ ${c.max_depth} · pages ≤ ${num(c.max_pages)}`)];
}

export function setupJobs(router) {
  $("job-idem").value = newIdemKey();
  $("job-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const error = $("job-error");
    showError(error, null);
    const targets = $("job-urls").value.split("\n").map((s) => s.trim()).filter(Boolean);
    $("job-go").disabled = true;
    try {
      const job = await api("POST", "/v1/batch", {
        body: { targets, options: { format: $("job-format").value } },
        headers: { "Idempotency-Key": $("job-idem").value.trim() },
      });
      $("job-urls").value = "";
      $("job-idem").value = newIdemKey();
      router.go(`#/jobs/${job.id}`);
    } catch (err) {
      showError(error, err);
    } finally {
      $("job-go").disabled = false;
    }
  });
}

// Draw the list once; returns whether a job is still live (the router polls again).
export async function drawJobs() {
  const list = $("jobs-list");
  const { items } = await api("GET", "/v1/batch?limit=50");
  if (items.length === 0) {
    replace(list, h("p", { class: "muted", id: "jobs-empty" }, "No jobs yet."));
    return false;
  }
  keepingFocus(() => replace(
    list,
    h("div", { class: "table-wrap", id: "jobs-wrap", tabindex: "0", role: "region", "aria-label": "Your jobs" },
      h("table", { class: "list stack", id: "jobs-table" },
        h("thead", {}, h("tr", {},
          h("th", { scope: "col" }, "Job"), h("th", { scope: "col" }, "Kind"),
          h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Progress"),
          h("th", { scope: "col", class: "hide-narrow" }, "Created"))),
        h("tbody", {}, items.map((job) => h("tr", { "data-job": job.id, "data-kind": job.kind },
          cell("Job", {}, h("a", { href: `#/jobs/${job.id}`, id: `job-link-${job.id}`, class: "mono", "aria-label": `${job.kind === "crawl" ? "Crawl" : "Job"} ${job.id}` }, job.id.slice(0, 10))),
          cell("Kind", { class: "kind" }, kindOf(job)),
          cell("Status", {}, badge(job.status)),
          cell("Progress", {}, progressOf(job), " ", `${num(job.targets_done)}/${num(job.targets_total)}`),
          cell("Created", { class: "hide-narrow" }, when(job.created_at)),
        ))))),
  ));
  return items.some((job) => LIVE.has(job.status));
}
