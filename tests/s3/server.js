#!/usr/bin/env node
'use strict';
// The S3 server of h5osfs's tests: s3rver 3.7.1 (tests/s3/node_modules, scripts/install-s3rver.sh)
// on 127.0.0.1, path-style buckets, silent, with authentication.
//
//   NODE_OPTIONS=--openssl-legacy-provider node tests/s3/server.js --directory DIR [--port 0]
//
// Prints "PORT <n>" on stdout once it is listening, then nothing. SIGTERM or SIGINT (or stdin
// closing, with --exit-on-stdin-eof) stops it with status 0.
//
// Options:
//   --directory DIR        s3rver's data directory (its own layout; use a fresh one per run)
//   --port N               0 (default) = any free port
//   --address A            default 127.0.0.1
//   --no-verify-sigv4      let s3rver alone check requests: known access key, any signature
//   --anonymous-ok         serve unsigned requests as s3rver does (all of them, writes too);
//                          by default they get 403 AccessDenied, as from a private bucket
//   --public-bucket NAME   unsigned GET and HEAD of bucket NAME and its objects are served
//                          (a public-read bucket); repeatable
//   --keep-alive-ms N      idle keep-alive timeout of the HTTP server (node's default: 5000)
//   --exit-on-stdin-eof    stop when stdin closes (so a killed parent never leaves it behind)
//   --if-match-bare        compare If-Match with the unquoted ETag byte for byte, as Ceph RGW 16
//                          does (a quoted "etag", RFC 7232's form, then never matches)
//   --etag-not-md5         each PutObject's ETag is 32 hex digits that are not the MD5 of its
//                          bytes, new at every put and copy, as AWS S3 answers under SSE-KMS
//                          or SSE-C (each object is encrypted with a key of its own)
// Environment:
//   S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY   one more key pair, beside s3rver's S3RVER/S3RVER
//   S3_TENANTS   more key pairs, each in a tenant of its own (JSON: [{"tenant", "access_key",
//                "secret_key"}]): as with Ceph RGW's tenants, its buckets are not the others'
//                (tenant T's bucket B is stored as bucket "T.B"), so two users of one server
//                can each have a bucket of the same name
//
// Signature V4 verification (on by default) is done here, in front of s3rver, which itself only
// checks that the access key exists: a wrong secret gets 403 SignatureDoesNotMatch with the
// canonical request and string to sign in the error body, as from AWS.

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const path = require('path');

const { AsyncLocalStorage } = require('async_hooks');

// s3rver's listing walks the bucket's directory (utils.walk: readdir, then a stat of each
// name) and answers 500 when a name vanishes in between: the temporary file of a PUT below
// renamed over its object, or a file of an object being deleted. S3 lists what exists. The
// walk is replaced before s3rver's store takes it (it destructures it when first loaded).
const s3rverUtils = require('s3rver/lib/utils');
function* walkWhatExists(dir, recurseFilter) {
  let names;
  try {
    names = fs.readdirSync(dir);
  } catch (err) {
    if (err.code === 'ENOENT') return;
    throw err;
  }
  for (const filename of names) {
    const filePath = path.posix.join(dir, filename);
    let stats;
    try {
      stats = fs.statSync(filePath);
    } catch (err) {
      if (err.code === 'ENOENT') continue;
      throw err;
    }
    if (!stats.isDirectory()) {
      yield filePath;
    } else if (!recurseFilter || recurseFilter(filePath)) {
      yield* walkWhatExists(filePath, recurseFilter);
    }
  }
}
s3rverUtils.walk = walkWhatExists;

const S3rver = require('s3rver');
const S3Error = require('s3rver/lib/models/error');
const AWSAccount = require('s3rver/lib/models/account');
const FilesystemStore = require('s3rver/lib/stores/filesystem');
const S3Object = require('s3rver/lib/models/object');
const sigv4 = require('./sigv4');

function usage(msg) {
  process.stderr.write(`server.js: ${msg}\n`);
  process.exit(2);
}

const opts = {
  port: 0, address: '127.0.0.1', directory: null, verify: true, anonymousOk: false,
  publicBuckets: [], keepAliveMs: null, exitOnStdinEof: false, ifMatchBare: false,
  etagNotMd5: false,
};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const value = () => {
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    return argv[++i];
  };
  if (a === '--port') opts.port = Number(value());
  else if (a === '--address') opts.address = value();
  else if (a === '--directory') opts.directory = path.resolve(value());
  else if (a === '--no-verify-sigv4') opts.verify = false;
  else if (a === '--anonymous-ok') opts.anonymousOk = true;
  else if (a === '--public-bucket') opts.publicBuckets.push(value());
  else if (a === '--keep-alive-ms') opts.keepAliveMs = Number(value());
  else if (a === '--exit-on-stdin-eof') opts.exitOnStdinEof = true;
  else if (a === '--if-match-bare') opts.ifMatchBare = true;
  else if (a === '--etag-not-md5') opts.etagNotMd5 = true;
  else usage(`unknown argument ${a}`);
}
if (!opts.directory) usage('--directory is required');
fs.mkdirSync(opts.directory, { recursive: true });
if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) usage('bad --port');

// s3rver's continuation tokens are DES-encrypted; OpenSSL 3 (Node >= 17) only has DES in its
// legacy provider. Without it every paginated listing answers 500: refuse to start instead.
try {
  crypto.createCipheriv('des', Buffer.alloc(8), Buffer.alloc(8));
} catch (err) {
  usage('DES is unavailable (s3rver needs it for listings): ' +
        'run with NODE_OPTIONS=--openssl-legacy-provider');
}

// One queue per object path: a GET takes its size and ETag from stat and the .md5 file, then
// opens the object by name. A PUT renaming new bytes in between would hand out the new bytes
// cut to the old length, under the old ETag. A GET (up to its open), a listing's look at one
// key, a DELETE, and the rename plus metadata write of a PUT run one after the other on the
// same key; the open file descriptor then keeps the bytes the GET described.
const keyQueues = new Map();
async function inKeyOrder(objectPath, step) {
  const before = keyQueues.get(objectPath) || Promise.resolve();
  let done;
  const mine = new Promise((resolve) => { done = resolve; });
  const tail = before.then(() => mine);
  keyQueues.set(objectPath, tail);
  await before;
  try {
    return await step();
  } finally {
    done();
    if (keyQueues.get(objectPath) === tail) keyQueues.delete(objectPath);
  }
}

const unordered = {
  getObject: FilesystemStore.prototype.getObject,
  getMetadata: FilesystemStore.prototype.getMetadata,
  deleteObject: FilesystemStore.prototype.deleteObject,
};
FilesystemStore.prototype.getMetadata = function getMetadataInKeyOrder(bucket, key) {
  return inKeyOrder(this.getResourcePath(bucket, key, 'object'),
                    () => unordered.getMetadata.call(this, bucket, key));
};
FilesystemStore.prototype.getObject = function getObjectInKeyOrder(bucket, key, options) {
  // s3rver's getObject calls this.getMetadata: inside the queue it must be the unqueued one.
  const store = Object.create(this, { getMetadata: { value: unordered.getMetadata } });
  return inKeyOrder(this.getResourcePath(bucket, key, 'object'),
                    () => unordered.getObject.call(store, bucket, key, options));
};
FilesystemStore.prototype.deleteObject = function deleteObjectInKeyOrder(bucket, key) {
  return inKeyOrder(this.getResourcePath(bucket, key, 'object'),
                    () => unordered.deleteObject.call(this, bucket, key));
};

// s3rver writes the .md5 and metadata files in place too: a listing reading one mid-write
// parses half a JSON document and answers 500.
async function writeFileAtomically(filePath, data) {
  const partPath = `${filePath}.put-${process.pid}-${crypto.randomBytes(6).toString('hex')}`;
  try {
    await fs.promises.writeFile(partPath, data);
    await fs.promises.rename(partPath, filePath);
  } catch (err) {
    await fs.promises.rm(partPath, { force: true });
    throw err;
  }
}
FilesystemStore.prototype.putMetadata = async function putMetadataAtomically(
  bucket, key, metadata, md5) {
  const kept = Object.fromEntries(Object.entries(metadata).filter(
    ([name]) => S3Object.ALLOWED_METADATA.includes(name) || name.startsWith('x-amz-meta-')));
  if (md5) await writeFileAtomically(this.getResourcePath(bucket, key, 'object.md5'), md5);
  await writeFileAtomically(this.getResourcePath(bucket, key, 'metadata.json'),
                            JSON.stringify(kept, null, 2));
};

// Conditional writes, as AWS S3 has them since 2024 (s3rver ignores them): a PutObject with
// If-None-Match: * fails with 412 where the key exists, one with If-Match: "etag" with 412
// where the object's ETag differs and 404 where there is none. The request's headers reach
// putObject through an AsyncLocalStorage; the check and the rename run in the key's turn.
const requestHeaders = new AsyncLocalStorage();

async function currentEtag(objectPath) {
  try {
    await fs.promises.stat(objectPath);
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
  const md5Path = objectPath.replace(/object$/, 'object.md5');
  return (await fs.promises.readFile(md5Path)).toString();
}

async function checkPutConditions(objectPath) {
  const headers = requestHeaders.getStore();
  if (!headers || (!headers['if-match'] && !headers['if-none-match'])) return;
  const etag = await currentEtag(objectPath);
  const noneMatch = headers['if-none-match'];
  if (noneMatch !== undefined && noneMatch.trim() === '*' && etag !== null) {
    throw new S3Error('PreconditionFailed',
                      'At least one of the pre-conditions you specified did not hold');
  }
  const match = headers['if-match'];
  if (match === undefined) return;
  if (etag === null) throw new S3Error('NoSuchKey', 'The specified key does not exist.');
  const given = opts.ifMatchBare ? match : match.trim().replace(/^"|"$/g, '');
  if (given !== etag) {
    throw new S3Error('PreconditionFailed',
                      'At least one of the pre-conditions you specified did not hold');
  }
}

// s3rver writes an object's file in place, so a GET during a PUT of the same key reads a
// part of the new bytes (a torn .domain.json); S3 replaces objects atomically. Write the bytes
// next to the object (a name s3rver's listing ignores: it lists only "<name>._S3rver_object")
// and rename them over it.
FilesystemStore.prototype.putObject = async function putObjectAtomically(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  const partPath = `${objectPath}.put-${process.pid}-${crypto.randomBytes(6).toString('hex')}`;
  await fs.promises.mkdir(path.dirname(objectPath), { recursive: true });
  const md5 = crypto.createHash('md5');
  let size = 0;
  try {
    if (Buffer.isBuffer(object.content)) {
      await fs.promises.writeFile(partPath, object.content);
      md5.update(object.content);
      size = object.content.length;
    } else {
      await new Promise((resolve, reject) => {
        const out = fs.createWriteStream(partPath);
        object.content.on('data', (chunk) => { md5.update(chunk); size += chunk.length; });
        object.content.on('error', reject);
        out.on('error', reject);
        out.on('finish', resolve);
        object.content.pipe(out);
      });
    }
  } catch (err) {
    await fs.promises.rm(partPath, { force: true });
    throw err;
  }
  let digest = md5.digest('hex');
  if (opts.etagNotMd5) {
    digest = crypto.createHash('md5').update(digest).update(crypto.randomBytes(16))
      .digest('hex');
  }
  await inKeyOrder(objectPath, async () => {
    try {
      await checkPutConditions(objectPath);
      await fs.promises.rename(partPath, objectPath);
    } catch (err) {
      await fs.promises.rm(partPath, { force: true });
      throw err;
    }
    await this.putMetadata(object.bucket, object.key, object.metadata, digest);
  });
  return { size, md5: digest };
};

// --etag-not-md5: a copy is a new object, with an ETag of its own (its put got one above).
const copyKeepingEtag = FilesystemStore.prototype.copyObject;
FilesystemStore.prototype.copyObject = async function copyObjectNewEtag(
  srcBucket, srcKey, destBucket, destKey, replacementMetadata) {
  const metadata = await copyKeepingEtag.call(this, srcBucket, srcKey, destBucket, destKey,
                                              replacementMetadata);
  if (!opts.etagNotMd5) return metadata;
  const md5Path = this.getResourcePath(destBucket, destKey, 'object.md5');
  await writeFileAtomically(md5Path, crypto.randomBytes(16).toString('hex'));
  return this.getMetadata(destBucket, destKey);
};

const extraKey = process.env.S3_ACCESS_KEY_ID;
const extraSecret = process.env.S3_SECRET_ACCESS_KEY;
if (extraKey || extraSecret) {
  if (!extraKey || !extraSecret) usage('set both S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY');
  // s3rver 3.7.1 has no option for credentials: its account registry is the API
  // (lib/models/account.js). The extra key belongs to the same dummy account as S3RVER.
  AWSAccount.DUMMY_ACCOUNT.createKeyPair(extraKey, extraSecret);
}

// A tenant's requests go to its own buckets: the path's bucket is renamed once the signature
// (of the path the client sent) has been checked. ListBuckets ("/") is left as it is.
const tenantOf = new Map();
for (const t of JSON.parse(process.env.S3_TENANTS || '[]')) {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(t.tenant || '') || !t.access_key || !t.secret_key) {
    usage('S3_TENANTS: each needs tenant (lowercase letters, digits, -), access_key, secret_key');
  }
  AWSAccount.DUMMY_ACCOUNT.createKeyPair(t.access_key, t.secret_key);
  tenantOf.set(t.access_key, t.tenant);
}

function inTenant(req) {
  const auth = sigv4.parseAuthorization(req.headers.authorization);
  const tenant = auth && tenantOf.get(auth.accessKeyId);
  const m = tenant && /^\/([^/?]+)(.*)$/s.exec(req.url);
  if (m) req.url = `/${tenant}.${m[1]}${m[2]}`;
  // CopyObject names its source bucket in a header: the tenant's too (after the signature,
  // which covers the header as the client sent it, was checked)
  const src = tenant && req.headers['x-amz-copy-source'];
  const s = src && /^(\/?)([^/]+)(\/.*)$/s.exec(src);
  if (s) req.headers['x-amz-copy-source'] = `${s[1]}${tenant}.${s[2]}${s[3]}`;
}

function secretFor(accessKeyId) {
  const account = AWSAccount.registry.get(accessKeyId);
  return account ? account.accessKeys.get(accessKeyId) : undefined;
}

function xmlEscape(s) {
  return String(s).replace(/[&<>"']/g, c => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' }[c]));
}

function sendError(req, res, status, code, message, extra) {
  let body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error>' +
    `<Code>${code}</Code><Message>${xmlEscape(message)}</Message>`;
  for (const [name, value] of Object.entries(extra || {})) {
    if (value !== undefined) body += `<${name}>${xmlEscape(value)}</${name}>`;
  }
  body += `<RequestId>${crypto.randomBytes(8).toString('hex').toUpperCase()}</RequestId></Error>`;
  const buf = Buffer.from(body, 'utf8');
  // The request body (if any) is drained so that the connection stays usable.
  req.resume();
  res.writeHead(status, { 'Content-Type': 'application/xml', 'Content-Length': buf.length });
  res.end(buf);
}

// Multipart uploads: s3rver 3.7.1 has no AbortMultipartUpload (DELETE ?uploadId: 405), no
// ListMultipartUploads (GET ?uploads: 501) and no UploadPartCopy (PUT ?partNumber&uploadId with
// x-amz-copy-source: 501), and takes parts for an upload it does not know (making it anew,
// with no key). They are served here from s3rver's own layout, as S3 does: an upload is the
// directory <bucket>/._S3rver_uploads/<id>, holding the file "key" and one file per part (its
// number, beside <number>.md5); UploadPart, UploadPartCopy and CompleteMultipartUpload of an
// unknown upload get 404 NoSuchUpload. ListMultipartUploads honours prefix= (one page).
const uploadStore = new FilesystemStore(opts.directory);

function uploadsDir(bucket) {
  return uploadStore.getResourcePath(bucket, undefined, 'uploads');
}

function parseTarget(req) {
  const [rawPath, rawQuery = ''] = req.url.split('?');
  const segs = rawPath.split('/');
  let bucket = segs[1] || '';
  let key = segs.slice(2).join('/');
  try {
    bucket = decodeURIComponent(bucket);
    key = decodeURIComponent(key);
  } catch (err) { /* keep them raw */ }
  return { bucket, key, query: new URLSearchParams(rawQuery) };
}

function listUploads(res, bucket, prefix) {
  let body = '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult ' +
    `xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>${xmlEscape(bucket)}</Bucket>` +
    `<Prefix>${xmlEscape(prefix)}</Prefix><IsTruncated>false</IsTruncated>`;
  let ids = [];
  try {
    ids = fs.readdirSync(uploadsDir(bucket)).sort();
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
  for (const id of ids) {
    let key = '';
    try {
      key = fs.readFileSync(path.join(uploadsDir(bucket), id, 'key'), 'utf8');
    } catch (err) { /* an upload without its key file: listed with an empty key */ }
    if (!key.startsWith(prefix)) continue;
    body += `<Upload><Key>${xmlEscape(key)}</Key><UploadId>${xmlEscape(id)}</UploadId></Upload>`;
  }
  body += '</ListMultipartUploadsResult>';
  const buf = Buffer.from(body, 'utf8');
  res.writeHead(200, { 'Content-Type': 'application/xml', 'Content-Length': buf.length });
  res.end(buf);
}

// x-amz-copy-source "/bucket/key" (URI-encoded; the leading slash optional) -> [bucket, key]
function parseCopySource(header) {
  const m = /^\/?([^/]+)\/(.+)$/s.exec(header.split('?')[0]);
  if (!m) return null;
  try {
    return [decodeURIComponent(m[1]), decodeURIComponent(m[2])];
  } catch (err) {
    return null;
  }
}

function copyPartResult(res, md5) {
  const buf = Buffer.from('<?xml version="1.0" encoding="UTF-8"?>\n<CopyPartResult ' +
    'xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
    `<LastModified>${new Date().toISOString()}</LastModified><ETag>"${md5}"</ETag>` +
    '</CopyPartResult>', 'utf8');
  res.writeHead(200, { 'Content-Type': 'application/xml', 'Content-Length': buf.length });
  res.end(buf);
}

// UploadPartCopy: bytes first-last (x-amz-copy-source-range; the whole object without it) of
// the source become part partNumber, as AWS answers it: the ETag in a CopyPartResult body.
async function copyPart(req, res, uploadDir, query) {
  req.resume();
  const number = Number(query.get('partNumber'));
  if (!Number.isInteger(number) || number < 1 || number > 10000) {
    return sendError(req, res, 400, 'InvalidArgument',
                     'Part number must be an integer between 1 and 10000, inclusive');
  }
  const source = parseCopySource(req.headers['x-amz-copy-source']);
  if (!source) return sendError(req, res, 400, 'InvalidArgument', 'Invalid copy source');
  const objectPath = uploadStore.getResourcePath(source[0], source[1], 'object');
  let fd;
  try {
    fd = await inKeyOrder(objectPath, () => fs.promises.open(objectPath, 'r'));
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
    return sendError(req, res, 404, 'NoSuchKey', 'The specified key does not exist.',
                     { Key: source[1] });
  }
  try {
    const size = (await fd.stat()).size;
    const range = req.headers['x-amz-copy-source-range'];
    let first = 0;
    let last = size - 1;
    if (range !== undefined) {
      const m = /^bytes=(\d+)-(\d+)$/.exec(range.trim());
      if (!m || Number(m[1]) > Number(m[2]) || Number(m[2]) >= size) {
        return sendError(req, res, 400, 'InvalidArgument',
                         `Range specified is not valid for source object of size: ${size}`);
      }
      [first, last] = [Number(m[1]), Number(m[2])];
    }
    const partPath = path.join(uploadDir, String(number));
    const md5 = crypto.createHash('md5');
    const out = fs.createWriteStream(`${partPath}.put-${crypto.randomBytes(6).toString('hex')}`);
    await new Promise((resolve, reject) => {
      const from = fs.createReadStream(null, { fd: fd.fd, start: first, end: last,
                                                autoClose: false });
      from.on('data', (chunk) => md5.update(chunk));
      from.on('error', reject);
      out.on('error', reject);
      out.on('finish', resolve);
      from.pipe(out);
    });
    const digest = md5.digest('hex');
    await fs.promises.writeFile(`${partPath}.md5`, digest);
    await fs.promises.rename(out.path, partPath);
    return copyPartResult(res, digest);
  } finally {
    await fd.close();
  }
}

// true when the request was answered here.
function serveMultipart(req, res) {
  const { bucket, key, query } = parseTarget(req);
  if (!bucket || !fs.existsSync(path.join(opts.directory, bucket))) return false;
  if (req.method === 'GET' && !key && query.has('uploads')) {
    listUploads(res, bucket, query.get('prefix') || '');
    return true;
  }
  const id = query.get('uploadId');
  if (!key || id === null) return false;
  const dir = path.join(uploadsDir(bucket), path.basename(id));
  if (!fs.existsSync(dir)) {
    sendError(req, res, 404, 'NoSuchUpload', 'The specified upload does not exist.',
              { UploadId: id });
    return true;
  }
  if (req.method === 'PUT' && req.headers['x-amz-copy-source'] !== undefined) {
    copyPart(req, res, dir, query).catch((err) => {
      sendError(req, res, 500, 'InternalError', `UploadPartCopy failed: ${err.message}`);
    });
    return true;
  }
  if (req.method !== 'DELETE') return false;
  fs.rmSync(dir, { recursive: true, force: true });
  req.resume();
  res.writeHead(204);
  res.end();
  return true;
}

const s3rver = new S3rver({
  directory: opts.directory,
  silent: true,
  vhostBuckets: false, // path-style only: http://127.0.0.1:PORT/BUCKET/KEY
  resetOnClose: false,
});
const handler = s3rver.callback();

const server = http.createServer((req, res) => {
  const hasAuthHeader = req.headers.authorization !== undefined;
  const hasQueryAuth = /[?&](X-Amz-Algorithm|Signature)=/.test(req.url);
  if (!hasAuthHeader && !hasQueryAuth) {
    let bucket = req.url.split('?')[0].split('/')[1] || '';
    try { bucket = decodeURIComponent(bucket); } catch (err) { /* keep it raw */ }
    const publicRead = (req.method === 'GET' || req.method === 'HEAD') &&
      opts.publicBuckets.includes(bucket);
    if (!opts.anonymousOk && !publicRead) {
      return sendError(req, res, 403, 'AccessDenied', 'Access Denied');
    }
  } else if (opts.verify && hasAuthHeader &&
             /^AWS4-HMAC-SHA256\s/.test(req.headers.authorization)) {
    const r = sigv4.verify({ method: req.method, url: req.url, rawHeaders: req.rawHeaders },
                           secretFor);
    if (!r.ok && r.code !== 'InvalidRequest') {
      // InvalidRequest (no x-amz-content-sha256) is left to s3rver, which answers 400.
      const status = r.code === 'AuthorizationHeaderMalformed' ? 400 : 403;
      return sendError(req, res, status, r.code, r.message, {
        AWSAccessKeyId: r.accessKeyId,
        StringToSign: r.stringToSign,
        CanonicalRequest: r.canonicalRequest,
      });
    }
  }
  if (hasAuthHeader) inTenant(req);
  if (serveMultipart(req, res)) return undefined;
  return requestHeaders.run(req.headers, () => handler(req, res));
});
if (opts.keepAliveMs !== null) server.keepAliveTimeout = opts.keepAliveMs;

function stop() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
if (opts.exitOnStdinEof) {
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}

server.on('error', err => usage(`cannot listen: ${err.message}`));
server.listen(opts.port, opts.address, () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});
