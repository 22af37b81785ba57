// UI strings: one dictionary per language in i18n/<lang>.json; the choice persists in localStorage.

export const LANGUAGES = [
  ["en", "English"],
  ["zh", "中文"],
];
const STORAGE_KEY = "memledger.console.lang";
let current = "en";
let strings = {};

function preferred() {
  const saved = localStorage.getItem(STORAGE_KEY);
  if (LANGUAGES.some(([code]) => code === saved)) return saved;
  return (navigator.language || "").toLowerCase().startsWith("zh") ? "zh" : "en";
}

/** Load the saved (or the browser's) language, or `lang` when given; persists the choice. */
export async function setLanguage(lang) {
  const code = lang || preferred();
  const response = await fetch(`i18n/${code}.json`, { cache: "no-cache" });
  strings = await response.json();
  current = code;
  localStorage.setItem(STORAGE_KEY, code);
  document.documentElement.lang = code === "zh" ? "zh-CN" : "en";
}

export function language() {
  return current;
}

/** The string for `key`, with {name} placeholders filled from `params`. */
export function t(key, params = {}) {
  const template = strings[key] ?? key;
  return template.replace(/\{(\w+)\}/g, (_, name) => String(params[name] ?? ""));
}

/** A counted string: `key.one` / `key.other` (… by the language's plural rules), {count} filled. */
export function tn(key, count, params = {}) {
  const rule = new Intl.PluralRules(current === "zh" ? "zh-CN" : "en").select(count);
  const name = strings[`${key}.${rule}`] !== undefined ? `${key}.${rule}` : `${key}.other`;
  return t(name, { ...params, count });
}

/** A list separator in the UI language: " · " reads the same in both. */
export function joined(parts) {
  return parts.filter(Boolean).join(" · ");
}

/** A date-time in the UI language, or the "never" text. */
export function when(iso) {
  if (!iso) return t("value.none");
  const date = new Date(iso);
  return new Intl.DateTimeFormat(current === "zh" ? "zh-CN" : "en-GB", {
    dateStyle: "medium",
    timeStyle: "short",
  }).format(date);
}
