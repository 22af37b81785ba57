// Pieces several views share: the enums and their labels, scope fields, the way back to the list.

import { field, h, select } from "./dom.js";
import { t } from "./i18n.js";
import { routeHash } from "./route.js";

export const CATEGORIES = [
  "preference", "goal", "constraint", "background", "fact", "profile", "project", "other",
];
export const WORKSPACES = ["learning", "teaching", "research"];

/** [[value, label]] for an enum, labels from the dictionary (`category.preference`, …). */
export function options(kind, values, any) {
  return [...(any ? [["", t(any)]] : []), ...values.map((v) => [v, t(`${kind}.${v}`)])];
}

/** A memory key that may wrap after its underscores (never inside a word): a_b_c -> a_<wbr>b_<wbr>c. */
export function keyText(key) {
  const parts = key.split("_");
  return parts.flatMap((part, i) => (i < parts.length - 1 ? [`${part}_`, h("wbr")] : [part]));
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

/** The way back from one memory to the list as it was (the list focuses the row it came from). */
export function backToList(ctx) {
  return h("a", { class: "back", href: ctx.listHash, "data-focus-key": "back" }, t("detail.back"));
}

/** A link to one memory (or its history): a real URL, so it can be opened in a new tab. */
export function memoryLink(memoryId, text, props = {}) {
  return h("a", { href: routeHash({ view: "memory", memoryId }), ...props }, text);
}

/** The memory list reloads next time it is shown (after a change elsewhere). */
export function invalidateMemories(ctx) {
  if (ctx.lists.memories) ctx.lists.memories.loaded = false;
}
