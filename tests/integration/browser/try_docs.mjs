// Drives headless Chromium over the DevTools protocol as a user would: open /docs, enter the API key in
// Authorize, "Try it out" on GET /jobs, Execute. Prints one JSON line of what the page showed.
// node --experimental-websocket try_docs.mjs <api url> <api key>   (Node 20+; 22+ needs no flag)
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [base, key] = process.argv.slice(2);
const WAIT_MS = 60000; // a loaded machine renders slowly; a missing element fails after this
const OP = "#operations-jobs-list_jobs_jobs_get";
const profile = mkdtempSync(join(tmpdir(), "tickwork-docs-"));
const chrome = spawn(process.env.CHROMIUM || "chromium", [
  "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0", `--user-data-dir=${profile}`,
  "about:blank"], { stdio: ["ignore", "ignore", "pipe"] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const done = (code) => { chrome.kill(); setTimeout(() => rmSync(profile, { recursive: true, force: true }), 500); setTimeout(() => process.exit(code), 600); };

// Chromium prints "DevTools listening on ws://..." once its port is open.
const browserUrl = await new Promise((resolve, reject) => {
  let seen = "";
  chrome.stderr.on("data", (chunk) => {
    seen += chunk;
    const match = seen.match(/DevTools listening on (ws:\/\/\S+)/);
    if (match) resolve(match[1]);
  });
  chrome.on("exit", () => reject(new Error("chromium exited: " + seen.slice(-500))));
});
const httpBase = browserUrl.replace(/^ws:\/\/([^/]+).*/, "http://$1");
const page = (await (await fetch(`${httpBase}/json/list`)).json()).find((t) => t.type === "page");
const ws = new WebSocket(page.webSocketDebuggerUrl);
await new Promise((r) => ws.addEventListener("open", r));
let lastId = 0;
const pending = new Map();
ws.addEventListener("message", (m) => {
  const msg = JSON.parse(m.data);
  if (msg.id && pending.has(msg.id)) { pending.get(msg.id)(msg); pending.delete(msg.id); }
});
const send = (method, params = {}) => new Promise((r) => {
  const id = ++lastId; pending.set(id, r); ws.send(JSON.stringify({ id, method, params }));
});
const evaluate = async (expr) =>
  (await send("Runtime.evaluate", { expression: expr, awaitPromise: true, returnByValue: true })).result?.result?.value;
const waitFor = async (selector) => {
  for (let t = 0; t < WAIT_MS; t += 100) {
    if (await evaluate(`!!document.querySelector(${JSON.stringify(selector)})`)) return;
    await sleep(100);
  }
  console.log(JSON.stringify({ error: "not found: " + selector }));
  done(1);
  await sleep(10000);
};
const click = (selector) => evaluate(`document.querySelector(${JSON.stringify(selector)}).click()`);
const text = (selector) => evaluate(`(document.querySelector(${JSON.stringify(selector)}) || {}).innerText || null`);

await send("Page.enable");
await send("Runtime.enable");
// Installed by the debugger, so not itself subject to the page's policy: records every violation.
await send("Page.addScriptToEvaluateOnNewDocument", { source:
  "window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective))" });
await send("Page.navigate", { url: `${base}/docs` });
await waitFor(`${OP} .opblock-summary-control`);
await click(".auth-wrapper .btn.authorize");
await waitFor("#auth-bearer-value");
await evaluate(`(() => { const input = document.querySelector("#auth-bearer-value");
  Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set.call(input, ${JSON.stringify(key)});
  input.dispatchEvent(new Event("input", { bubbles: true })); })()`);
await click(".auth-btn-wrapper .authorize");
await waitFor(".auth-btn-wrapper .btn-done");
await click(".auth-btn-wrapper .btn-done");
const lock = await evaluate("document.querySelector('.auth-wrapper .btn.authorize').className");
await click(`${OP} .opblock-summary-control`);
await waitFor(`${OP} .try-out__btn`);
await click(`${OP} .try-out__btn`);
await waitFor(`${OP} .execute`);
await click(`${OP} .execute`);
await waitFor(`${OP} .live-responses-table tbody .response-col_status`);
console.log(JSON.stringify({
  lock,
  status: await text(`${OP} .live-responses-table tbody .response-col_status`),
  body: await text(`${OP} .live-responses-table tbody .response-col_description pre`),
  curl: ((await text(`${OP} .curl-command`)) || "").replace(key, "<key>"),
  violations: await evaluate("window.__csp"),
  stored: await evaluate("Object.keys(localStorage).concat(Object.keys(sessionStorage))"),
}));
done(0);
