// Strings in the page's language, and elements whose text follows the language switch.

import { $, LANG_COOKIE, LANG_SET, state } from "./state.js";

// ---- strings -----------------------------------------------------------------------------------

export function t(key, vars = {}) {
  const text = state.strings[state.lang][key] ?? key;
  return text.replace(/\{([a-z_]+)\}/g, (whole, name) => (name in vars ? String(vars[name]) : whole));
}

// Text that follows the language switch: the key and its values ride on the element.
export function say(element, key, vars = {}) {
  element.dataset.i18n = key;
  if (Object.keys(vars).length) element.dataset.i18nVars = JSON.stringify(vars);
  else delete element.dataset.i18nVars;
  element.textContent = t(key, vars);
  return element;
}

function applyStrings(root = document) {
  for (const element of root.querySelectorAll("[data-i18n]")) {
    const vars = element.dataset.i18nVars ? JSON.parse(element.dataset.i18nVars) : {};
    element.textContent = t(element.dataset.i18n, vars);
  }
  for (const element of root.querySelectorAll("[data-i18n-placeholder]")) {
    element.placeholder = t(element.dataset.i18nPlaceholder);
  }
  for (const element of root.querySelectorAll("[data-i18n-aria-label]")) {
    element.setAttribute("aria-label", t(element.dataset.i18nAriaLabel));
  }
}

export function el(tag, { cls, text, attrs } = {}, children = []) {
  const element = document.createElement(tag);
  if (cls) element.className = cls;
  if (text !== undefined) element.textContent = text;
  for (const [name, value] of Object.entries(attrs ?? {})) element.setAttribute(name, value);
  for (const child of children) if (child) element.append(child);
  return element;
}

export function setLang(lang) {
  state.lang = lang;
  const root = document.documentElement;
  root.lang = lang === "zh" ? "zh-CN" : "en";
  root.dataset.lang = lang;
  document.cookie = `${LANG_COOKIE}=${lang}; path=/; max-age=31536000; SameSite=Strict`;
  $("lang-switch").lang = lang === "zh" ? "en" : "zh-CN";
  applyStrings();
  // What the views built from data (the card, tasks, week, month, details) they build again.
  document.dispatchEvent(new Event(LANG_SET));
}
