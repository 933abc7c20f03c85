#!/usr/bin/env node
// The null MCP server for the benchmarks: newline-delimited JSON-RPC over stdio, answered at once,
// so that the client is the bottleneck. No dependencies.
//
// It answers initialize (echoing the requested protocol version), tools/list (one tool, one
// page), tools/call (a fixed one-line text result; never, when the arguments hold "hang": true),
// ping, and -32601 to anything else; notifications are read and ignored. Extra command-line
// arguments (the benchmark's --tag=...) are ignored. All the answers to one chunk of stdin go
// out in one write. It exits when stdin ends.
//
// With --modern it also speaks the stateless 2026-07-28 revision, as a dual server does: it
// answers server/discover, and a request whose params._meta names a protocol version is a
// 2026-07-28 request: the version must be 2026-07-28 (else -32022 with the versions supported) and the
// envelope must hold the client's capabilities (else -32602); its result carries
// resultType "complete". A request without that _meta key is answered as without --modern, byte
// for byte. Without --modern it is a server of the handshake revisions only (server/discover is
// -32601), so that a client probing for 2026-07-28 (trio-mcp's default) falls back to initialize.
"use strict";

const MODERN_TOO = process.argv.includes("--modern");

const TOOL = {
  name: "echo",
  description: "Answers at once.",
  inputSchema: { type: "object", properties: { text: { type: "string" } } },
};
const CALL_RESULT = { content: [{ type: "text", text: "ok" }], isError: false };
const SERVER_INFO = { name: "bench-null", version: "1.0.0" };

const { META_VERSION, modernAnswerer } = require("./null_modern.js");

// A 2026-07-28 request (its _meta names a protocol version): the answer, or null for a
// "hang" call (null_modern.js).
const answerModern = modernAnswerer(TOOL, CALL_RESULT, SERVER_INFO);

function answer(msg) {
  if (msg.id === undefined || typeof msg.method !== "string") return null;
  const meta = msg.params && msg.params._meta;
  if (MODERN_TOO && meta && meta[META_VERSION] !== undefined) return answerModern(msg, meta);
  switch (msg.method) {
    case "tools/call":
      // {"hang": true} is never answered: the benchmark's calls pending when the server dies.
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

let pending = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  pending += chunk;
  let out = "";
  let start = 0;
  let nl;
  while ((nl = pending.indexOf("\n", start)) >= 0) {
    const line = pending.slice(start, nl);
    start = nl + 1;
    if (!line.trim()) continue;
    let reply;
    try {
      reply = answer(JSON.parse(line));
    } catch (err) {
      reply = { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } };
    }
    if (reply !== null) out += JSON.stringify(reply) + "\n";
  }
  pending = pending.slice(start);
  if (out) process.stdout.write(out);
});
process.stdin.on("end", () => process.exit(0));
