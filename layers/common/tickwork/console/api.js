// The public API, called with the user's key. The key lives in sessionStorage only: never in a URL,
// a cookie or localStorage, and it is forgotten when the tab closes or the user signs out.

const KEY = 'tickwork.apiKey';
// The key's scopes (GET /api-keys/current), kept beside it: what the console offers to do. The API checks
// them on every call anyway; this only hides what the key cannot do.
const SCOPES = 'tickwork.scopes';

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  get scopes() { return JSON.parse(sessionStorage.getItem(SCOPES) || 'null'); },
  save(key, scopes) { sessionStorage.setItem(KEY, key); sessionStorage.setItem(SCOPES, JSON.stringify(scopes)); },
  forget() { sessionStorage.removeItem(KEY); sessionStorage.removeItem(SCOPES); },
};

// Whether the signed-in key holds `scope` (jobs:write, runs:write, ...).
export const can = (scope) => (session.scopes || []).includes(scope);

// The scopes of `key`, asked of the API: any live key may ask.
export async function scopesOf(key = session.key) {
  return (await api('GET', '/api-keys/current', undefined, { key })).scopes;
}

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field ?? null;
  }
}

export class UnreachableError extends Error {}

// A 429 (the key's rate limit) is waited out and the request sent again: the API refused it before doing
// anything, so any method may be repeated. At most RATE_LIMIT_RETRIES times, each wait capped.
const RATE_LIMIT_RETRIES = 5;
const MAX_RETRY_WAIT_S = 10;

// `headers`: more request headers (an Idempotency-Key, say).
export async function api(method, path, body, { key = session.key, headers: more = {} } = {}) {
  const headers = { ...more, Authorization: `Bearer ${key}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  for (let attempt = 0; ; attempt++) {
    try {
      response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store', credentials: 'omit', redirect: 'error' });
    } catch {
      throw new UnreachableError('The Tickwork API cannot be reached.');
    }
    if (response.status !== 429 || attempt === RATE_LIMIT_RETRIES) break;
    await sleep(retryAfterSeconds(response) * 1000);
  }
  if (response.status === 204) return null;
  let data = null;
  try { data = await response.json(); } catch { /* a gateway's HTML error page, say */ }
  if (!response.ok) throw errorOf(response, data);
  if (data === null) throw new ApiError(response.status, 'bad_response', 'The API answered something that is not JSON.');
  return data;
}

function retryAfterSeconds(response) {
  const seconds = Number.parseInt(response.headers.get('Retry-After') || '1', 10);
  return Math.min(Math.max(Number.isFinite(seconds) ? seconds : 1, 1), MAX_RETRY_WAIT_S);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function errorOf(response, data) {
  const detail = data && data.error;
  // API Gateway's own answers (its authorizer's 401/403) are {"message": "..."}.
  const message = (detail && detail.message) || (data && data.message) || `HTTP ${response.status}`;
  return new ApiError(response.status, (detail && detail.code) || `http_${response.status}`, message, detail && detail.field);
}

export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== null && value !== undefined) search.set(name, value);
  const text = search.toString();
  return text ? `?${text}` : '';
}
