// Sign in with an API key. The key is checked with one call before it is kept (in sessionStorage only).

import { scopesOf, session, ApiError, UnreachableError } from './api.js';
import { h, replace } from './dom.js';

export function signInView(main, onSignedIn, reason) {
  const input = h('input', { id: 'api-key', type: 'password', name: 'api-key', autocomplete: 'off', required: true, spellcheck: 'false' });
  const message = h('p', { class: 'form-error', id: 'sign-in-error', role: 'alert', hidden: !reason }, reason || '');
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h('form', { class: 'sign-in', 'aria-labelledby': 'sign-in-title' },
    h('h1', { id: 'sign-in-title', tabindex: '-1' }, 'Sign in'),
    h('p', {}, 'Use an API key of your tenant. It is kept in this tab only and forgotten when you sign out or close it.'),
    h('div', { class: 'field' }, h('label', { for: 'api-key' }, 'API key'), input), message, button);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    const fail = (text) => { message.textContent = text; message.hidden = false; input.setAttribute('aria-invalid', 'true'); input.focus(); };
    if (!key) { fail('Enter an API key.'); return; }
    button.disabled = true;
    try {
      session.save(key, await scopesOf(key));
      input.value = '';
      onSignedIn();
    } catch (error) {
      if (error instanceof ApiError) fail(`The API refused this key: ${error.message}`);
      else if (error instanceof UnreachableError) fail('The Tickwork API cannot be reached. Check your connection and try again.');
      else throw error;
    } finally {
      button.disabled = false;
    }
  });
  replace(main, form);
  document.title = 'Sign in · Tickwork';
  input.focus();
}
