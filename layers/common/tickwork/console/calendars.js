// Calendars: the tenant's named sets of dates that jobs do not run on (GET/PUT/DELETE /calendars). The list,
// one calendar with its next excluded dates (the API expands its iCalendar events) and the jobs using it, and
// a form to create or replace one from dates and/or an iCalendar text.

import { api, can, ApiError } from './api.js';
import { h, replace, link, field, fieldErrors, definitions } from './dom.js';
import { absTime } from './format.js';

const DAY_MS = 86400000;

export async function calendarsView(main, view) {
  const { items } = await api('GET', '/calendars');
  if (!view.alive) return;
  const cell = (label, ...content) => h('td', { 'data-label': label }, ...content);
  const rows = items.map((c) => h('tr', {},
    h('th', { scope: 'row', 'data-label': 'Name' }, link(c.name, 'calendars', c.name)),
    cell('Dates', String(c.dates)), cell('iCalendar events', String(c.events)), cell('Updated', absTime(c.updated_at))));
  replace(main,
    h('div', { class: 'title-row' }, h('h1', { tabindex: '-1' }, 'Calendars'),
      can('jobs:write') ? h('a', { class: 'button', href: '#/new-calendar' }, 'New calendar') : null),
    h('p', { class: 'muted' }, 'Dates a job does not run on: name calendars in a job\'s "Not on the dates of calendars".'),
    items.length
      ? h('div', { class: 'table-wrap' }, h('table', { class: 'data' }, h('caption', { class: 'visually-hidden' }, 'Calendars'),
        h('thead', {}, h('tr', {}, ['Name', 'Dates', 'iCalendar events', 'Updated'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, rows)))
      : h('p', {}, 'No calendars yet.'));
  document.title = 'Calendars · Tickwork';
}

export async function calendarView(main, view, name, navigate) {
  const path = `/calendars/${encodeURIComponent(name)}`;
  const calendar = await api('GET', path);
  if (!view.alive) return;
  const notice = h('p', { class: 'notice', role: 'status', 'aria-live': 'polite' });
  const confirm = deleteDialog(async () => {
    notice.textContent = '';
    try {
      await api('DELETE', path);
      navigate('#/calendars');
    } catch (error) {
      if (!(error instanceof ApiError) || error.status === 401) view.fail(error);
      else notice.textContent = error.status === 409 ? `Not deleted: it is in use. ${error.message}.` : `Not deleted: ${error.message}.`;
    }
  });
  const writes = can('jobs:write');
  replace(main,
    h('p', { class: 'crumbs' }, link('Calendars', 'calendars')),
    h('h1', { tabindex: '-1' }, calendar.name),
    writes ? h('div', { class: 'actions' }, h('a', { class: 'button', href: `#/calendars/${encodeURIComponent(calendar.name)}/edit` }, 'Replace'),
      h('button', { type: 'button', class: 'danger', onclick: () => confirm.open(calendar.name) }, 'Delete')) : null,
    notice,
    h('div', { class: 'columns' },
      h('section', { 'aria-labelledby': 'h-upcoming' }, h('h2', { id: 'h-upcoming' }, 'Next excluded dates'), upcomingList(calendar)),
      h('section', { 'aria-labelledby': 'h-used' }, h('h2', { id: 'h-used' }, 'Used by'), usersList(calendar))),
    h('section', { 'aria-labelledby': 'h-defined' }, h('h2', { id: 'h-defined' }, 'Definition'), definition(calendar)),
    confirm.element);
  document.title = `${calendar.name} · Tickwork`;
}

function upcomingList(calendar) {
  if (!calendar.upcoming.length) return h('p', { class: 'muted' }, 'No date from today on.');
  return h('ol', { class: 'times' }, calendar.upcoming.map((day) => h('li', {}, h('time', { datetime: day }, day),
    ` ${weekday(day)}`, h('span', { class: 'rel' }, daysAway(day)))));
}

function usersList(calendar) {
  if (!calendar.used_by.length) return h('p', { class: 'muted' }, 'No job uses it.');
  return h('ul', { class: 'plain' }, calendar.used_by.map((job) => h('li', {}, link(job.name, 'jobs', job.id))));
}

function definition(calendar) {
  return definitions([
    ['Dates', calendar.dates.length ? h('p', { class: 'wrap' }, calendar.dates.join(', ')) : 'none'],
    ['iCalendar', calendar.ical === null ? 'none' : h('details', {}, h('summary', {}, `${calendar.events} event(s)`),
      h('pre', {}, calendar.ical))],
    ['Created', absTime(calendar.created_at)],
    ['Updated', absTime(calendar.updated_at)],
  ]);
}

const weekday = (day) => new Date(`${day}T00:00:00Z`).toLocaleDateString('en', { weekday: 'long', timeZone: 'UTC' });

// Whole days from the browser's today to `day` (a calendar date, not an instant).
function daysAway(day, now = new Date()) {
  const days = Math.round((Date.parse(`${day}T00:00:00Z`) - Date.UTC(now.getFullYear(), now.getMonth(), now.getDate())) / DAY_MS);
  if (days === 0) return 'today';
  if (days === 1) return 'tomorrow';
  return days > 0 ? `in ${days} days` : `${-days} days ago`;
}

function deleteDialog(onDelete) {
  const dialog = h('dialog', { 'aria-labelledby': 'delete-calendar-title' });
  const name = h('strong');
  const cancel = h('button', { type: 'button', onclick: () => dialog.close() }, 'Cancel');
  const remove = h('button', { type: 'button', class: 'danger', onclick: async () => { dialog.close(); await onDelete(); } },
    'Delete calendar');
  dialog.append(h('h2', { id: 'delete-calendar-title' }, 'Delete this calendar?'),
    h('p', {}, 'The calendar ', name, ' is deleted for good. A calendar a job uses cannot be deleted.'),
    h('div', { class: 'actions' }, cancel, remove));
  // Cancel first and focused: Enter or Escape right away deletes nothing.
  return { element: dialog, open(calendarName) { name.textContent = calendarName; dialog.showModal(); cancel.focus(); } };
}

// Create (`name` null) or replace a calendar. PUT replaces it whole, so the form starts from what it holds.
export async function calendarFormView(main, view, name, navigate) {
  const calendar = name === null ? null : await api('GET', `/calendars/${encodeURIComponent(name)}`);
  if (!view.alive) return;
  const controls = new Map([
    ['name', h('input', { id: 'c-name', type: 'text', required: true, maxlength: 64, spellcheck: 'false', autocomplete: 'off',
      readonly: calendar !== null, 'aria-describedby': 'c-name-hint' })],
    ['dates', h('textarea', { id: 'c-dates', rows: 6, spellcheck: 'false', 'aria-describedby': 'c-dates-hint' })],
    ['ical', h('textarea', { id: 'c-ical', rows: 8, spellcheck: 'false', 'aria-describedby': 'c-ical-hint' })],
  ]);
  const [nameInput, datesInput, icalInput] = controls.values();
  if (calendar) {
    nameInput.value = calendar.name;
    datesInput.value = calendar.dates.join('\n');
    icalInput.value = calendar.ical ?? '';
  }
  const file = h('input', { id: 'c-ical-file', type: 'file', accept: '.ics,text/calendar',
    onchange: async () => { if (file.files[0]) icalInput.value = await file.files[0].text(); } });
  const formError = h('p', { class: 'form-error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit' }, calendar ? 'Replace calendar' : 'Create calendar');
  const form = h('form', { class: 'job-form', novalidate: true }, formError,
    field('Name', nameInput, calendar ? 'a calendar keeps its name' : 'letters, digits, ".", "_" and "-", up to 64: us-holidays'),
    field('Dates (optional)', datesInput, 'YYYY-MM-DD, one per line or comma-separated'),
    field('iCalendar text (optional)', icalInput,
      'an .ics file\'s text: all-day events (DTSTART;VALUE=DATE:20261225), which may recur (RRULE:FREQ=YEARLY)'),
    h('div', { class: 'field' }, h('label', { for: 'c-ical-file' }, 'Or load the iCalendar text from a file'), file),
    h('div', { class: 'actions' }, submit, calendar ? link('Cancel', 'calendars', calendar.name) : link('Cancel', 'calendars')));
  replace(main, calendar ? h('p', { class: 'crumbs' }, link('Calendars', 'calendars')) : null,
    h('h1', { tabindex: '-1' }, calendar ? `Replace ${calendar.name}` : 'New calendar'),
    h('p', {}, 'Give dates, an iCalendar text or both. Saving replaces the whole calendar; jobs using it see the change at once.'),
    form);
  document.title = `${calendar ? 'Replace calendar' : 'New calendar'} · Tickwork`;

  const errors = fieldErrors(controls, formError);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    errors.clearAll();
    const dates = datesOf(datesInput.value);
    const body = {};
    if (dates.length) body.dates = dates;
    if (icalInput.value.trim()) body.ical = icalInput.value;
    const path = `/calendars/${encodeURIComponent(nameInput.value.trim())}`;
    if (!nameInput.value.trim()) { errors.show(new ApiError(400, 'invalid_request', 'Enter a name.', 'name')); return; }
    submit.disabled = true;
    try {
      if (!calendar && await exists(path)) {
        throw new ApiError(409, 'conflict', 'a calendar of that name exists: open it to replace it', 'name');
      }
      const saved = await api('PUT', path, body);
      navigate(`#/calendars/${encodeURIComponent(saved.name)}`);
    } catch (error) {
      if (error instanceof ApiError && error.status < 500 && error.status !== 401) errors.show(named(error, dates));
      else view.fail(error);
    } finally {
      submit.disabled = false;
    }
  });
}

// The dates as typed, in order, so the API's `dates.N` is the Nth of them.
const datesOf = (text) => text.split(/[\s,]+/).filter(Boolean);

async function exists(path) {
  try {
    await api('GET', path);
    return true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return false;
    throw error;
  }
}

// The API's error with the field it names in the message: `dates.2 ("2026-02-30"): must be a date ...`.
function named(error, dates) {
  if (!/^(name|ical|dates(\.\d+)?)$/.test(error.field ?? '')) return error;
  const item = /^dates\.(\d+)$/.exec(error.field);
  const label = item && dates[Number(item[1])] !== undefined ? `${error.field} ("${dates[Number(item[1])]}")` : error.field;
  return new ApiError(error.status, error.code, `${label}: ${error.message}`, error.field);
}
