#!/usr/bin/env node
// The null MCP server for the Streamable HTTP benchmarks: Node.js `http`, no dependencies,
// every request answered at once, so that the client is the bottleneck.
//
//   node null_http_server.js --mode=json|sse [--modern] [--tag=...]
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
//
// With --modern it also speaks the stateless 2026-07-28 revision, as a dual server does (without
// it, a server of the handshake revisions only: server/discover is -32601): a request whose
// params._meta names a protocol version is a 2026-07-28 request. Its headers must mirror its
// body (MCP-Protocol-Version the _meta version, Mcp-Method the method, Mcp-Name the tool's name
// on tools/call), else 400 with -32020; then the version must be 2026-07-28 (else -32022 with
// the versions supported) and the envelope must hold the client's capabilities (else -32602).
// It answers server/discover, tools/list and tools/call, with resultType "complete" in every
// result and no Mcp-Session-Id (there is no session).
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
const MODERN_TOO = process.argv.includes("--modern");

const { META_VERSION, modernAnswerer } = require("./null_modern.js");

// A header value as 2026-07-28 encodes it: plain, or =?base64?...?= for what plain text cannot
// carry.
function headerValue(value) {
  if (typeof value === "string" && value.startsWith("=?base64?") && value.endsWith("?=")) {
    return Buffer.from(value.slice(9, -2), "base64").toString("utf8");
  }
  return value;
}

// Why the headers of a 2026-07-28 request do not mirror its body, or null when they do.
function headerMismatch(req, msg, meta) {
  const version = req.headers["mcp-protocol-version"];
  if (version !== meta[META_VERSION]) {
    return "MCP-Protocol-Version " + version + " is not the _meta version " + meta[META_VERSION];
  }
  if (req.headers["mcp-method"] !== msg.method) {
    return "Mcp-Method " + req.headers["mcp-method"] + " is not the method " + msg.method;
  }
  if (msg.method === "tools/call" && headerValue(req.headers["mcp-name"]) !== msg.params.name) {
    return "Mcp-Name " + req.headers["mcp-name"] + " is not the tool " + msg.params.name;
  }
  return null;
}

const answerModern = modernAnswerer(TOOL, CALL_RESULT, SERVER_INFO);

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
    const meta = msg.params && msg.params._meta;
    const modern = Boolean(MODERN_TOO && meta && meta[META_VERSION] !== undefined);
    if (modern) {
      const mismatch = headerMismatch(req, msg, meta);
      if (mismatch !== null) {
        const error = { code: -32020, message: "Header mismatch: " + mismatch };
        const body = JSON.stringify({ jsonrpc: "2.0", id: msg.id, error });
        return reply(res, 400, body, { "content-type": "application/json" });
      }
    }
    const out = modern ? answerModern(msg, meta) : answer(msg);
    if (out === null) return; // never answered: the stream stays open until the server dies
    const headers = modern ? {} : { "mcp-session-id": SESSION };
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
