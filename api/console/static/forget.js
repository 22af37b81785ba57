// Forgetting: a confirmation that says it is irreversible, then the tombstone (410 forgotten).

import { ApiError } from "./api.js";
import { h, mount, openDialog } from "./dom.js";
import { t } from "./i18n.js";
import { backToList, invalidateMemories } from "./parts.js";

export function confirmForget(ctx, main, view) {
  const { memory } = view;
  const body = h(
    "div",
    { class: "stack" },
    h("p", { class: "warning" }, t("forget.irreversible")),
    h("p", {}, t("forget.what", { key: memory.memory_key })),
    h("blockquote", { class: "content" }, memory.content),
  );
  const { close } = openDialog({
    title: t("forget.title"),
    body,
    className: "danger-dialog",
    returnKey: "forget",
    actions: [
      h(
        "button",
        {
          type: "button",
          class: "danger",
          onClick: async () => {
            close();
            await forget(ctx, main, view);
          },
        },
        t("forget.confirm"),
      ),
      h("button", { type: "button", class: "secondary", autofocus: true, onClick: () => close() }, t("forget.cancel")),
    ],
  });
}

async function forget(ctx, main, view) {
  ctx.refresher = null; // this page forgets it: the change feed's news of it must not redraw
  try {
    await ctx.api.forgetMemory(view.memory.memory_id);
  } catch (error) {
    if (!(error instanceof ApiError && error.reason === "forgotten")) {
      ctx.fail(error);
      return;
    }
  }
  invalidateMemories(ctx);
  // Ask the server again: it now answers 410 forgotten, and that is what the page shows.
  try {
    await ctx.api.getMemory(view.memory.memory_id);
    ctx.fail(new Error(t("forget.still_there")));
  } catch (error) {
    if (error instanceof ApiError && error.reason === "forgotten") {
      renderTombstone(ctx, main, error, view.memory.memory_key);
      main.querySelector("h2").focus();
      ctx.announce(t("forget.done", { key: view.memory.memory_key }));
      return;
    }
    ctx.fail(error);
  }
}

export function renderTombstone(ctx, main, error, key) {
  ctx.refresher = null; // a tombstone never changes: the change feed's memory.deleted must not redraw it
  mount(main,
    backToList(ctx),
    h("h2", { tabindex: "-1", class: "tombstone-title" }, t("tombstone.heading")),
    h(
      "div",
      { class: "card tombstone" },
      key ? h("p", {}, t("tombstone.key", { key })) : null,
      h("p", {}, t("tombstone.explain")),
      h("p", { class: "hint" }, t("tombstone.server", { status: error.status, reason: error.reason, detail: error.detail })),
      h("p", {}, t("label.colon", { label: t("field.memory_id") }), h("code", {}, ctx.memoryId)),
    ),
  );
}
