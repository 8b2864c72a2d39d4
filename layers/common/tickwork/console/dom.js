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

// The errors of a form made of field()s: an ApiError naming a field (`request.url`, or a part of one,
// `calendar.exclude.0`) is shown beside that control, which is marked invalid and focused (unless the focus
// is on one of `keepFocus`, being typed into); any other in the form's own error area, `formError`.
export function fieldErrors(controls, formError, keepFocus = []) {
  const controlFor = (name) => {
    if (!name) return null;
    if (controls.has(name)) return controls.get(name);
    const parent = [...controls.keys()].find((key) => name.startsWith(`${key}.`));
    return parent ? controls.get(parent) : null;
  };
  const clear = (name) => {
    const control = controls.get(name);
    control.removeAttribute('aria-invalid');
    const slot = document.getElementById(`${control.id}-error`);
    slot.hidden = true;
    slot.textContent = '';
  };
  return {
    clear,
    clearAll() { for (const name of controls.keys()) clear(name); formError.hidden = true; },
    show(error) {
      const control = controlFor(error.field);
      if (!control) {
        formError.textContent = error.field ? `${error.field}: ${error.message}` : error.message;
        formError.hidden = false;
        return;
      }
      const slot = document.getElementById(`${control.id}-error`);
      slot.textContent = error.message;
      slot.hidden = false;
      control.setAttribute('aria-invalid', 'true');
      const hint = document.getElementById(`${control.id}-hint`);
      control.setAttribute('aria-describedby', hint ? `${control.id}-error ${hint.id}` : `${control.id}-error`);
      if (!keepFocus.includes(document.activeElement)) control.focus();
    },
  };
}

export function definitions(pairs) {
  return h('dl', { class: 'settings' }, pairs.filter(Boolean).map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]));
}
