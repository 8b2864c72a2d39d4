// DOM building without HTML strings: every text goes in as a text node, so nothing a user typed is parsed.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'class') el.setAttribute('class', value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// replaceChildren, skipping null/false children as h() does.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// A link inside the console; ids are URI-encoded so none can break out of the fragment.
export function link(text, ...parts) {
  return h('a', { href: '#/' + parts.map((p) => encodeURIComponent(p)).join('/') }, text);
}

export function badge(status) {
  return h('span', { class: `badge s-${cssName(status)}` }, status);
}

export function cssName(value) {
  return String(value ?? 'none').replace(/[^a-z_-]/gi, '');
}

export function field(label, control, hint) {
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control,
    hint ? h('p', { class: 'hint', id: `${control.id}-hint` }, hint) : null,
    h('p', { class: 'field-error', id: `${control.id}-error`, hidden: true }));
}

export function definitions(pairs) {
  return h('dl', { class: 'settings' }, pairs.filter(Boolean).map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]));
}
