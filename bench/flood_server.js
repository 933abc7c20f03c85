#!/usr/bin/env node
// The flooding MCP server for the benchmark's flood rows: newline-delimited JSON-RPC over stdio,
// no dependencies. It answers like null_server.js (initialize, tools/list with the one tool
// "echo", ping, logging/setLevel) with one difference: a tools/call whose arguments hold
// {"flood": N} is answered at once and then the server writes N notifications without pause
// (N = 0: without end, until stdin ends), as fast as the client reads them (it writes a batch, and the next one as soon as stdout has
// room, so the pipe is kept full without queueing the flood in memory). Between batches it
// yields to its event loop, so requests are still read and answered during the flood. A call with {"hang": true} is never answered.
//
// --kind=message (default): notifications/message (logging), --kind=progress:
// notifications/progress for a token no request carries. Every notification line has the same
// length (the sequence number in it wraps after 9,000,000), so the benchmark can count how many
// were written from the bytes the process wrote (/proc/<pid>/io). Other
// arguments (the benchmark's --tag=...) are ignored. It exits when stdin ends.
"use strict";

const TOOL = {
  name: "echo",
  description: "Answers at once; {flood: N} starts a flood of N notifications.",
  inputSchema: { type: "object", properties: { text: { type: "string" } } },
};
const SERVER_INFO = { name: "bench-flood", version: "1.0.0" };
const BATCH = 256;
// Sequence numbers run from FIRST for WRAP notifications, then again: seven digits each.
const FIRST = 1000000;
const WRAP = 9000000;

let kind = "message";
for (const arg of process.argv.slice(2)) {
  if (arg.startsWith("--kind=")) kind = arg.slice("--kind=".length);
}
if (kind !== "message" && kind !== "progress") {
  process.stderr.write("flood_server.js: --kind must be message or progress\n");
  process.exit(2);
}

function notification(seq) {
  if (kind === "progress") {
    return (
      '{"jsonrpc":"2.0","method":"notifications/progress","params":' +
      '{"progressToken":"flood","progress":' + seq + "}}\n"
    );
  }
  return (
    '{"jsonrpc":"2.0","method":"notifications/message","params":' +
    '{"level":"info","logger":"flood","data":"flood ' + seq + '"}}\n'
  );
}

let remaining = 0;
let sent = 0;
let flooding = false;

function floodSome() {
  const count = Math.min(BATCH, remaining);
  let out = "";
  for (let i = 0; i < count; i++) out += notification(FIRST + ((sent + i) % WRAP));
  sent += count;
  remaining -= count;
  const more = remaining > 0;
  if (!more) flooding = false;
  // Keep the pipe full and no more: when stdout's buffer is full, go on once it has drained.
  if (process.stdout.write(out)) {
    if (more) setImmediate(floodSome);
  } else if (more) {
    process.stdout.once("drain", floodSome);
  }
}

function startFlood(count) {
  remaining = count > 0 ? remaining + count : Infinity;
  if (!flooding && remaining > 0) {
    flooding = true;
    setImmediate(floodSome);
  }
}

function answer(msg) {
  if (msg.id === undefined || typeof msg.method !== "string") return null;
  switch (msg.method) {
    case "tools/call": {
      const args = (msg.params && msg.params.arguments) || {};
      if (args.hang) return null;
      if (typeof args.flood === "number") {
        // Answered before the flood starts (the flood begins on the next turn of the loop).
        startFlood(args.flood);
        return {
          jsonrpc: "2.0",
          id: msg.id,
          result: { content: [{ type: "text", text: "flooding " + args.flood }], isError: false },
        };
      }
      return {
        jsonrpc: "2.0",
        id: msg.id,
        result: { content: [{ type: "text", text: "ok" }], isError: false },
      };
    }
    case "initialize":
      return {
        jsonrpc: "2.0",
        id: msg.id,
        result: {
          protocolVersion: (msg.params && msg.params.protocolVersion) || "2025-06-18",
          capabilities: { tools: { listChanged: false }, logging: {} },
          serverInfo: SERVER_INFO,
        },
      };
    case "tools/list":
      return { jsonrpc: "2.0", id: msg.id, result: { tools: [TOOL] } };
    case "ping":
    case "logging/setLevel":
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
// The client went away mid-flood (EPIPE): nothing left to do.
process.stdout.on("error", () => process.exit(0));
