// The memory list: the owner's search (GET /me/core-memories?q=: by meaning, best match first),
// server-side filters and cursor pages, create. Search and filters live in the URL (#/memories?q=…&status=…).

import { createDialog } from "./create.js";
import { field, h, mount, select } from "./dom.js";
import { t, tn, when } from "./i18n.js";
import { CATEGORIES, WORKSPACES, keyText, memoryLink, options, scopeText } from "./parts.js";

const FILTERS = {
  scope_type: ["global", "workspace"],
  workspace_type: WORKSPACES,
  status: ["active", "suppressed"],
  category: CATEGORIES,
};
const LABELS = { scope_type: "scope", workspace_type: "workspace", status: "status", category: "category" };

/** The loaded pages of the list the URL names (reloaded when the URL names another). */
function listState(ctx) {
  const key = JSON.stringify(ctx.route.query);
  if (ctx.lists.memories?.key !== key) {
    ctx.lists.memories = { key, items: [], next: null, loaded: false };
  }
  return ctx.lists.memories;
}

async function loadPage(ctx, state, more) {
  const { data } = await ctx.api.listMemories(ctx.route.query, more ? state.next : null);
  state.items = more ? [...state.items, ...data.items] : data.items;
  state.next = data.next_cursor;
  state.loaded = true;
}

/** Fresh data for as many rows as are shown: a change elsewhere must not take back "Load more". */
async function reloadShown(ctx, state) {
  const shown = state.items.length;
  const fresh = { items: [], next: null };
  await loadPage(ctx, fresh, false);
  while (fresh.next && fresh.items.length < shown) await loadPage(ctx, fresh, true);
  state.items = fresh.items;
  state.next = fresh.next;
  state.loaded = true;
}

export async function renderMemories(ctx, main) {
  const state = listState(ctx);
  if (!state.loaded) {
    try {
      await reloadShown(ctx, state);
    } catch (error) {
      ctx.fail(error);
    }
  }
  const { q = "", ...filters } = ctx.route.query;
  const shown = state.items;

  ctx.refresher = async () => {
    const before = JSON.stringify(state.items);
    try {
      await reloadShown(ctx, state);
    } catch {
      return; // the feed only hints; a failed refresh leaves the page as it was
    }
    if (JSON.stringify(state.items) !== before) await ctx.redraw();
  };

  mount(main,
    h(
      "div",
      { class: "title-row" },
      h("h2", {}, t("memories.heading")),
      h(
        "button",
        { type: "button", "data-focus-key": "new-memory", onClick: () => createDialog(ctx) },
        t("memories.new"),
      ),
    ),
    searchForm(ctx, q, filters),
    filterForm(ctx, q, filters),
    h("p", { class: "count", id: "memory-count" }, countText(q, shown.length)),
    shown.length ? table(ctx, shown) : emptyState(q, filters),
    more(ctx, state),
  );
}

function countText(q, loaded) {
  return q ? tn("memories.found", loaded, { q }) : t("memories.count", { loaded });
}

/** Three different nothings: an empty account, no match for the search, no match for filters. */
function emptyState(q, filters) {
  if (q) return h("p", { class: "empty", id: "memories-empty" }, t("memories.empty_search", { q }));
  if (Object.keys(filters).length) {
    return h("p", { class: "empty", id: "memories-empty" }, t("memories.empty_filtered"));
  }
  return h(
    "div",
    { class: "empty card", id: "memories-empty" },
    h("p", {}, t("memories.empty_account")),
    h("p", { class: "hint" }, t("memories.empty_account_hint")),
  );
}

function searchForm(ctx, q, filters) {
  const input = h("input", {
    type: "search",
    name: "q",
    value: q,
    maxlength: 500,
    autocomplete: "off",
    "data-focus-key": "search",
  });
  return h(
    "form",
    {
      role: "search",
      class: "search",
      onSubmit: async (event) => {
        event.preventDefault();
        const text = input.value.trim();
        await ctx.go("memories", { query: { ...filters, q: text }, focus: "search" });
        ctx.announce(document.getElementById("memory-count")?.textContent || "");
      },
    },
    h(
      "div",
      { class: "row" },
      field(t("search.label"), input, t("search.hint")),
      h("button", { type: "submit", "data-focus-key": "search-submit" }, t("search.submit")),
      q
        ? h(
            "button",
            {
              type: "button",
              class: "secondary",
              "data-focus-key": "search-clear",
              onClick: () => ctx.go("memories", { query: filters, focus: "search" }),
            },
            t("search.clear"),
          )
        : null,
    ),
  );
}

function filterForm(ctx, q, filters) {
  const controls = Object.entries(FILTERS).map(([name, values]) =>
    field(t(`filter.${name}`), select(options(LABELS[name], values, "filter.any"), filters[name] || "", { name })),
  );
  return h(
    "form",
    {
      class: "filters card",
      "aria-labelledby": "filters-heading",
      onSubmit: async (event) => {
        event.preventDefault();
        const data = new FormData(event.target);
        const chosen = Object.fromEntries(Object.keys(FILTERS).map((n) => [n, data.get(n) || ""]));
        await ctx.go("memories", { query: { ...chosen, q }, focus: "apply-filters" });
        ctx.announce(document.getElementById("memory-count")?.textContent || "");
      },
    },
    h(
      "fieldset",
      {},
      h("legend", { id: "filters-heading" }, t("filter.heading")),
      h(
        "div",
        { class: "row" },
        controls,
        h("button", { type: "submit", "data-focus-key": "apply-filters" }, t("filter.apply")),
      ),
    ),
  );
}

const COLUMNS = ["key", "content", "category", "scope", "status", "revision", "updated", "actions"];

function table(ctx, items) {
  return h(
    "table",
    { class: "memories" },
    h("caption", { class: "sr-only" }, t("memories.caption")),
    h("thead", {}, h("tr", {}, COLUMNS.map((c) => h("th", { scope: "col" }, t(`memories.column.${c}`))))),
    h("tbody", {}, items.map((m) => row(m))),
  );
}

function row(m) {
  const label = (c) => t(`memories.column.${c}`);
  return h(
    "tr",
    { class: m.status === "suppressed" ? "suppressed" : "" },
    h("th", { scope: "row", class: "key-cell" }, h("span", { class: "key" }, keyText(m.memory_key))),
    h("td", { class: "content", "data-label": label("content") }, m.content),
    h("td", { class: "short", "data-label": label("category") }, t(`category.${m.category}`)),
    h("td", { class: "short", "data-label": label("scope") }, scopeText(m.scope_type, m.workspace_type)),
    h(
      "td",
      { class: "short", "data-label": label("status") },
      h("span", { class: `badge ${m.status}` }, t(`status.${m.status}`)),
    ),
    h("td", { class: "short", "data-label": label("revision") }, String(m.revision)),
    h("td", { class: "short", "data-label": label("updated") }, when(m.updated_at)),
    h(
      "td",
      { class: "short row-actions" },
      memoryLink(m.memory_id, t("memories.open"), {
        class: "button secondary",
        "data-focus-key": `open-${m.memory_id}`,
        "aria-label": t("memories.open_named", { key: m.memory_key }),
      }),
    ),
  );
}

function more(ctx, state) {
  if (!state.next) {
    return h("p", { class: "hint" }, state.items.length ? t("memories.all_loaded") : "");
  }
  return h(
    "button",
    {
      type: "button",
      class: "secondary",
      "data-focus-key": "load-more",
      onClick: async () => {
        const before = state.items.length;
        try {
          await loadPage(ctx, state, true);
        } catch (error) {
          ctx.fail(error);
          return;
        }
        await ctx.redraw(`open-${state.items[before]?.memory_id}`);
        ctx.announce(tn("memories.loaded_more", state.items.length - before));
      },
    },
    t("memories.load_more"),
  );
}
