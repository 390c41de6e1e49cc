#!/usr/bin/env node
// An SSE completion server on Node's own http2 module (no npm package): HTTP/2 with prior
// knowledge (h2c) on a plain port, or h2 over TLS (ALPN) with --cert/--key, where Node's
// statically linked OpenSSL is in the node executable itself. Each stream of a connection is a
// request: POST /v1/completions with {"max_tokens": N} gets N SSE events, one every --token-ms
// (a timer, as a server waiting on its engine), then "data: [DONE]".
//
//   node node_h2_server.js --port 0 [--token-ms 20] [--prefill-ms 20] [--tokens 15] [--cert C --key K]
//
// Prints "listening on 127.0.0.1:PORT" when ready.
'use strict';
const fs = require('fs');
const http2 = require('http2');

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

const tokenMs = Number(option('token-ms', 20));
const prefillMs = Number(option('prefill-ms', 20));
const defaultTokens = Number(option('tokens', 15));
const cert = option('cert', '');
const server = cert
  ? http2.createSecureServer({cert: fs.readFileSync(cert), key: fs.readFileSync(option('key', ''))})
  : http2.createServer();

server.on('stream', (stream, headers) => {
  if (headers[':path'] !== '/v1/completions' && headers[':path'] !== '/v1/chat/completions') {
    stream.respond({':status': 404});
    stream.end();
    return;
  }
  let body = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => { body += chunk; });
  stream.on('end', () => {
    let tokens = defaultTokens;
    try { tokens = Number(JSON.parse(body || '{}').max_tokens) || defaultTokens; } catch (e) { /* default */ }
    stream.respond({':status': 200, 'content-type': 'text/event-stream'});
    let n = 0;
    const next = () => {
      if (stream.closed) return;
      n += 1;
      stream.write(`data: {"choices":[{"text":"tok${n}","index":0}]}\n\n`);
      if (n < tokens) {
        setTimeout(next, tokenMs);
      } else {
        stream.end('data: [DONE]\n\n');
      }
    };
    setTimeout(next, prefillMs + tokenMs);
  });
});

server.listen(Number(option('port', 0)), '127.0.0.1', () => {
  console.log(`listening on 127.0.0.1:${server.address().port}`);
});
