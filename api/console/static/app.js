// The console's shell: sign-in, navigation, language, the live regions, error display.

import { Api, ApiError, tokenSubject } from "./api.js";
import { renderCandidates } from "./candidates.js";
import { renderDetail } from "./detail.js";
import { renderHistory } from "./history.js";
import { field, focusKey, h, mount, select } from "./dom.js";
import { LANGUAGES, language, setLanguage, t } from "./i18n.js";
import { renderMemories } from "./memories.js";
import { invalidateMemories } from "./parts.js";
import { parseRoute, routeHash } from "./route.js";
import { renderSettings } from "./settings.js";

const TOKEN_KEY = "memledger.console.token";
const NAV = ["memories", "candidates", "settings"];
const VIEWS = {
  memories: renderMemories,
  memory: renderDetail,
  history: renderHistory,
  candidates: renderCandidates,
  settings: renderSettings,
};

const ctx = {
  api: null,
  features: { changes: false }, // optional endpoints this server has
  route: parseRoute(""),
  view: "memories",
  memoryId: null, // the memory open in the memory or history view
  lastOpened: null, // the memory the list should focus when the user comes back to it
  lists: {}, // per-view state kept across navigation (loaded pages, the candidates' status)
  refresher: null, // the shown view's way to redraw after a change elsewhere (the change feed)
  feed: null, // AbortController of the change-feed stream
  rendered: null, // the hash the page shows
  listHash: "#/memories", // the list as last shown (its search and filters), for "Back to memories"

  /** Say `message` politely to screen readers (and show nothing else). */
  announce(message) {
    const status = document.getElementById("status");
    status.textContent = "";
    window.setTimeout(() => {
      status.textContent = message;
    }, 30);
  },

  /** Show an API (or other) error in the alert region: the API's `detail`, plus field errors. */
  fail(error, container) {
    const message = errorText(error);
    if (error instanceof ApiError && error.status === 401 && ctx.api) {
      signOut(t("signin.expired", { detail: message }));
      return;
    }
    const target = container || document.getElementById("alert");
    mount(target,
      h("strong", {}, t("error.title")),
      message,
      fieldErrors(error),
    );
    target.hidden = false;
  },

  clear(container) {
    const target = container || document.getElementById("alert");
    target.replaceChildren();
    target.hidden = true;
  },

  /**
   * Show a screen and put focus on its heading (or on `focus`). A new screen gets its own history
   * entry (its URL); `replace` rewrites the current one instead (a redraw, a changed filter).
   */
  async go(view, { memoryId = null, query = {}, focus = null, replace = false } = {}) {
    const hash = routeHash({ view, memoryId, query });
    if (hash !== window.location.hash) {
      if (replace) history.replaceState(null, "", hash);
      else history.pushState(null, "", hash);
    }
    await show(parseRoute(hash), focus);
  },

  /**
   * Draw the shown screen again with fresh data, focus on `focus` or where it was. A redraw the
   * user did not ask for (the change feed) waits while they type or a dialog is open.
   */
  async redraw(focus = null) {
    const active = document.activeElement;
    if (!focus) {
      if (document.querySelector("dialog[open]")) return;
      if (active && active.closest("main") && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) return;
    }
    await show(ctx.route, focus, { redraw: true });
  },
};

/**
 * Render the screen of `route` (already in the address bar). Each screen draws into its own
 * element, swapped in when it is ready: a slower screen the user already left (Back, Back)
 * finishes into nothing instead of over the screen they went to.
 */
async function show(route, focus, { redraw = false } = {}) {
  const seq = (ctx.seq = (ctx.seq || 0) + 1);
  ctx.route = route;
  ctx.view = route.view;
  ctx.memoryId = route.memoryId;
  ctx.refresher = null;
  ctx.rendered = window.location.hash;
  if (route.memoryId) ctx.lastOpened = route.memoryId;
  if (route.view === "memories") ctx.listHash = window.location.hash;
  if (!redraw) ctx.clear();
  ctx.redrawing = redraw;
  renderBanner();
  const screen = h("div", { class: "screen" });
  await VIEWS[route.view](ctx, screen);
  if (seq !== ctx.seq) return;
  // A redraw keeps the focus where it is when the new screen is swapped in: the user (or the
  // action that asked for it) may have moved it while the screen's data was on its way.
  if (redraw && !focus) focus = document.activeElement?.getAttribute("data-focus-key");
  document.getElementById("main").replaceChildren(screen);
  const back = route.view === "memories" && ctx.lastOpened ? `open-${ctx.lastOpened}` : null;
  if (!focusKey(focus) && !(redraw && !focus) && !focusKey(back)) {
    const heading = screen.querySelector("h2");
    if (heading) {
      heading.tabIndex = -1;
      heading.focus();
    }
  }
}

/** Back/Forward, an edited address or a link: show what the URL names. */
window.addEventListener("hashchange", () => {
  if (!ctx.api || window.location.hash === ctx.rendered) return;
  show(parseRoute(window.location.hash), null);
});

/** The change feed: redraw the shown screen (it keeps the user's focus and any open edit). */
function followChanges() {
  ctx.feed?.abort();
  if (!ctx.features.changes) return;
  ctx.feed = new AbortController();
  let timer = null;
  ctx.api.followChanges(() => {
    invalidateMemories(ctx);
    if (ctx.lists.candidates) ctx.lists.candidates.stale = true;
    window.clearTimeout(timer);
    timer = window.setTimeout(() => ctx.refresher?.(), 250);
  }, ctx.feed.signal);
}

function errorText(error) {
  if (error instanceof ApiError) {
    if (error.status === 0) return t("error.network");
    const prefix = t("error.status", { status: error.status });
    return error.reason
      ? t("error.with_reason", { status: prefix, reason: error.reason, detail: error.detail })
      : t("error.plain", { status: prefix, detail: error.detail });
  }
  return String(error?.message || error);
}

function fieldErrors(error) {
  const errors = error instanceof ApiError && Array.isArray(error.body.errors) ? error.body.errors : [];
  if (errors.length === 0) return null;
  return h(
    "ul",
    { class: "field-errors" },
    errors.map((e) => h("li", {}, t("label.colon", { label: e.field || t("error.body") }), e.message)),
  );
}

function languageSwitch() {
  const control = select(LANGUAGES, language(), {
    "data-focus-key": "language",
    onChange: async (event) => {
      await setLanguage(event.target.value);
      document.getElementById("skip-link").textContent = t("nav.skip");
      if (ctx.api) await show(ctx.route, "language");
      else renderSignIn();
      focusKey("language");
      ctx.announce(t("language.changed"));
    },
  });
  return h("div", { class: "language" }, field(t("language.label"), control));
}

function renderBanner() {
  const banner = document.getElementById("banner");
  const title = h("p", { class: "brand" }, t("app.title"));
  if (!ctx.api) {
    banner.replaceChildren(title, languageSwitch());
    return;
  }
  const active = NAV.includes(ctx.view) ? ctx.view : "memories";
  const nav = h(
    "nav",
    { "aria-label": t("nav.label") },
    h(
      "ul",
      {},
      NAV.map((name) =>
        h(
          "li",
          {},
          h(
            "a",
            {
              class: "nav-link",
              href: routeHash({ view: name }),
              "data-focus-key": `nav-${name}`,
              "aria-current": name === active ? "page" : false,
            },
            t(`nav.${name}`),
          ),
        ),
      ),
    ),
  );
  const who = tokenSubject(ctx.api.token);
  const account = h(
    "div",
    { class: "account" },
    who ? h("span", { class: "who" }, t("account.signed_in_as", { user: who })) : null,
    h(
      "button",
      { type: "button", class: "secondary", onClick: () => {
          history.replaceState(null, "", window.location.pathname);
          signOut(t("signin.signed_out"));
        },
      },
      t("account.sign_out"),
    ),
  );
  banner.replaceChildren(title, nav, languageSwitch(), account);
}

function renderSignIn(message) {
  ctx.api = null;
  renderBanner();
  const main = document.getElementById("main");
  const error = h("div", { class: "alert", role: "alert", hidden: true });
  const token = h("textarea", {
    name: "token",
    rows: 4,
    required: true,
    autocomplete: "off",
    spellcheck: "false",
    "data-focus-key": "token",
  });
  const form = h(
    "form",
    {
      class: "card signin",
      onSubmit: async (event) => {
        event.preventDefault();
        ctx.clear(error);
        const ok = await signIn(token.value.trim(), error);
        if (!ok) token.focus();
      },
    },
    field(t("signin.token"), token, t("signin.token_hint")),
    h("button", { type: "submit" }, t("signin.submit")),
  );
  mount(main,
    h("h1", { tabindex: "-1" }, t("signin.title")),
    h("p", {}, t("signin.intro")),
    message ? h("p", { class: "notice", role: "status" }, message) : null,
    error,
    form,
  );
}

/** Check the token against the API (a read of the settings), keep it for this tab, open the list. */
async function signIn(token, errorContainer) {
  if (!token) {
    ctx.fail(new Error(t("signin.empty")), errorContainer);
    return false;
  }
  try {
    await new Api(token).settings();
  } catch (error) {
    ctx.fail(error instanceof ApiError && error.status === 401 ? new Error(t("signin.rejected", { detail: error.detail })) : error, errorContainer);
    return false;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  ctx.api = new Api(token);
  ctx.lists = {};
  ctx.features = await ctx.api.features();
  followChanges();
  // The screen the address names (a deep link, a reload), else the list.
  const route = parseRoute(window.location.hash);
  history.replaceState(null, "", routeHash(route));
  await show(route, null);
  ctx.announce(t("signin.done"));
  return true;
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  ctx.feed?.abort();
  ctx.feed = null;
  ctx.lists = {};
  ctx.clear();
  renderSignIn(message);
  focusKey("token");
}

async function start() {
  await setLanguage();
  document.getElementById("skip-link").textContent = t("nav.skip");
  // A link from `memledger serve --dev` carries the token in the fragment: take it, then drop it
  // from the address bar and history so it is not copied or bookmarked along with the page.
  const fragment = new URLSearchParams(window.location.hash.slice(1));
  const linked = fragment.get("token");
  if (linked) history.replaceState(null, "", `${window.location.pathname}${window.location.search}#/memories`);
  const token = linked || sessionStorage.getItem(TOKEN_KEY);
  if (token) {
    renderSignIn();
    const error = document.querySelector("main .alert");
    if (await signIn(token, error)) return;
    sessionStorage.removeItem(TOKEN_KEY);
    return;
  }
  renderSignIn();
}

start();
