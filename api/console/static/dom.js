// DOM helpers: elements are built with h(), never from HTML strings, so API text stays text.

const PROPERTIES = new Set(["value", "checked", "disabled", "selected", "hidden", "required"]);

/** h("button", {type: "button", onClick: f}, "Save") -> an element; null/false children skipped. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (PROPERTIES.has(name)) {
      el[name] = value;
    } else if (name === "class") {
      el.className = value;
    } else if (value === false) {
      continue;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  return el;
}

let uid = 0;
/** A fresh id for label/aria wiring. */
export function newId(prefix = "f") {
  uid += 1;
  return `${prefix}-${uid}`;
}

/** A labelled control: <div class="field"><label for>…</label>control<p hint/></div>. */
export function field(label, control, hint) {
  control.id ||= newId("c");
  const parts = [h("label", { for: control.id }, label), control];
  if (hint) {
    const hintId = newId("hint");
    control.setAttribute("aria-describedby", hintId);
    parts.push(h("p", { class: "hint", id: hintId }, hint));
  }
  return h("div", { class: "field" }, parts);
}

/** <select> with [value, label] options, the given value selected. */
export function select(options, value, props = {}) {
  const el = h(
    "select",
    props,
    options.map(([v, label]) => h("option", { value: v }, label)),
  );
  el.value = value ?? "";
  return el;
}

/** Focus the element marked data-focus-key=key (it may have been re-rendered), else fallback. */
export function focusKey(key, fallback) {
  const el = key && document.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
  const target = el || (fallback && document.querySelector(fallback));
  if (target) target.focus();
  return Boolean(target);
}

const FOCUSABLE =
  'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), ' +
  'textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

/**
 * A modal <dialog>: focus stays inside (Tab wraps), Escape cancels, and on close focus goes
 * back to the element with data-focus-key=returnKey, unless the action that closed it already
 * placed it (e.g. on the row it created). Returns {dialog, close}.
 */
export function openDialog({ title, body, actions, returnKey, className = "", onClose }) {
  const titleId = newId("dlg-title");
  const dialog = h(
    "dialog",
    { "aria-labelledby": titleId, class: `dialog ${className}`.trim() },
    h("h2", { id: titleId }, title),
    body,
    h("div", { class: "actions" }, actions),
  );
  dialog.addEventListener("keydown", (event) => {
    if (event.key !== "Tab") return;
    const items = [...dialog.querySelectorAll(FOCUSABLE)].filter((el) => el.offsetParent);
    if (items.length === 0) return;
    const first = items[0];
    const last = items[items.length - 1];
    if (event.shiftKey && document.activeElement === first) {
      last.focus();
      event.preventDefault();
    } else if (!event.shiftKey && document.activeElement === last) {
      first.focus();
      event.preventDefault();
    }
  });
  dialog.addEventListener("close", () => {
    dialog.remove();
    if (onClose) onClose();
    // Unless what closed it has put the focus somewhere already: `close` is fired in a later
    // task, which a newer Chromium runs after the redraw that focused the row just created.
    const active = document.activeElement;
    if (!active || active === document.body) focusKey(returnKey, "#main");
  });
  document.body.append(dialog);
  dialog.showModal();
  const preferred = dialog.querySelector("[autofocus]");
  if (preferred) preferred.focus();
  return { dialog, close: () => dialog.close() };
}

/** Replace `el`'s children, skipping null/false ones (conditional parts of a view). */
export function mount(el, ...children) {
  el.replaceChildren(
    ...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false),
  );
}
