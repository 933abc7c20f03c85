#!/usr/bin/env node
// The null MCP server for the Streamable HTTP benchmarks: Node.js `http`, no dependencies,
// every request answered at once, so that the client is the bottleneck.
//
//   node null_http_server.js --mode=json|sse [--tag=...]
//
// It listens on 127.0.0.1 on a free port (the kernel picks it) and prints that port on stdout,
// one line, once it is listening; the endpoint is /mcp. POST /mcp answers:
//   - initialize: the result (echoing the requested protocol version) and an Mcp-Session-Id;
//   - a notification or a response: 202, empty body;
//   - tools/list (one tool, "echo"), tools/call (a fixed one-line text result; never, when the
//     arguments hold "hang": true), ping; -32601 to anything else;
// in --mode=json as one application/json body (with Content-Length), in --mode=sse as a
// text/event-stream with one "event: message" (chunked), after which the stream ends.
// GET /mcp is 405 (no server-initiated stream), DELETE /mcp is 200. Session ids are issued but
// not checked. It exits when stdin ends (its parent went away) or on SIGTERM.
"use strict";

const http = require("http");
const crypto = require("crypto");

const mode = (process.argv.find((a) => a.startsWith("--mode=")) || "--mode=json").slice(7);
if (mode !== "json" && mode !== "sse") {
  process.stderr.write("--mode must be json or sse\n");
  process.exit(2);
}

const TOOL = {
  name: "echo",
  description: "Answers at once.",
  inputSchema: { type: "object", properties: { text: { type: "string" } } },
};
const CALL_RESULT = { content: [{ type: "text", text: "ok" }], isError: false };
const SERVER_INFO = { name: "bench-null-http", version: "1.0.0" };
const SESSION = crypto.randomBytes(16).toString("hex");

function answer(msg) {
  switch (msg.method) {
    case "tools/call":
      if (msg.params && msg.params.arguments && msg.params.arguments.hang) return null;
      return { jsonrpc: "2.0", id: msg.id, result: CALL_RESULT };
    case "initialize":
      return {
        jsonrpc: "2.0",
        id: msg.id,
        result: {
          protocolVersion: (msg.params && msg.params.protocolVersion) || "2025-06-18",
          capabilities: { tools: { listChanged: false } },
          serverInfo: SERVER_INFO,
        },
      };
    case "tools/list":
      return { jsonrpc: "2.0", id: msg.id, result: { tools: [TOOL] } };
    case "ping":
      return { jsonrpc: "2.0", id: msg.id, result: {} };
    default:
      return {
        jsonrpc: "2.0",
        id: msg.id,
        error: { code: -32601, message: "Method not found: " + msg.method },
      };
  }
}

function reply(res, status, body, headers) {
  res.writeHead(status, headers);
  res.end(body);
}

const server = http.createServer((req, res) => {
  if (req.method === "GET") return reply(res, 405, "", { allow: "POST, DELETE" });
  if (req.method === "DELETE") return reply(res, 200, "", { "content-length": "0" });
  if (req.method !== "POST") return reply(res, 405, "", { allow: "POST, DELETE" });
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let msg;
    try {
      msg = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (err) {
      const body = JSON.stringify({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32700, message: "Parse error" },
      });
      return reply(res, 400, body, { "content-type": "application/json" });
    }
    if (msg === null || typeof msg !== "object" || msg.id === undefined || !msg.method) {
      return reply(res, 202, "", { "content-length": "0" }); // a notification or a response
    }
    const out = answer(msg);
    if (out === null) return; // never answered: the stream stays open until the server dies
    const headers = { "mcp-session-id": SESSION };
    const text = JSON.stringify(out);
    if (mode === "json") {
      headers["content-type"] = "application/json";
      headers["content-length"] = Buffer.byteLength(text);
      return reply(res, 200, text, headers);
    }
    headers["content-type"] = "text/event-stream";
    headers["cache-control"] = "no-cache";
    res.writeHead(200, headers); // no Content-Length: a chunked stream, as SSE servers send
    res.write("event: message\ndata: " + text + "\n\n");
    return res.end();
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(server.address().port + "\n");
});
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
process.on("SIGTERM", () => process.exit(0));
