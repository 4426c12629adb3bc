// DOM building with text only: every string becomes a text node or an attribute value,
// never markup. The one place markup enters the page is setSanitisedHTML, with HTML the
// server sanitised (console/markdown.py).

export function $(id) {
  return document.getElementById(id);
}

export function h(tag, attrs = {}, ...children) {
  const el = tag.startsWith("svg:")
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) {
      el.addEventListener(name.slice(2), value);
    } else if (name === "hidden" || name === "disabled") {
      el[name] = Boolean(value);
    } else if (name === "value") {
      el.value = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// Redraw with fn() while keeping keyboard focus: polling redraws a live view every second,
// and a keyboard user on its "Cancel job" button must still be on it afterwards.
export function keepingFocus(fn) {
  const id = document.activeElement && document.activeElement.id;
  fn();
  if (id && document.activeElement !== document.getElementById(id)) {
    const again = document.getElementById(id);
    if (again) again.focus();
  }
}

export function setSanitisedHTML(el, html) {
  el.innerHTML = html; // sanitised server-side by nh3; scripts could not run anyway (CSP)
}

export function showError(el, err) {
  if (!err) {
    el.hidden = true;
    el.replaceChildren();
    return;
  }
  const code = err.code || "error";
  replace(
    el,
    h("p", {}, h("span", { class: "code" }, code), ": ", err.message || String(err)),
    err.hint ? h("p", { class: "hint" }, "What to do: ", err.hint) : null,
  );
  el.hidden = false;
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
export function bytes(n) {
  if (typeof n !== "number") return "–";
  let i = 0;
  let v = n;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${n.toLocaleString("en")} B` : `${v.toFixed(1)} ${UNITS[i]}`;
}

export function num(n) {
  return typeof n === "number" ? n.toLocaleString("en") : "–";
}

export function when(unixSeconds) {
  if (!unixSeconds) return "–";
  return new Date(unixSeconds * 1000).toLocaleString();
}

// A table cell that names its column (data-label): under 720 px a table of class "stack"
// shows each row as a card, each cell's content beside its column's name (console.css).
export function cell(label, attrs, ...children) {
  return h("td", { ...attrs, "data-label": label }, h("div", { class: "cell" }, ...children));
}

export function badge(text) {
  return h("span", { class: `badge ${text}` }, text);
}
