// Node's `http` server as a target: `PORT=... INTEROP_ARRIVALS=... [KEEP_ALIVE_MS=...] node node_target.js`.
// Answers by the path's last segment, as tests/interop/shapes.py describes (the constants are spelled again here).
"use strict";
const fs = require("fs");
const http = require("http");

const BODY = "ok";
const SLOW_FIRST_BYTE_MS = 1500;
const log = process.env.INTEROP_ARRIVALS;
const port = Number(process.env.PORT);

const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    fs.appendFileSync(log, JSON.stringify({
      port, path: req.url, run_id: req.headers["tickwork-run-id"] || "", attempt: req.headers["tickwork-attempt"] || "",
    }) + "\n");
    const shape = req.url.split("?")[0].split("/").pop();
    if (shape === "chunked") {  // no length: Node frames what is written as chunks
      res.setHeader("Content-Type", "text/plain");
      res.write(BODY.slice(0, 1));
      setTimeout(() => res.end(BODY.slice(1)), 10);
      return;
    }
    if (shape === "close") res.setHeader("Connection", "close");
    const answer = () => res.writeHead(200, { "Content-Type": "text/plain", "Content-Length": BODY.length }).end(BODY);
    if (shape === "slow") setTimeout(answer, SLOW_FIRST_BYTE_MS); else answer();
  });
});
if (process.env.KEEP_ALIVE_MS) server.keepAliveTimeout = Number(process.env.KEEP_ALIVE_MS);
server.listen(port, "127.0.0.1");
