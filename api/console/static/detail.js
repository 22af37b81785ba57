// One memory (#/memories/<id>): its fields, edit (with revision-conflict handling),
// suppress/restore; forget.js forgets, history.js is its version history (its own screen).

import { ApiError } from "./api.js";
import { field, h, mount, select } from "./dom.js";
import { confirmForget, renderTombstone } from "./forget.js";
import { t, when } from "./i18n.js";
import { backToList, CATEGORIES, invalidateMemories, keyText, options, scopeText } from "./parts.js";
import { routeHash } from "./route.js";

export async function renderDetail(ctx, main) {
  let memory;
  try {
    memory = (await ctx.api.getMemory(ctx.memoryId)).data;
  } catch (error) {
    if (error instanceof ApiError && error.reason === "forgotten") {
      renderTombstone(ctx, main, error);
      return;
    }
    mount(main, backToList(ctx), h("h2", {}, t("detail.unavailable")));
    ctx.fail(error);
    return;
  }
  const view = { memory, edit: null };
  draw(ctx, main, view);
  // A change elsewhere (the change feed): show the new state unless an edit is open.
  const refresher = async () => {
    if (view.edit) return;
    try {
      const fresh = (await ctx.api.getMemory(view.memory.memory_id)).data;
      if (JSON.stringify(fresh) === JSON.stringify(view.memory)) return;
    } catch {
      // forgotten elsewhere, or gone: the redraw shows what the server says now
    }
    // The page moved on while this asked (e.g. forgotten here: the tombstone has the focus).
    if (ctx.refresher !== refresher) return;
    await ctx.redraw();
  };
  ctx.refresher = refresher;
}

function draw(ctx, main, view) {
  const { memory } = view;
  const facts = [
    ["field.content", h("span", { class: "content" }, memory.content)],
    ["field.category", t(`category.${memory.category}`)],
    ["field.scope", scopeText(memory.scope_type, memory.workspace_type)],
    ["field.status", h("span", { class: `badge ${memory.status}` }, t(`status.${memory.status}`))],
    ["field.revision", String(memory.revision)],
    ["field.source", t(`source.${memory.source_type}`)],
    ["field.created_at", when(memory.created_at)],
    ["field.updated_at", when(memory.updated_at)],
    ["field.last_confirmed_at", when(memory.last_confirmed_at)],
    ["field.review_after", when(memory.review_after)],
    ["field.expires_at", when(memory.expires_at)],
    ["field.memory_id", h("code", {}, memory.memory_id)],
  ];
  const suppressed = memory.status === "suppressed";
  const actions = h(
    "div",
    { class: "actions" },
    h(
      "button",
      { type: "button", "data-focus-key": "edit", onClick: () => startEdit(ctx, main, view) },
      t("detail.edit"),
    ),
    h(
      "button",
      {
        type: "button",
        class: "secondary",
        "data-focus-key": "toggle-status",
        onClick: () => toggleStatus(ctx, main, view),
      },
      t(suppressed ? "detail.restore" : "detail.suppress"),
    ),
    h(
      "button",
      { type: "button", class: "danger", "data-focus-key": "forget", onClick: () => confirmForget(ctx, main, view) },
      t("detail.forget"),
    ),
  );
  mount(main,
    backToList(ctx),
    h("h2", { class: "key" }, keyText(memory.memory_key)),
    suppressed ? h("p", { class: "notice" }, t("detail.suppressed_note")) : null,
    h(
      "dl",
      { class: "facts card" },
      facts.map(([label, value]) => [h("dt", {}, t(label)), h("dd", {}, value)]),
    ),
    view.edit ? null : actions,
    view.edit ? editForm(ctx, main, view) : null,
    h(
      "p",
      {},
      h(
        "a",
        { href: routeHash({ view: "history", memoryId: memory.memory_id }), "data-focus-key": "history-link" },
        t("detail.history", { revision: memory.revision }),
      ),
    ),
  );
}

async function reload(ctx, main, view, focus) {
  try {
    view.memory = (await ctx.api.getMemory(view.memory.memory_id)).data;
  } catch (error) {
    ctx.fail(error);
  }
  draw(ctx, main, view);
  if (focus) main.querySelector(`[data-focus-key="${focus}"]`)?.focus();
}

function startEdit(ctx, main, view) {
  view.edit = {
    content: view.memory.content,
    category: view.memory.category,
    base: view.memory.revision,
    conflict: null,
  };
  draw(ctx, main, view);
  main.querySelector("#edit-content").focus();
}

function editForm(ctx, main, view) {
  const edit = view.edit;
  const content = h("textarea", {
    id: "edit-content",
    name: "content",
    rows: 4,
    required: true,
    maxlength: 4000,
    value: edit.content,
    onInput: (e) => (edit.content = e.target.value),
  });
  const category = select(options("category", CATEGORIES), edit.category, {
    name: "category",
    onChange: (e) => (edit.category = e.target.value),
  });
  const error = h("div", { class: "alert", role: "alert", hidden: true, id: "edit-error" });
  const form = h(
    "form",
    {
      class: "card stack",
      "aria-labelledby": "edit-heading",
      onSubmit: async (event) => {
        event.preventDefault();
        await save(ctx, main, view, error);
      },
    },
    h("h3", { id: "edit-heading" }, t("edit.heading", { revision: edit.base })),
    error,
    field(t("field.content"), content),
    field(t("field.category"), category),
    edit.conflict ? null : h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", "data-focus-key": "save" }, t("edit.save")),
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          onClick: () => {
            view.edit = null;
            draw(ctx, main, view);
            main.querySelector('[data-focus-key="edit"]').focus();
          },
        },
        t("action.cancel"),
      ),
    ),
  );
  return [form, edit.conflict ? conflictPanel(ctx, main, view) : null];
}

async function save(ctx, main, view, error) {
  const edit = view.edit;
  const body = { expected_revision: edit.base };
  if (edit.content !== view.memory.content || edit.conflict) body.content = edit.content;
  if (edit.category !== view.memory.category || edit.conflict) body.category = edit.category;
  try {
    view.memory = (await ctx.api.updateMemory(view.memory.memory_id, body)).data;
  } catch (failure) {
    if (failure instanceof ApiError && failure.reason === "revision_conflict") {
      await showConflict(ctx, main, view);
      return;
    }
    ctx.fail(failure, error);
    error.scrollIntoView({ block: "nearest" });
    return;
  }
  view.edit = null;
  invalidateMemories(ctx);
  await reload(ctx, main, view, "edit");
  ctx.announce(t("edit.saved", { revision: view.memory.revision }));
}

/** 409 revision_conflict: show what is there now and let the user reapply
 * the edit on top of it or discard it. */
async function showConflict(ctx, main, view) {
  const base = view.edit.base;
  try {
    view.memory = (await ctx.api.getMemory(view.memory.memory_id)).data;
  } catch (error) {
    ctx.fail(error);
    return;
  }
  view.edit.conflict = { base, current: view.memory };
  draw(ctx, main, view);
  main.querySelector("#conflict-heading").focus();
  ctx.announce(t("conflict.heading"));
}

function conflictPanel(ctx, main, view) {
  const { base, current } = view.edit.conflict;
  const mine = view.edit;
  const version = (label, content, category) =>
    h(
      "div",
      { class: "version-box" },
      h("h4", {}, label),
      h("p", { class: "content" }, content),
      h("p", { class: "hint" }, t(`category.${category}`)),
    );
  return h(
    "section",
    { class: "conflict card", "aria-labelledby": "conflict-heading" },
    h("h3", { id: "conflict-heading", tabindex: "-1" }, t("conflict.heading")),
    h("p", {}, t("conflict.explain", { base, current: current.revision })),
    h(
      "div",
      { class: "compare" },
      version(t("conflict.current", { revision: current.revision }), current.content, current.category),
      version(t("conflict.mine"), mine.content, mine.category),
    ),
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        {
          type: "button",
          "data-focus-key": "reapply",
          onClick: async () => {
            mine.base = current.revision;
            await save(ctx, main, view, document.getElementById("edit-error"));
          },
        },
        t("conflict.reapply"),
      ),
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          "data-focus-key": "discard",
          onClick: async () => {
            view.edit = null;
            await reload(ctx, main, view, "edit");
            ctx.announce(t("conflict.discarded", { revision: view.memory.revision }));
          },
        },
        t("conflict.discard"),
      ),
    ),
  );
}

async function toggleStatus(ctx, main, view) {
  const suppressed = view.memory.status === "suppressed";
  try {
    const call = suppressed ? ctx.api.restoreMemory : ctx.api.suppressMemory;
    view.memory = (await call.call(ctx.api, view.memory.memory_id)).data;
  } catch (error) {
    ctx.fail(error);
    return;
  }
  ctx.clear();
  invalidateMemories(ctx);
  draw(ctx, main, view);
  main.querySelector('[data-focus-key="toggle-status"]').focus();
  ctx.announce(t(suppressed ? "detail.restored" : "detail.suppressed", { key: view.memory.memory_key }));
}
