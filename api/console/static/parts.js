// Pieces several views share: the enums and their labels, scope fields, the way back to the list.

import { field, h, select } from "./dom.js";
import { t } from "./i18n.js";

export const CATEGORIES = [
  "preference", "goal", "constraint", "background", "fact", "profile", "project", "other",
];
export const WORKSPACES = ["learning", "teaching", "research"];

/** [[value, label]] for an enum, labels from the dictionary (`category.preference`, …). */
export function options(kind, values, any) {
  return [...(any ? [["", t(any)]] : []), ...values.map((v) => [v, t(`${kind}.${v}`)])];
}

/** "Global" or "Workspace: learning", in the UI language. */
export function scopeText(scopeType, workspaceType) {
  return scopeType === "global"
    ? t("scope.global")
    : t("scope.in_workspace", { workspace: t(`workspace.${workspaceType}`) });
}

/** The scope and workspace selects, the workspace one enabled only for workspace scope. */
export function scopeFields(scopeType, workspaceType) {
  const scope = select(options("scope", ["global", "workspace"]), scopeType, { name: "scope_type" });
  const workspace = select(options("workspace", WORKSPACES), workspaceType || "learning", {
    name: "workspace_type",
  });
  const sync = () => {
    workspace.disabled = scope.value !== "workspace";
  };
  scope.addEventListener("change", sync);
  sync();
  return [field(t("field.scope"), scope), field(t("field.workspace"), workspace, t("field.workspace_hint"))];
}

/** The way back from one memory to the list, focusing the row it came from. */
export function backToList(ctx) {
  return h(
    "button",
    {
      type: "button",
      class: "link back",
      onClick: () => ctx.go("memories", { focus: `open-${ctx.memoryId}` }),
    },
    t("detail.back"),
  );
}

/** The memory list reloads next time it is shown (after a change elsewhere). */
export function invalidateMemories(ctx) {
  if (ctx.lists.memories) ctx.lists.memories.loaded = false;
}
