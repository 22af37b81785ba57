// A memory's version history, and restoring a version as a new revision.

import { h } from "./dom.js";
import { t, when } from "./i18n.js";
import { invalidateMemories } from "./parts.js";

/** The versions, newest first, each but the current one restorable (a new revision). */
export function historySection(ctx, main, view, reload) {
  const latest = view.memory.revision;
  return h(
    "section",
    { class: "history", "aria-labelledby": "history-heading" },
    h("h3", { id: "history-heading" }, t("history.heading")),
    h(
      "ol",
      { class: "versions" },
      [...view.versions].reverse().map((v) =>
        h(
          "li",
          { class: "card version", "data-revision": String(v.revision) },
          h(
            "h4",
            {},
            t("history.revision", { revision: v.revision }),
            v.revision === latest ? h("span", { class: "badge active" }, t("history.current")) : null,
          ),
          h("p", { class: "content" }, v.content),
          h(
            "p",
            { class: "hint" },
            [
              t(`category.${v.category}`),
              t(`change.${v.change_type}`),
              t(`via.${v.changed_via}`),
              when(v.created_at),
            ].join(" · "),
          ),
          v.revision === latest
            ? null
            : h(
                "button",
                {
                  type: "button",
                  class: "secondary",
                  "data-focus-key": `restore-version-${v.revision}`,
                  onClick: () => restoreVersion(ctx, main, view, v.revision, reload),
                },
                t("history.restore", { revision: v.revision }),
              ),
        ),
      ),
    ),
  );
}

async function restoreVersion(ctx, main, view, revision, reload) {
  try {
    view.memory = (
      await ctx.api.restoreVersion(view.memory.memory_id, revision, view.memory.revision)
    ).data;
  } catch (error) {
    ctx.fail(error);
    await reload(ctx, main, view, null);
    return;
  }
  ctx.clear();
  invalidateMemories(ctx);
  await reload(ctx, main, view, "edit");
  main.querySelector("#history-heading").scrollIntoView({ block: "nearest" });
  ctx.announce(t("history.restored", { revision, new_revision: view.memory.revision }));
}
