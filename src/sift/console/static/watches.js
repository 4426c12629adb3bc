// Watches: add one (URL, interval), the caller's watches in a live list, and one watch's
// newest checks with their diffs. Every text (URLs, diffs, errors) goes on the page as
// text; a diff is shown in a <pre>, never as markup.

import { api } from "./api.js";
import { $, badge, cell, h, keepingFocus, num, replace, showError, when } from "./dom.js";

const EVENTS = 20;

export function setupWatches(router) {
  $("watch-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const error = $("watch-error");
    showError(error, null);
    $("watch-go").disabled = true;
    try {
      const body = { url: $("watch-url").value.trim(), every: $("watch-every").value.trim() };
      const ignore = $("watch-ignore").value.split("\n").map((s) => s.trim()).filter(Boolean);
      if (ignore.length) body.ignore = ignore;
      const made = await api("POST", "/v1/watches", { body });
      $("watch-url").value = "";
      router.go(`#/watches/${made.id}`);
    } catch (err) {
      showError(error, err);
    } finally {
      $("watch-go").disabled = false;
    }
  });
}

function outcome(w) {
  return w.last_outcome ? badge(w.last_outcome) : h("span", { class: "muted" }, "not yet");
}

// Draw the list; returns true so the router polls again (checks happen in the background).
export async function drawWatches() {
  const list = $("watches-list");
  const { items } = await api("GET", "/v1/watches");
  if (items.length === 0) {
    replace(list, h("p", { class: "muted", id: "watches-empty" }, "No watches yet."));
    return true;
  }
  keepingFocus(() => replace(
    list,
    h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Your watches" },
      h("table", { class: "list stack", id: "watches-table" },
        h("thead", {}, h("tr", {},
          h("th", { scope: "col" }, "URL"), h("th", { scope: "col" }, "Every"),
          h("th", { scope: "col" }, "Last"), h("th", { scope: "col" }, "Checks"),
          h("th", { scope: "col", class: "hide-narrow" }, "Next check"))),
        h("tbody", {}, items.map((w) => h("tr", { "data-watch": w.id },
          cell("URL", {}, h("a", { href: `#/watches/${w.id}`, class: "url" }, w.url)),
          cell("Every", {}, `${num(w.every_s)} s`),
          cell("Last", {}, outcome(w)),
          cell("Checks", {}, `${num(w.checks)} (${num(w.changes)} changed, ${num(w.failures)} failed)`),
          cell("Next check", { class: "hide-narrow" }, when(w.next_check_at)),
        ))))),
  ));
  return true;
}

function eventView(e) {
  const change = e.change || {};
  const head = h("p", {},
    h("span", { class: "mono" }, `#${e.seq}`), " ", when(e.checked_at), " ",
    badge(e.outcome === "failed" ? "failed" : change.status || "ok"),
    e.http_status ? ` HTTP ${e.http_status}` : "",
    change.status === "changed" ? ` +${num(change.added)} −${num(change.removed)}` : "",
    change.truncated ? " (diff truncated)" : "");
  const body = e.error
    ? h("p", { class: "small" }, h("span", { class: "code" }, e.error.code), ": ", e.error.message)
    : change.diff ? h("pre", { class: "diff" }, change.diff) : null;
  return h("li", { "data-seq": String(e.seq) }, head, body);
}

export class WatchPage {
  constructor(id) {
    this.id = id;
  }

  async refresh() {
    const w = await api("GET", `/v1/watches/${encodeURIComponent(this.id)}?events=${EVENTS}`);
    keepingFocus(() => replace(
      $("watch-view"),
      h("dl", { class: "card fields" },
        h("dt", {}, "URL"), h("dd", { class: "url" }, w.url),
        h("dt", {}, "Every"), h("dd", {}, `${num(w.every_s)} s`),
        h("dt", {}, "Next check"), h("dd", {}, when(w.next_check_at)),
        h("dt", {}, "Checks"), h("dd", {},
          `${num(w.checks)} (${num(w.changes)} changed, ${num(w.failures)} failed)`),
        w.ignore.length ? [h("dt", {}, "Ignore"), h("dd", {}, h("code", {}, w.ignore.join(" ")))] : null,
        w.webhook ? [h("dt", {}, "Webhook"), h("dd", { class: "url" }, w.webhook)] : null),
      h("h2", {}, "Newest checks"),
      w.events.length
        ? h("ol", { class: "events", id: "watch-events" }, w.events.map(eventView))
        : h("p", { class: "muted" }, "No check yet."),
      h("div", { class: "row" }, h("button", { type: "button", id: "watch-delete",
        onclick: async () => {
          await api("DELETE", `/v1/watches/${encodeURIComponent(this.id)}`);
          location.hash = "#/watches";
        } }, "Delete watch")),
    ));
    return true;
  }
}
