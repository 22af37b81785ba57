// The console's shell: sign-in, navigation, language, the live regions, error display.

import { Api, ApiError, tokenSubject } from "./api.js";
import { renderCandidates } from "./candidates.js";
import { renderDetail } from "./detail.js";
import { field, focusKey, h, mount, select } from "./dom.js";
import { LANGUAGES, language, setLanguage, t } from "./i18n.js";
import { renderMemories } from "./memories.js";
import { renderSettings } from "./settings.js";

const TOKEN_KEY = "memledger.console.token";
const VIEWS = [
  ["memories", renderMemories],
  ["candidates", renderCandidates],
  ["settings", renderSettings],
];

const ctx = {
  api: null,
  view: "memories",
  memoryId: null, // the memory open in the detail view
  lists: {}, // per-view state kept across navigation (filters, loaded pages)

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
      " ",
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

  /** Show a view (or the detail of one memory) and put focus on its heading or `focus`. */
  async go(view, { memoryId = null, focus = null } = {}) {
    ctx.view = view;
    ctx.memoryId = memoryId;
    ctx.clear();
    renderBanner();
    const main = document.getElementById("main");
    const render = view === "detail" ? renderDetail : VIEWS.find(([name]) => name === view)[1];
    await render(ctx, main);
    if (!focusKey(focus)) {
      const heading = main.querySelector("h2");
      if (heading) {
        heading.tabIndex = -1;
        heading.focus();
      }
    }
  },
};

function errorText(error) {
  if (error instanceof ApiError) {
    if (error.status === 0) return t("error.network");
    const prefix = t("error.status", { status: error.status });
    return error.reason ? `${prefix} (${error.reason}): ${error.detail}` : `${prefix}: ${error.detail}`;
  }
  return String(error?.message || error);
}

function fieldErrors(error) {
  const errors = error instanceof ApiError && Array.isArray(error.body.errors) ? error.body.errors : [];
  if (errors.length === 0) return null;
  return h(
    "ul",
    { class: "field-errors" },
    errors.map((e) => h("li", {}, `${e.field || t("error.body")}: ${e.message}`)),
  );
}

function languageSwitch() {
  const control = select(LANGUAGES, language(), {
    "data-focus-key": "language",
    onChange: async (event) => {
      await setLanguage(event.target.value);
      document.getElementById("skip-link").textContent = t("nav.skip");
      if (ctx.api) await ctx.go(ctx.view, { memoryId: ctx.memoryId, focus: "language" });
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
  const active = ctx.view === "detail" ? "memories" : ctx.view;
  const nav = h(
    "nav",
    { "aria-label": t("nav.label") },
    h(
      "ul",
      {},
      VIEWS.map(([name]) =>
        h(
          "li",
          {},
          h(
            "button",
            {
              type: "button",
              class: "nav-button",
              "data-focus-key": `nav-${name}`,
              "aria-current": name === active ? "page" : false,
              onClick: () => ctx.go(name),
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
      { type: "button", class: "secondary", onClick: () => signOut(t("signin.signed_out")) },
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
  await ctx.go("memories");
  ctx.announce(t("signin.done"));
  return true;
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
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
  if (linked) history.replaceState(null, "", window.location.pathname + window.location.search);
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
