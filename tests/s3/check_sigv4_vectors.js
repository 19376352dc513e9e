#!/usr/bin/env node
'use strict';
// Runs sigv4.js's verifier over the AWS SigV4 test suite (header-signed requests):
//   node tests/s3/check_sigv4_vectors.js tests/data/aws-sigv4
// Prints one JSON object per line: {case, applies, ok, code, canonicalMatches}. A case does not
// apply to S3 when it expects path normalisation that S3 never does (dot segments, '//').

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const sigv4 = require('./sigv4');

function parseRequest(text) {
  const sep = text.indexOf('\n\n');
  const head = sep < 0 ? text : text.slice(0, sep);
  const body = sep < 0 ? '' : text.slice(sep + 2);
  const lines = head.split('\n');
  const first = lines[0];
  const method = first.slice(0, first.indexOf(' '));
  const url = first.slice(method.length + 1, first.lastIndexOf(' HTTP/'));
  const rawHeaders = [];
  for (const line of lines.slice(1)) {
    if (/^[ \t]/.test(line) && rawHeaders.length) {
      rawHeaders[rawHeaders.length - 1] += ' ' + line.trim(); // obsolete folding
    } else if (line) {
      const i = line.indexOf(':');
      rawHeaders.push(line.slice(0, i), line.slice(i + 1));
    }
  }
  return { method, url, rawHeaders, body };
}

function needsNormalising(p) {
  return p.includes('//') || /(^|\/)\.\.?(\/|$)/.test(p);
}

const dir = process.argv[2];
for (const name of fs.readdirSync(dir).sort()) {
  const caseDir = path.join(dir, name);
  const signed = path.join(caseDir, 'header-signed-request.txt');
  if (!fs.existsSync(signed)) continue;
  const ctx = JSON.parse(fs.readFileSync(path.join(caseDir, 'context.json'), 'utf8'));
  const req = parseRequest(fs.readFileSync(signed, 'utf8'));
  const urlPath = req.url.split('?')[0];
  const applies = !(ctx.normalize && needsNormalising(urlPath));
  const hasHash = req.rawHeaders.some((h, i) => i % 2 === 0 &&
                                      h.toLowerCase() === 'x-amz-content-sha256');
  if (!hasHash) req.payloadHash = crypto.createHash('sha256').update(req.body).digest('hex');
  const r = sigv4.verify(req, id =>
    (id === ctx.credentials.access_key_id ? ctx.credentials.secret_access_key : undefined));
  const expected = fs.readFileSync(path.join(caseDir, 'header-canonical-request.txt'), 'utf8');
  // A wrong secret must be refused too.
  const wrong = sigv4.verify(req, () => 'not-the-secret');
  process.stdout.write(JSON.stringify({
    case: name, applies, ok: r.ok, code: r.code || null,
    canonicalMatches: r.canonicalRequest === expected,
    wrongSecretRefused: !wrong.ok && wrong.code === 'SignatureDoesNotMatch',
  }) + '\n');
}
