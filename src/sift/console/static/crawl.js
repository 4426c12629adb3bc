// "Crawl & map": start a crawl (POST /v1/crawl, then the job's page) or map a site
// (POST /v1/map, the URLs listed here). Empty fields are left out, so the API's defaults
// apply; the API checks every value and its 422 lists each problem.

import { api } from "./api.js";
import { $, h, num, replace, showError } from "./dom.js";
import { newIdemKey } from "./jobs.js";

function lines(id) {
  return $(id).value.split("\n").map((s) => s.trim()).filter(Boolean);
}

// The number typed in an input, or undefined (left out of the body) when it is empty.
function number(id) {
  const text = $(id).value.trim();
  return text === "" ? undefined : Number(text);
}

// The fields a crawl and a map share, read from the form whose ids start with `prefix`.
function common(prefix) {
  return {
    url: $(`${prefix}-url`).value.trim(),
    scope: $(`${prefix}-scope`).value,
    include: lines(`${prefix}-include`),
    exclude: lines(`${prefix}-exclude`),
    sitemap: $(`${prefix}-sitemap`).checked,
  };
}

export function crawlBody() {
  return {
    ...common("crawl"),
    max_pages: number("crawl-max-pages"),
    max_depth: number("crawl-max-depth"),
    options: { format: $("crawl-format").value },
  };
}

function mapSummary(answer) {
  const parts = [`${num(answer.count)} URL${answer.count === 1 ? "" : "s"}`];
  if (answer.truncated) parts.push("more were found than the limit lets through");
  if (!answer.complete) parts.push("discovery stopped at the time limit, so some may be missing");
  if (!answer.truncated && answer.complete) parts.push("every URL found");
  return `${parts.join("; ")}.`;
}

function drawMap(answer, router) {
  const result = $("map-result");
  replace(
    result,
    h("div", { class: "card" },
      h("h2", { id: "map-result-h" }, "Map of ", h("span", { class: "url" }, answer.url)),
      h("p", { id: "map-summary" }, mapSummary(answer)),
      h("ol", { class: "urls", id: "map-urls", "aria-labelledby": "map-result-h" },
        answer.urls.map((u) => h("li", { class: "url" }, u))),
      h("div", { class: "row" },
        h("button", { type: "button", class: "secondary", id: "map-to-batch",
          disabled: answer.urls.length === 0,
          onclick: () => {
            $("job-urls").value = answer.urls.join("\n");
            router.go("#/jobs");
          } }, "Fetch these as a batch job"))),
  );
  result.hidden = false;
}

export function setupCrawl(router) {
  $("crawl-idem").value = newIdemKey();
  $("crawl-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const error = $("crawl-error");
    showError(error, null);
    $("crawl-go").disabled = true;
    try {
      const job = await api("POST", "/v1/crawl", {
        body: crawlBody(),
        headers: { "Idempotency-Key": $("crawl-idem").value.trim() },
      });
      $("crawl-idem").value = newIdemKey();
      router.go(`#/jobs/${job.id}`);
    } catch (err) {
      showError(error, err);
    } finally {
      $("crawl-go").disabled = false;
    }
  });
  $("map-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const error = $("map-error");
    showError(error, null);
    $("map-result").hidden = true;
    $("map-go").disabled = true;
    $("map-busy").textContent = "Mapping…";
    try {
      const body = { ...common("map"), limit: number("map-limit") };
      drawMap(await api("POST", "/v1/map", { body }), router);
    } catch (err) {
      showError(error, err);
    } finally {
      $("map-go").disabled = false;
      $("map-busy").textContent = "";
    }
  });
}
