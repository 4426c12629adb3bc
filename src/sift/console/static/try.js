// "Try a URL": one POST /v1/fetch, its envelope and content, and read on.

import { api } from "./api.js";
import { $, showError } from "./dom.js";
import { ContentView } from "./envelope.js";

function optionsFromForm() {
  const opts = {
    url: $("try-url").value.trim(),
    format: $("try-format").value,
    main_content: $("try-main").checked,
  };
  const engine = $("try-engine").value;
  if (engine !== "auto") opts.engine = engine;
  if (opts.format === "screenshot" && $("try-full").checked) opts.screenshot = { full_page: true };
  const max = $("try-max").value.trim();
  if (max) opts.max_bytes = Number(max);
  if ($("try-fresh").checked) opts.max_age_s = 0;
  const actions = $("try-actions").value.trim();
  if (actions) {
    // Sent as typed: the server checks every step and names the one that is wrong.
    try {
      opts.actions = JSON.parse(actions);
    } catch (err) {
      throw new Error(`Page actions are not valid JSON: ${err.message}`);
    }
  }
  return opts;
}

export function setupTry() {
  const form = $("try-form");
  const result = $("try-result");
  const error = $("try-error");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showError(error, null);
    let opts;
    try {
      opts = optionsFromForm();
    } catch (err) {
      showError(error, err);
      return;
    }
    result.hidden = true;
    $("try-go").disabled = true;
    $("try-busy").textContent = "Fetching…";
    try {
      const env = await api("POST", "/v1/fetch", { body: opts });
      const view = new ContentView(result, {
        idPrefix: "try",
        // The same options, from the same stored snapshot: offsets never shift.
        more: (prev) => api("POST", "/v1/fetch", {
          body: { ...opts, max_age_s: undefined, offset: prev.next_offset, digest: prev.digest },
        }),
      });
      await view.show(env);
      result.hidden = false;
    } catch (err) {
      showError(error, err);
    } finally {
      $("try-go").disabled = false;
      $("try-busy").textContent = "";
    }
  });
}
