// The 2026-07-28 answers the two null servers (null_server.js over stdio, null_http_server.js
// over HTTP) share: server/discover, tools/list and tools/call of a request that carries the
// _meta envelope, -32022 for another version and -32602 without the client's capabilities.
"use strict";

const MODERN = "2026-07-28";
const META_VERSION = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";

// The modern answerer of a server offering `tool`, answering calls with `callResult` and naming
// itself `serverInfo`: answer(msg, meta) is the response, or null for a "hang" call.
function modernAnswerer(tool, callResult, serverInfo) {
  const callAnswer = { ...callResult, resultType: "complete" };
  const listAnswer = { tools: [tool], resultType: "complete", ttlMs: 0, cacheScope: "private" };
  const discoverAnswer = {
    supportedVersions: [MODERN],
    capabilities: { tools: { listChanged: false } },
    resultType: "complete",
    ttlMs: 0,
    cacheScope: "private",
    _meta: { "io.modelcontextprotocol/serverInfo": serverInfo },
  };
  return function answerModern(msg, meta) {
    if (meta[META_VERSION] !== MODERN) {
      const data = { supported: [MODERN], requested: String(meta[META_VERSION]) };
      const error = { code: -32022, message: "Unsupported protocol version", data };
      return { jsonrpc: "2.0", id: msg.id, error };
    }
    if (typeof meta[META_CAPABILITIES] !== "object" || meta[META_CAPABILITIES] === null) {
      const error = { code: -32602, message: "Invalid params: _meta has no clientCapabilities" };
      return { jsonrpc: "2.0", id: msg.id, error };
    }
    switch (msg.method) {
      case "tools/call":
        if (msg.params.arguments && msg.params.arguments.hang) return null;
        return { jsonrpc: "2.0", id: msg.id, result: callAnswer };
      case "server/discover":
        return { jsonrpc: "2.0", id: msg.id, result: discoverAnswer };
      case "tools/list":
        return { jsonrpc: "2.0", id: msg.id, result: listAnswer };
      default:
        return {
          jsonrpc: "2.0",
          id: msg.id,
          error: { code: -32601, message: "Method not found: " + msg.method },
        };
    }
  };
}

module.exports = { MODERN, META_VERSION, modernAnswerer };
