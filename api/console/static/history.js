// A memory's version history (#/memories/<id>/history), and restoring a version as a new revision.

import { ApiError } from "./api.js";
import { h, mount } from "./dom.js";
import { renderTombstone } from "./forget.js";
import { joined, t, when } from "./i18n.js";
import { invalidateMemories, memoryLink } from "./parts.js";

/** What a version's change was and who made it, as one phrase ("Created by you", "由你创建"). */
export function changeText(version) {
  const exact = `history.change.${version.change_type}.${version.changed_via}`;
  const text = t(exact);
  return text === exact ? t(`history.change.${version.change_type}`) : text;
}

export async function renderHistory(ctx, main) {
  const view = { memory: null, versions: [] };
  try {
    await load(ctx, view);
  } catch (error) {
    if (error instanceof ApiError && error.reason === "forgotten") {
      renderTombstone(ctx, main, error);
      return;
    }
    mount(main, h("h2", {}, t("detail.unavailable")));
    ctx.fail(error);
    return;
  }
  draw(ctx, main, view);
  ctx.refresher = async () => {
    const before = view.memory.revision;
    try {
      await load(ctx, view);
    } catch {
      await ctx.redraw();
      return;
    }
    if (view.memory.revision !== before) draw(ctx, main, view);
  };
}

async function load(ctx, view) {
  view.memory = (await ctx.api.getMemory(ctx.memoryId)).data;
  view.versions = (await ctx.api.versions(ctx.memoryId)).data.items;
}

function draw(ctx, main, view) {
  const latest = view.memory.revision;
  mount(main,
    memoryLink(view.memory.memory_id, t("history.back", { key: view.memory.memory_key }), {
      class: "back",
      "data-focus-key": "back-to-memory",
    }),
    h("h2", {}, t("history.heading_named", { key: view.memory.memory_key })),
    h(
      "ol",
      { class: "versions" },
      [...view.versions].reverse().map((v) =>
        h(
          "li",
          { class: "card version", "data-revision": String(v.revision) },
          h(
            "h3",
            {},
            t("history.revision", { revision: v.revision }),
            v.revision === latest ? h("span", { class: "badge active" }, t("history.current")) : null,
          ),
          h("p", { class: "content" }, v.content),
          h("p", { class: "hint" }, joined([changeText(v), t(`category.${v.category}`), when(v.created_at)])),
          v.revision === latest
            ? null
            : h(
                "button",
                {
                  type: "button",
                  class: "secondary",
                  "data-focus-key": `restore-version-${v.revision}`,
                  onClick: () => restoreVersion(ctx, main, view, v.revision),
                },
                t("history.restore", { revision: v.revision }),
              ),
        ),
      ),
    ),
  );
}

async function restoreVersion(ctx, main, view, revision) {
  try {
    await ctx.api.restoreVersion(view.memory.memory_id, revision, view.memory.revision);
  } catch (error) {
    ctx.fail(error);
    return;
  }
  ctx.clear();
  invalidateMemories(ctx);
  try {
    await load(ctx, view);
  } catch (error) {
    ctx.fail(error);
    return;
  }
  draw(ctx, main, view);
  const heading = main.querySelector("ol.versions h3");
  heading.tabIndex = -1;
  heading.focus();
  ctx.announce(t("history.restored", { revision, new_revision: view.memory.revision }));
}
