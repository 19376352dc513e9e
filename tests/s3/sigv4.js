'use strict';
// AWS Signature Version 4 verification of S3 requests signed in the Authorization header,
// with S3's rules: the path is not normalised and is URI-encoded once; the payload hash is the
// value of x-amz-content-sha256 (a hex digest or UNSIGNED-PAYLOAD).
//
// s3rver 3.7.1 only checks that the access key exists; server.js puts this check in front of
// it so that a wrong secret or a canonicalisation bug gets 403 SignatureDoesNotMatch, as from a
// real S3 store. The payload itself is not hashed (the server streams it to s3rver).

const crypto = require('crypto');

const UNRESERVED = /[A-Za-z0-9\-._~]/;

function hmac(key, data) {
  return crypto.createHmac('sha256', key).update(data, 'utf8').digest();
}

function sha256Hex(data) {
  return crypto.createHash('sha256').update(data).digest('hex');
}

// Decodes %XX sequences into bytes (leaving a stray '%' as is), then encodes every byte that is
// not unreserved (and not '/' when keepSlash) as %XX with upper-case hex.
function uriEncode(raw, keepSlash) {
  const bytes = [];
  const src = Buffer.from(raw, 'utf8');
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === 0x25 && i + 2 < src.length &&
        /^[0-9A-Fa-f]{2}$/.test(String.fromCharCode(src[i + 1], src[i + 2]))) {
      bytes.push(parseInt(String.fromCharCode(src[i + 1], src[i + 2]), 16));
      i += 2;
    } else {
      bytes.push(c);
    }
  }
  let out = '';
  for (const b of bytes) {
    const ch = String.fromCharCode(b);
    if ((b < 0x80 && UNRESERVED.test(ch)) || (keepSlash && ch === '/')) {
      out += ch;
    } else {
      out += '%' + b.toString(16).toUpperCase().padStart(2, '0');
    }
  }
  return out;
}

function canonicalQuery(rawQuery) {
  if (!rawQuery) return '';
  const pairs = rawQuery.split('&').filter(p => p !== '').map(p => {
    const i = p.indexOf('=');
    const name = i < 0 ? p : p.slice(0, i);
    const value = i < 0 ? '' : p.slice(i + 1);
    // In a query string '+' means a space for most decoders; S3 treats a literal '+' as a space
    // too. A correct client sends %2B for a plus and %20 for a space.
    return [uriEncode(name.replace(/\+/g, '%20'), false),
            uriEncode(value.replace(/\+/g, '%20'), false)];
  });
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 :
                        a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([n, v]) => `${n}=${v}`).join('&');
}

// rawHeaders: [name, value, name, value, ...] as received (node's req.rawHeaders).
function canonicalHeaders(rawHeaders, signedHeaders) {
  const values = new Map();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase();
    const value = String(rawHeaders[i + 1]).trim().replace(/\s+/g, ' ');
    if (!values.has(name)) values.set(name, []);
    values.get(name).push(value);
  }
  const lines = [];
  for (const name of signedHeaders) {
    if (!values.has(name)) return null; // a signed header is missing
    lines.push(`${name}:${values.get(name).join(',')}\n`);
  }
  return lines.join('');
}

function parseAuthorization(value) {
  const m = /^AWS4-HMAC-SHA256\s+(.*)$/.exec(value || '');
  if (!m) return null;
  const parts = {};
  for (const item of m[1].split(',')) {
    const i = item.indexOf('=');
    if (i < 0) return null;
    parts[item.slice(0, i).trim()] = item.slice(i + 1).trim();
  }
  if (!parts.Credential || !parts.SignedHeaders || !parts.Signature) return null;
  const scope = parts.Credential.split('/');
  if (scope.length !== 5 || scope[4] !== 'aws4_request') return null;
  return {
    accessKeyId: scope[0],
    date: scope[1],
    region: scope[2],
    service: scope[3],
    scope: scope.slice(1).join('/'),
    signedHeaders: parts.SignedHeaders.split(';'),
    signature: parts.Signature,
  };
}

function headerValue(rawHeaders, name) {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toLowerCase() === name) return String(rawHeaders[i + 1]).trim();
  }
  return undefined;
}

// Verifies one request. req: {method, url (path and query as sent), rawHeaders, payloadHash
// (optional: otherwise x-amz-content-sha256)}; secretFor(accessKeyId) -> secret or undefined.
// Returns {ok: true, accessKeyId} or {ok: false, code, message, canonicalRequest, stringToSign}.
function verify(req, secretFor) {
  const auth = parseAuthorization(headerValue(req.rawHeaders, 'authorization'));
  if (!auth) {
    return { ok: false, code: 'AuthorizationHeaderMalformed',
             message: 'The authorization header is malformed.' };
  }
  const secret = secretFor(auth.accessKeyId);
  if (secret === undefined) {
    return { ok: false, code: 'InvalidAccessKeyId',
             message: 'The AWS Access Key Id you provided does not exist in our records.',
             accessKeyId: auth.accessKeyId };
  }
  const amzDate = headerValue(req.rawHeaders, 'x-amz-date') || '';
  const q = req.url.indexOf('?');
  const rawPath = q < 0 ? req.url : req.url.slice(0, q);
  const rawQuery = q < 0 ? '' : req.url.slice(q + 1);
  const headers = canonicalHeaders(req.rawHeaders, auth.signedHeaders);
  const payloadHash = req.payloadHash !== undefined ? req.payloadHash
    : headerValue(req.rawHeaders, 'x-amz-content-sha256');
  const fail = (code, message, extra) => ({ ok: false, code, message,
                                           accessKeyId: auth.accessKeyId, ...extra });
  if (!auth.signedHeaders.includes('host')) {
    return fail('AccessDenied', 'The host header must be signed.');
  }
  if (headers === null) {
    return fail('AccessDenied', 'A header listed in SignedHeaders is missing.');
  }
  if (payloadHash === undefined) {
    return fail('InvalidRequest', 'Missing required header for this request: x-amz-content-sha256');
  }
  if (!amzDate.startsWith(auth.date)) {
    return fail('AuthorizationHeaderMalformed',
                `The credential date ${auth.date} does not match x-amz-date ${amzDate}.`);
  }
  const canonicalRequest = [
    req.method,
    uriEncode(rawPath, true),
    canonicalQuery(rawQuery),
    headers,
    auth.signedHeaders.join(';'),
    payloadHash,
  ].join('\n');
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, auth.scope,
                        sha256Hex(canonicalRequest)].join('\n');
  let key = hmac('AWS4' + secret, auth.date);
  key = hmac(key, auth.region);
  key = hmac(key, auth.service);
  key = hmac(key, 'aws4_request');
  const expected = crypto.createHmac('sha256', key).update(stringToSign, 'utf8').digest('hex');
  if (expected !== auth.signature) {
    return fail('SignatureDoesNotMatch',
                'The request signature we calculated does not match the signature you ' +
                'provided. Check your key and signing method.',
                { canonicalRequest, stringToSign });
  }
  return { ok: true, accessKeyId: auth.accessKeyId, canonicalRequest, stringToSign };
}

module.exports = { verify, uriEncode, canonicalQuery, canonicalHeaders, parseAuthorization };
