// Preloaded (`node --require tests/mcp/loopback.cjs …`) into an HTTP MCP server that
// flemma-mcp's tests start (server-everything's `streamableHttp` listens on every interface,
// on `PORT`):
// - a `listen(port)` without a host listens on 127.0.0.1 only;
// - once listening, it writes `flemma-loopback: listening on 127.0.0.1:PORT` on stderr, so
//   that a test can ask for `PORT=0` (a free port the system picks) and learn which;
// - it writes each request's `x-flemma-*` headers on stderr
//   (`flemma-loopback: header x-flemma-home: /root`), so a test sees what a client sent.
"use strict";
const net = require("node:net");
const http = require("node:http");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" || (typeof args[0] === "string" && /^\d+$/.test(args[0]))) {
    const port = Number(args[0]);
    const rest = args.slice(1).filter((a) => typeof a === "function");
    args = [port, "127.0.0.1", ...rest];
  }
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") {
      process.stderr.write(`flemma-loopback: listening on ${address.address}:${address.port}\n`);
    }
  });
  return listen.apply(this, args);
};

const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (event, request, ...rest) {
  if (event === "request" && request && request.headers) {
    for (const [name, value] of Object.entries(request.headers)) {
      if (name.startsWith("x-flemma-")) {
        process.stderr.write(`flemma-loopback: header ${name}: ${value}\n`);
      }
    }
  }
  return emit.call(this, event, request, ...rest);
};
