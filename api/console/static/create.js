// The "New memory" dialog: POST /me/core-memories; 200 (unchanged) and 409 key_exists explained.

import { field, h, openDialog, select } from "./dom.js";
import { t } from "./i18n.js";
import { CATEGORIES, invalidateMemories, options, scopeFields } from "./parts.js";

/** The chosen `YYYY-MM-DD` as midnight UTC, or undefined when empty. */
function dateValue(value) {
  return value ? `${value}T00:00:00Z` : undefined;
}

export function createDialog(ctx) {
  const error = h("div", { class: "alert", role: "alert", hidden: true });
  const key = h("input", { name: "memory_key", required: true, maxlength: 200, autocomplete: "off", autofocus: true });
  const content = h("textarea", { name: "content", required: true, maxlength: 4000, rows: 4 });
  const category = select(options("category", CATEGORIES), "preference", { name: "category" });
  const review = h("input", { type: "date", name: "review_after" });
  const expires = h("input", { type: "date", name: "expires_at" });
  const form = h(
    "form",
    { id: "create-form", class: "stack" },
    error,
    field(t("field.key"), key, t("field.key_hint")),
    field(t("field.content"), content),
    field(t("field.category"), category),
    scopeFields("global", "learning"),
    field(t("field.review_after"), review, t("field.review_after_hint")),
    field(t("field.expires_at"), expires, t("field.expires_at_hint")),
  );
  const { close } = openDialog({
    title: t("create.title"),
    body: form,
    returnKey: "new-memory",
    actions: [
      h("button", { type: "submit", form: "create-form" }, t("create.submit")),
      h("button", { type: "button", class: "secondary", onClick: () => close() }, t("action.cancel")),
    ],
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = {
      memory_key: data.get("memory_key").trim(),
      content: data.get("content"),
      category: data.get("category"),
      scope_type: data.get("scope_type"),
    };
    if (body.scope_type === "workspace") body.workspace_type = data.get("workspace_type");
    const reviewAfter = dateValue(data.get("review_after"));
    const expiresAt = dateValue(data.get("expires_at"));
    if (reviewAfter) body.review_after = reviewAfter;
    if (expiresAt) body.expires_at = expiresAt;
    let answer;
    try {
      answer = await ctx.api.createMemory(body);
    } catch (failure) {
      ctx.fail(failure, error);
      if (failure.reason === "key_exists") {
        error.append(
          h(
            "button",
            {
              type: "button",
              class: "link",
              onClick: () => {
                close();
                ctx.go("memory", { memoryId: failure.body.memory_id });
              },
            },
            t("create.open_existing"),
          ),
        );
      }
      return;
    }
    const memory = answer.data;
    invalidateMemories(ctx);
    close();
    if (ctx.view === "memories") await ctx.redraw(`open-${memory.memory_id}`);
    else await ctx.go("memory", { memoryId: memory.memory_id });
    ctx.announce(
      t(answer.status === 201 ? "create.done" : "create.unchanged", { key: memory.memory_key }),
    );
  });
}
