// One fetch envelope on screen: its fields, its content (raw beside rendered markdown),
// and "Read on" for the next slice of the same snapshot.

import { api, apiRaw } from "./api.js";
import { $, badge, bytes, h, replace, setSanitisedHTML, showError, when } from "./dom.js";

// What each warning means (docs/fetching.md, docs/rendering.md, docs/browser.md).
export const WARNINGS = {
  clamped: "a limit you asked for was above your class's and was lowered to it",
  thin_content: "the main-content pass found too little text, so the whole page was used",
  js_required_suspected: "the page looks built by JavaScript and no browser was used",
  browser_failed: "the browser was tried and failed; this is the plain HTTP result",
  browser_unavailable: "the page needs JavaScript but this server has no browser",
  browser_not_allowed: "the page needs JavaScript but your class may not use the browser",
  selector_no_match: "the CSS selector matched nothing",
  invalid_json: "the JSON body did not parse; it is passed through as text",
  truncated_input: "the page was larger than the render input limit and was cut",
  render_budget_exceeded: "the rendered output reached the class's limit and ends there",
  links_truncated: "not every link fitted in max_bytes",
  screenshot_cut: "the page was taller than your class's screenshot limit; the picture ends there",
};

// A screenshot as a data: URL (the console's CSP allows data: images, not other origins):
// fetched with the key in its header, like every API call.
async function screenshotSrc(shot) {
  const blob = await (await apiRaw("GET", shot.url)).blob();
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

const CACHE = {
  hit: "served from sift's cache",
  miss: "fetched from the site now",
  revalidated: "a stale copy the site confirmed unchanged (304)",
};

function field(name, ...value) {
  return [h("dt", {}, name), h("dd", { "data-field": name }, ...value)];
}

export function fieldsOf(env, shown) {
  const warnings = env.warnings || [];
  return h(
    "dl",
    { class: "fields" },
    field("Status", String(env.status)),
    field("URL", env.url),
    field("Final URL", env.final_url),
    field("Content type", env.content_type || "–"),
    env.title ? field("Title", env.title) : null,
    field("Cache", badge(env.cache), " ", CACHE[env.cache] || ""),
    field("Bytes", `${bytes(shown)} of ${bytes(env.total_bytes)}`,
      env.truncated ? " (more to read)" : " (all of it)"),
    field("Format", env.format),
    field("Engine", env.engine || "http"),
    env.actions
      ? field("Actions", h("ol", { class: "actions", start: "0" },
          env.actions.map((o) => h("li", {}, `${o.action}: ${o.ok ? "done" : "failed"}, ${o.ms} ms`,
            o.downloads_refused ? ` (${o.downloads_refused} download(s) refused)` : ""))))
      : null,
    env.screenshot
      ? field("Screenshot", `${env.screenshot.type} ${env.screenshot.width}×${env.screenshot.height}, ${bytes(env.screenshot.bytes)}`)
      : null,
    env.page_type ? field("Page type", env.page_type) : null,
    Object.keys(env.metadata || {}).length
      ? field("Metadata", h("dl", { class: "metadata" },
          ...Object.entries(env.metadata).flatMap(([k, v]) =>
            [h("dt", {}, k), h("dd", {}, Array.isArray(v) ? v.join(", ") : String(v))])))
      : null,
    field("Digest", h("code", {}, env.digest)),
    field("Fetched", when(env.fetched_at)),
    field(
      "Warnings",
      warnings.length === 0
        ? "none"
        : h("ul", { class: "warnings" },
            warnings.map((w) => h("li", {}, h("code", {}, w), ": ", WARNINGS[w] || (w.startsWith("browser_used:") ? "auto used the browser: the text needs JavaScript (docs/browser.md)" : "see docs/fetching.md")))),
    ),
  );
}

export class ContentView {
  // more(env) → the next envelope (same options, offset = next_offset, digest = digest).
  constructor(container, { more, idPrefix }) {
    this.container = container;
    this.more = more;
    this.id = idPrefix;
    this.slices = []; // [{text, html | null, error | null}], one per slice read
    this.env = null;
  }

  get text() {
    return this.slices.map((s) => s.text).join("");
  }

  async show(env) {
    this.slices = [{ text: env.content, html: null, error: null }];
    this.env = env;
    // The picture comes with the first slice only; reading on keeps it.
    this.shot = null;
    if (env.screenshot) {
      try {
        this.shot = { src: await screenshotSrc(env.screenshot), error: null };
      } catch (err) {
        this.shot = { src: null, error: err };
      }
    }
    await this.draw();
  }

  shotPane() {
    if (!this.shot) return null;
    const body = this.shot.src
      ? h("img", { id: `${this.id}-shot`, class: "shot", src: this.shot.src, alt: `Screenshot of ${this.env.final_url}` })
      : h("div", { class: "error", role: "alert" });
    if (!this.shot.src) showError(body, this.shot.error);
    return h("div", { class: "pane" }, h("h3", {}, "Screenshot"), body);
  }

  async readOn() {
    const next = await this.more(this.env);
    this.slices.push({ text: next.content, html: null, error: null });
    this.env = next;
    await this.draw();
  }

  // Each slice is rendered once, on its own: slices end at paragraph or line boundaries,
  // and the server's render stays bounded by one slice (the class's output cap).
  async renderSlices() {
    for (const slice of this.slices) {
      if (slice.html !== null || slice.error !== null) continue;
      try {
        const out = await api("POST", "/console/render", {
          body: { markdown: slice.text, base_url: this.env.final_url },
        });
        slice.html = out.html;
      } catch (err) {
        slice.error = err;
      }
    }
  }

  async draw() {
    const env = this.env;
    const id = this.id;
    const shown = env.next_offset ?? env.total_bytes;
    // A screenshot's text is the page's markdown.
    const markdown = env.format === "markdown" || env.format === "screenshot";
    const rendered = markdown ? h("div", { class: "rendered", id: `${id}-rendered`, tabindex: "0", role: "region", "aria-label": "Rendered markdown" }) : null;
    const moreError = h("div", { class: "error", role: "alert", hidden: true });
    const button = env.truncated && this.more
      ? h("button", { type: "button", id: `${id}-more`, onclick: async (ev) => {
          ev.target.disabled = true;
          try {
            await this.readOn();
            const again = $(`${id}-more`);
            if (again) again.focus();
          } catch (err) {
            showError(moreError, err);
            ev.target.disabled = false;
          }
        } }, "Read on")
      : null;
    if (markdown) await this.renderSlices();
    replace(
      this.container,
      h("div", { class: "card" }, fieldsOf(env, shown)),
      h("div", { class: "row" },
        h("span", { id: `${id}-shown`, "aria-live": "polite" },
          `Showing ${bytes(shown)} of ${bytes(env.total_bytes)}`),
        button),
      moreError,
      this.shot
        ? h("div", { class: "panes two" }, this.shotPane(),
            h("div", { class: "pane" }, h("h3", {}, "Rendered"), rendered))
        : null,
      h("div", { class: markdown && !this.shot ? "panes two" : "panes" },
        markdown && !this.shot ? h("div", { class: "pane" }, h("h3", {}, "Rendered"), rendered) : null,
        h("div", { class: "pane" }, h("h3", {}, markdown ? "Markdown" : "Content"),
          h("pre", { class: "raw", id: `${id}-raw`, tabindex: "0", "aria-label": "Raw content" }, this.text))),
    );
    if (markdown) {
      for (const slice of this.slices) {
        const part = h("div", { class: "slice" });
        if (slice.html !== null) setSanitisedHTML(part, slice.html);
        else showError(part, slice.error);
        if (slice.error) part.className = "error";
        rendered.append(part);
      }
    }
  }
}
