// The memory list: server-side filters and cursor pages, a search over the loaded pages, create.

import { createDialog } from "./create.js";
import { field, h, mount, select } from "./dom.js";
import { t, when } from "./i18n.js";
import { CATEGORIES, WORKSPACES, options, scopeText } from "./parts.js";

const FILTERS = {
  scope_type: ["global", "workspace"],
  workspace_type: WORKSPACES,
  status: ["active", "suppressed"],
  category: CATEGORIES,
};
const LABELS = { scope_type: "scope", workspace_type: "workspace", status: "status", category: "category" };

function listState(ctx) {
  ctx.lists.memories ||= {
    filters: { scope_type: "", workspace_type: "", status: "", category: "" },
    search: "",
    items: [],
    next: null,
    loaded: false,
  };
  return ctx.lists.memories;
}

async function loadPage(ctx, state, more) {
  const { data } = await ctx.api.listMemories(state.filters, more ? state.next : null);
  state.items = more ? [...state.items, ...data.items] : data.items;
  state.next = data.next_cursor;
  state.loaded = true;
}

function matches(memory, query) {
  if (!query) return true;
  const needle = query.toLocaleLowerCase();
  return [memory.memory_key, memory.content, memory.category]
    .some((text) => text.toLocaleLowerCase().includes(needle));
}

export async function renderMemories(ctx, main) {
  const state = listState(ctx);
  if (!state.loaded) {
    try {
      await loadPage(ctx, state, false);
    } catch (error) {
      ctx.fail(error);
    }
  }
  const count = h("p", { class: "count", id: "memory-count" });
  const body = h("tbody");
  const table = h(
    "table",
    { class: "memories" },
    h("caption", { class: "sr-only" }, t("memories.caption")),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["key", "content", "category", "scope", "status", "revision", "updated", "actions"].map((c) =>
          h("th", { scope: "col" }, t(`memories.column.${c}`)),
        ),
      ),
    ),
    body,
  );
  const empty = h("p", { class: "empty" }, t("memories.empty"));

  function fill() {
    const shown = state.items.filter((m) => matches(m, state.search));
    body.replaceChildren(...shown.map((m) => row(ctx, m)));
    table.hidden = shown.length === 0;
    empty.hidden = shown.length > 0;
    count.textContent = state.search
      ? t("memories.count_search", { shown: shown.length, loaded: state.items.length })
      : t("memories.count", { loaded: state.items.length });
    return shown.length;
  }

  const filterControls = Object.entries(FILTERS).map(([name, values]) => {
    const control = select(options(LABELS[name], values, "filter.any"), state.filters[name], {
      name,
    });
    return field(t(`filter.${name}`), control);
  });
  const filters = h(
    "form",
    {
      class: "filters card",
      "aria-labelledby": "filters-heading",
      onSubmit: async (event) => {
        event.preventDefault();
        const data = new FormData(event.target);
        for (const name of Object.keys(FILTERS)) state.filters[name] = data.get(name) || "";
        try {
          await loadPage(ctx, state, false);
          ctx.clear();
        } catch (error) {
          ctx.fail(error);
        }
        ctx.announce(t("memories.count", { loaded: fill() }));
      },
    },
    h(
      "fieldset",
      {},
      h("legend", { id: "filters-heading" }, t("filter.heading")),
      h(
        "div",
        { class: "row" },
        filterControls,
        h("button", { type: "submit", "data-focus-key": "apply-filters" }, t("filter.apply")),
      ),
    ),
  );

  let announceTimer = null;
  const search = h("input", {
    type: "search",
    name: "q",
    value: state.search,
    autocomplete: "off",
    "data-focus-key": "search",
    "aria-controls": "memory-count",
    onInput: (event) => {
      state.search = event.target.value.trim();
      const shown = fill();
      window.clearTimeout(announceTimer);
      announceTimer = window.setTimeout(
        () => ctx.announce(t("memories.count_search", { shown, loaded: state.items.length })),
        400,
      );
    },
  });
  const searchBox = h(
    "div",
    { role: "search", class: "search" },
    field(t("search.label"), search, t("search.hint")),
  );

  const more = state.next
    ? h(
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
            await ctx.go("memories", { focus: `open-${state.items[before]?.memory_id}` });
            ctx.announce(t("memories.loaded_more", { count: state.items.length - before }));
          },
        },
        t("memories.load_more"),
      )
    : h("p", { class: "hint" }, state.items.length ? t("memories.all_loaded") : "");

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
    filters,
    searchBox,
    count,
    table,
    empty,
    more,
  );
  fill();
}

function row(ctx, m) {
  const open = () => ctx.go("detail", { memoryId: m.memory_id });
  return h(
    "tr",
    { class: m.status === "suppressed" ? "suppressed" : "" },
    h("th", { scope: "row" }, h("span", { class: "key" }, m.memory_key)),
    h("td", { class: "content" }, m.content),
    h("td", {}, t(`category.${m.category}`)),
    h("td", {}, scopeText(m.scope_type, m.workspace_type)),
    h("td", {}, h("span", { class: `badge ${m.status}` }, t(`status.${m.status}`))),
    h("td", {}, String(m.revision)),
    h("td", { class: "nowrap" }, when(m.updated_at)),
    h(
      "td",
      {},
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          "data-focus-key": `open-${m.memory_id}`,
          "aria-label": t("memories.open_named", { key: m.memory_key }),
          onClick: open,
        },
        t("memories.open"),
      ),
    ),
  );
}
