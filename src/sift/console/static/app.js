// The console: a hash router over eight pages, the sign-in state, and polling while a
// page shows something live. Every number and text comes from the public API.

import { api, session } from "./api.js";
import { CachePage } from "./cache.js";
import { setupCrawl } from "./crawl.js";
import { $, showError } from "./dom.js";
import { JobPage } from "./job.js";
import { drawJobs, setupJobs } from "./jobs.js";
import { setupTry } from "./try.js";
import { drawWatches, setupWatches, WatchPage } from "./watches.js";

const POLL_MS = 1000;
const CACHE_POLL_MS = 2000;
const WATCH_POLL_MS = 2000;
const PAGES = ["signin", "try", "jobs", "job", "crawl", "watches", "watch", "cache"];
const TITLES = {
  signin: "sign in", try: "try a URL", jobs: "jobs", job: "job", crawl: "crawl & map",
  watches: "watches", watch: "watch", cache: "cache & health",
};

const state = { identity: null, timer: null, generation: 0 };

function describe(identity) {
  if (identity.anonymous) return "anonymous · restricted";
  return `${identity.caller} · ${identity.class}`;
}

async function whoami(key) {
  return api("GET", "/console/whoami", { key });
}

function signedIn(identity) {
  state.identity = identity;
  $("who").textContent = describe(identity);
  $("signout").hidden = false;
}

function signOut() {
  session.clear();
  state.identity = null;
  $("who").textContent = "not signed in";
  $("signout").hidden = true;
  router.go("#/signin");
}

async function showSignin() {
  $("signin-key").value = "";
  $("signin-anon").hidden = true;
  try {
    const anon = await whoami("");
    $("signin-anon").hidden = !anon.anonymous_mode;
  } catch {
    // keys are configured: a key is needed
  }
}

function setupSignin() {
  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const key = $("signin-key").value.trim();
    try {
      const identity = await whoami(key);
      if (identity.anonymous && key) {
        throw { code: "unknown_key", message: "this key is not one of this sift's keys",
          hint: "Check the key; without one you are the anonymous restricted caller." };
      }
      session.set(key);
      $("signin-key").value = "";
      showError($("signin-error"), null);
      signedIn(identity);
      router.go("#/try");
    } catch (err) {
      showError($("signin-error"), err);
    }
  });
  $("signin-anon-go").addEventListener("click", async () => {
    session.clear();
    signedIn(await whoami(""));
    router.go("#/try");
  });
  $("signout").addEventListener("click", signOut);
}

function stopPolling() {
  state.generation += 1;
  clearTimeout(state.timer);
  state.timer = null;
}

// Run step() now and again every everyMs while it returns true and the page is unchanged.
function poll(step, errorBox, everyMs = POLL_MS) {
  const generation = state.generation;
  const tick = async () => {
    let again = false;
    try {
      again = await step();
      if (errorBox) showError(errorBox, null);
    } catch (err) {
      if (errorBox) showError(errorBox, err);
    }
    if (again && generation === state.generation) state.timer = setTimeout(tick, everyMs);
  };
  tick();
}

function parse(hash) {
  const [, page = "", arg = ""] = hash.split("/");
  if (page === "jobs" && arg) return ["job", decodeURIComponent(arg)];
  if (page === "watches" && arg) return ["watch", decodeURIComponent(arg)];
  return [PAGES.includes(page) ? page : "try", null];
}

const router = {
  go(hash) {
    if (location.hash === hash) this.render();
    else location.hash = hash;
  },

  async render() {
    stopPolling();
    let [page, arg] = parse(location.hash);
    if (!state.identity && page !== "signin") {
      try {
        signedIn(await whoami(session.key()));
      } catch {
        session.clear();
        page = "signin";
      }
    }
    for (const name of PAGES) $(`page-${name}`).hidden = name !== page;
    for (const link of document.querySelectorAll("[data-nav]")) {
      const current = link.dataset.nav === page || (page === "job" && link.dataset.nav === "jobs")
        || (page === "watch" && link.dataset.nav === "watches");
      if (current) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    document.title = `sift console — ${TITLES[page]}`;
    if (page === "signin") await showSignin();
    if (page === "jobs") poll(drawJobs, $("job-error"));
    if (page === "job") {
      $("job-view").replaceChildren();
      $("job-h").textContent = `Job ${arg}`;
      const view = new JobPage(arg);
      poll(() => view.refresh(), $("job-view-error"));
    }
    if (page === "watches") poll(drawWatches, $("watch-error"), WATCH_POLL_MS);
    if (page === "watch") {
      $("watch-view").replaceChildren();
      $("watch-h").textContent = `Watch ${arg}`;
      const view = new WatchPage(arg);
      poll(() => view.refresh(), $("watch-view-error"), WATCH_POLL_MS);
    }
    if (page === "cache") {
      const view = new CachePage(state.identity);
      poll(() => view.refresh(), $("cache-error"), CACHE_POLL_MS);
    }
  },
};

setupSignin();
setupTry();
setupJobs(router);
setupCrawl(router);
setupWatches(router);
window.addEventListener("hashchange", () => router.render());
router.render();
