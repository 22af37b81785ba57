// The two memory settings; they govern the agent tools only.

import { h, mount, newId } from "./dom.js";
import { t } from "./i18n.js";

const NAMES = ["saved_memory_enabled", "auto_extract_enabled"];

function toggle(name, checked) {
  const id = newId("set");
  const hint = `${id}-hint`;
  return h(
    "div",
    { class: "toggle" },
    h("input", { type: "checkbox", id, name, checked, "aria-describedby": hint }),
    h("label", { for: id }, t(`settings.${name}`)),
    h("p", { class: "hint", id: hint }, t(`settings.${name}_hint`)),
  );
}

export async function renderSettings(ctx, main) {
  let current;
  try {
    current = (await ctx.api.settings()).data;
  } catch (error) {
    mount(main, h("h2", {}, t("settings.heading")));
    ctx.fail(error);
    return;
  }
  const form = h(
    "form",
    {
      class: "card stack",
      onSubmit: async (event) => {
        event.preventDefault();
        const body = Object.fromEntries(NAMES.map((n) => [n, event.target.elements[n].checked]));
        try {
          current = (await ctx.api.changeSettings(body)).data;
        } catch (error) {
          ctx.fail(error);
          return;
        }
        ctx.clear();
        ctx.announce(t("settings.saved"));
        saved.textContent = t("settings.saved");
      },
    },
    h(
      "fieldset",
      {},
      h("legend", {}, t("settings.legend")),
      NAMES.map((n) => toggle(n, current[n])),
    ),
    h("p", { class: "hint" }, t("settings.note")),
    h("button", { type: "submit", "data-focus-key": "save-settings" }, t("settings.save")),
  );
  const saved = h("p", { class: "saved", id: "settings-saved" });
  mount(main, h("h2", {}, t("settings.heading")), form, saved);
}
