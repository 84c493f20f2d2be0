// A recording HTTP proxy for the Claude Code test (tests/claude_code_test.cpp): forwards every
// request unchanged to keel serve on 127.0.0.1:TARGET_PORT, streams the answer back as it comes,
// and appends one JSON line per exchange to LOG_FILE once the answer is complete:
//   {method, url, headers, body (parsed JSON when it is JSON), status, response_headers,
//    sse_events (the `event:` names of a stream, in order), error_events (the data of each
//    `event: error`), response_body (non-stream answers, at most 64 KiB), ms}
// Prints "listening PORT" on stdout once it accepts connections.
//
//   node recording_proxy.cjs TARGET_PORT LOG_FILE
'use strict';
const http = require('http');
const fs = require('fs');
const zlib = require('zlib');

// The answer as text, undoing the content-encoding keel chose from the client's Accept-Encoding.
function decode(buffer, encoding) {
  try {
    if (encoding === 'gzip') return zlib.gunzipSync(buffer).toString('utf8');
    if (encoding === 'deflate') return zlib.inflateSync(buffer).toString('utf8');
    if (encoding === 'br') return zlib.brotliDecompressSync(buffer).toString('utf8');
    if (encoding === 'zstd' && zlib.zstdDecompressSync) return zlib.zstdDecompressSync(buffer).toString('utf8');
  } catch (e) {
    return `(${encoding} body that does not decode: ${e})`;
  }
  return encoding ? `(${buffer.length} bytes of ${encoding})` : buffer.toString('utf8');
}

const targetPort = Number(process.argv[2]);
const logFile = process.argv[3];
if (!targetPort || !logFile) {
  console.error('usage: node recording_proxy.cjs TARGET_PORT LOG_FILE');
  process.exit(2);
}

const server = http.createServer((req, res) => {
  const started = Date.now();
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    let body = null;
    if (raw.length) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = raw.toString('utf8');
      }
    }
    const record = { method: req.method, url: req.url, headers: req.headers, body };
    const upstream = http.request(
      { host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers },
      (up) => {
        record.status = up.statusCode;
        record.response_headers = up.headers;
        res.writeHead(up.statusCode, up.headers);
        const isSse = String(up.headers['content-type'] || '').startsWith('text/event-stream');
        const parts = [];
        up.on('data', (c) => {
          res.write(c);
          parts.push(c);
        });
        up.on('end', () => {
          res.end();
          const text = decode(Buffer.concat(parts), up.headers['content-encoding']);
          if (isSse) {
            record.sse_events = [];
            record.error_events = [];
            let event = '';
            for (const line of text.split(/\r?\n/)) {
              if (line.startsWith('event:')) {
                event = line.slice(6).trim();
                record.sse_events.push(event);
              } else if (line.startsWith('data:') && event === 'error') {
                record.error_events.push(line.slice(5).trim());
              }
            }
          } else {
            record.response_body = text.slice(0, 65536);
          }
          record.ms = Date.now() - started;
          fs.appendFileSync(logFile, JSON.stringify(record) + '\n');
        });
        up.on('error', (e) => {
          record.upstream_error = String(e);
          fs.appendFileSync(logFile, JSON.stringify(record) + '\n');
          res.destroy();
        });
      },
    );
    upstream.on('error', (e) => {
      record.upstream_error = String(e);
      record.ms = Date.now() - started;
      fs.appendFileSync(logFile, JSON.stringify(record) + '\n');
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end('recording proxy: ' + e);
    });
    // A client that goes away mid-answer: pass the hang-up on so keel cancels the turn.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    upstream.end(raw);
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
