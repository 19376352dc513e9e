#!/usr/bin/python3
"""An HTTP/1.1 proxy that injects faults between an S3 client and an S3 server.

    tests/s3/fault_proxy.py --upstream http://127.0.0.1:SERVER_PORT [--port 0] [--rules F.json]

It listens on 127.0.0.1 (port 0 = any free port), prints "PORT <n>" on stdout once it listens,
and forwards every request to the upstream server. Clients use it as their endpoint
(http://127.0.0.1:<n>): it is a reverse proxy, requests keep their path and Host header, so
Signature V4 signatures stay valid. Each client connection gets its own upstream connection;
both are kept alive (HTTP/1.1 keep-alive, Content-Length and chunked bodies, Expect:
100-continue, HEAD). Standard library only; stops on SIGTERM/SIGINT or when stdin closes
(with --exit-on-stdin-eof).

Control endpoint, on the same port under /__fault__/ (S3 bucket names cannot hold '_'),
JSON in and out; control requests are not counted and never faulted:
    POST   /__fault__/rules       a rule object or a list of them -> the rules with their ids
    GET    /__fault__/rules       every rule with its counters (seen, fired)
    DELETE /__fault__/rules/ID    removes one rule
    GET    /__fault__/stats       {"connections", "requests", "upstream_connections",
                                   "faults": {action: n}, "rules": [...]}
    GET    /__fault__/log         every fault injected: [{"n", "rule", "action", "method",
                                   "path", "time"}]
    POST   /__fault__/clear       removes every rule, zeroes the counters, empties the log

A rule (every field optional but "action"):
    {"id": "name",                 default r1, r2, ...
     "method": "GET",              only this method
     "key": "sample1.h5/",         only requests whose decoded path holds this substring
     "query": "list-type=2",       only requests whose raw query string holds this substring
     "every": 3,                   fire on the 3rd, 6th, ... matching request
     "skip": 1,                    let the first N matching requests pass
     "times": 2,                   fire at most N times (null: always; default 1)
     "action": "error" | "slowdown" | "signature" | "delay" | "drop" | "reset" |
               "reset_in_body" | "drop_after_headers" | "truncate" | "stall" |
               "throttle" | "stall_in_body",
     "status": 500, "code": "InternalError", "message": "...",   for "error"
     "delay": 5.0,                 seconds, for "delay" (before forwarding) and "stall"
     "bytes": 100,                 body bytes sent before "truncate" closes / "stall" waits,
                                   request body bytes read before "reset_in_body" resets or
                                   "stall_in_body" waits (default: half of the body)
     "rate": 65536,                request body bytes a second "throttle" reads
     "forward": false,             error/slowdown/signature/drop/reset: send the request to the
                                   server first (it is executed, the answer is lost)
     "close": false}               error/slowdown/signature: close the connection after the
                                   answer (default: keep it alive)
Actions: error = an S3 XML error (default 500 InternalError); slowdown = 503 SlowDown;
signature = 403 SignatureDoesNotMatch; delay = wait, then forward (the answer comes late: past
a client's timeout); drop = close the connection without an answer; reset = the same with a TCP
RST; reset_in_body = a TCP RST while the client is still sending the request body (after
"bytes" of it; nothing reaches the server); drop_after_headers = forward, send the status line and headers, close; truncate = forward,
send the headers (full Content-Length) and only part of the body, close; stall = forward, send
part of the body, wait, then send the rest; throttle = read the request body at "rate" bytes a
second (a slow link that never stalls), then forward; stall_in_body = read "bytes" of the
request body, read nothing for "delay" seconds, then the rest, and forward. For these two the
connection's receive buffers are made small, so that the client's sending follows the reading.
Each rule counts "seen" (requests matching method/key/query) and "fired". The first rule that
fires on a request decides; every matching rule still counts the request as seen.
"""
import argparse
import asyncio
import json
import signal
import socket
import struct
import sys
import time
import urllib.parse

CONTROL = "/__fault__/"
ACTIONS = {"error", "slowdown", "signature", "delay", "drop", "reset", "reset_in_body",
           "drop_after_headers", "truncate", "stall", "throttle", "stall_in_body"}
RULE_FIELDS = {"id", "method", "key", "query", "every", "skip", "times", "action", "status",
               "code", "message", "delay", "bytes", "forward", "close", "rate"}
MAX_HEAD = 1 << 20
PACED_BUFFER = 256 << 10     # bytes a paced read lets the socket and the reader hold


class BadRequest(Exception):
    pass


class Rule:
    def __init__(self, spec, default_id):
        unknown = set(spec) - RULE_FIELDS
        if unknown:
            raise ValueError(f"unknown rule fields: {sorted(unknown)}")
        if spec.get("action") not in ACTIONS:
            raise ValueError(f"action must be one of {sorted(ACTIONS)}")
        self.spec = dict(spec)
        self.id = str(spec.get("id") or default_id)
        self.spec["id"] = self.id
        self.method = spec.get("method")
        self.key = spec.get("key")
        self.query = spec.get("query")
        self.every = int(spec.get("every") or 1)
        self.skip = int(spec.get("skip") or 0)
        self.times = spec.get("times", 1)
        if self.times is not None:
            self.times = int(self.times)
        self.action = spec["action"]
        self.seen = 0
        self.fired = 0

    def matches(self, method, path, query):
        return ((self.method is None or self.method.upper() == method)
                and (self.key is None or self.key in path)
                and (self.query is None or self.query in query))

    def decide(self, may_fire=True):
        """Called for a matching request: counts it, says whether the rule fires (never when
        not may_fire: an earlier rule fired on this request)."""
        self.seen += 1
        if not may_fire:
            return False
        n = self.seen - self.skip
        if n <= 0 or n % self.every != 0:
            return False
        if self.times is not None and self.fired >= self.times:
            return False
        self.fired += 1
        return True

    def as_dict(self):
        return {**self.spec, "seen": self.seen, "fired": self.fired}


def s3_error_body(code, message):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message><RequestId>FAULTPROXY</RequestId></Error>").encode()


ERRORS = {
    "error": (500, "InternalError", "We encountered an internal error. Please try again."),
    "slowdown": (503, "SlowDown", "Please reduce your request rate."),
    "signature": (403, "SignatureDoesNotMatch",
                  "The request signature we calculated does not match the signature you "
                  "provided. Check your key and signing method."),
}
REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
           429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
           503: "Service Unavailable", 504: "Gateway Timeout"}


def parse_head(head):
    """head: bytes up to and including the blank line -> (start line, [(name, value)])."""
    lines = head.decode("latin-1").split("\r\n")
    start = lines[0]
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        if line[0] in " \t" and headers:  # obsolete folding
            headers[-1] = (headers[-1][0], headers[-1][1] + " " + line.strip())
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest(f"bad header line {line!r}")
        headers.append((name.strip(), value.strip()))
    return start, headers


def header(headers, name):
    name = name.lower()
    for n, v in headers:
        if n.lower() == name:
            return v
    return None


def has_token(headers, name, token):
    v = header(headers, name)
    return v is not None and token in [t.strip().lower() for t in v.split(",")]


async def read_chunked(reader):
    """Reads a chunked body; returns its raw bytes (framing included)."""
    out = bytearray()
    while True:
        line = await reader.readuntil(b"\r\n")
        out += line
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while True:  # trailers up to the blank line
                t = await reader.readuntil(b"\r\n")
                out += t
                if t == b"\r\n":
                    return bytes(out)
        out += await reader.readexactly(size + 2)


async def relay_chunked(reader, send):
    """Relays a chunked body piece by piece; send(bytes) is awaited for each piece."""
    while True:
        line = await reader.readuntil(b"\r\n")
        await send(line)
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while True:
                t = await reader.readuntil(b"\r\n")
                await send(t)
                if t == b"\r\n":
                    return
        remaining = size + 2
        while remaining:
            piece = await reader.read(min(remaining, 1 << 16))
            if not piece:
                raise asyncio.IncompleteReadError(b"", remaining)
            remaining -= len(piece)
            await send(piece)


async def read_paced(creader, csock, length, rate=None, pause_at=None, delay=0.0):
    """length bytes of a request body, read at rate bytes a second and/or with a pause of
    delay seconds after pause_at bytes. The socket's receive buffer and the reader's are made
    small first: the client can then send only as fast as this reads (else the kernel and
    asyncio would take megabytes at once and the client would see its upload done)."""
    if csock is not None:
        csock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, PACED_BUFFER)
    limit = creader._limit            # asyncio pauses the socket at twice this much buffered
    creader._limit = PACED_BUFFER // 2
    out = bytearray()
    start = time.monotonic()
    try:
        while len(out) < length:
            if pause_at is not None and len(out) >= pause_at:
                await asyncio.sleep(delay)
                pause_at = None
            want = length - len(out)
            if rate:
                want = min(want, max(1, int(rate) // 20))
            if pause_at is not None:
                want = min(want, pause_at - len(out))
            piece = await creader.read(want)
            if not piece:
                raise asyncio.IncompleteReadError(bytes(out), length)
            out += piece
            if rate:
                ahead = start + len(out) / float(rate) - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)
    finally:
        creader._limit = limit
    return bytes(out)


class ClientGone(Exception):
    """The client connection failed while we wrote to it."""


class Proxy:
    def __init__(self, upstream, verbose=False):
        u = urllib.parse.urlsplit(upstream)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"upstream must be http://host:port: {upstream}")
        self.up_host, self.up_port = u.hostname, u.port or 80
        self.verbose = verbose
        self.rules = []
        self.next_rule = 1
        self.clear()

    def clear(self):
        self.rules.clear()
        self.stats = {"connections": 0, "requests": 0, "upstream_connections": 0,
                      "faults": {}}
        self.log = []

    def add_rules(self, spec):
        specs = spec if isinstance(spec, list) else [spec]
        rules = []
        for s in specs:
            if not isinstance(s, dict):
                raise ValueError("a rule is a JSON object")
            rules.append(Rule(s, f"r{self.next_rule}"))
            self.next_rule += 1
        ids = {r.id for r in self.rules}
        for r in rules:
            if r.id in ids:
                raise ValueError(f"rule id {r.id} exists")
            ids.add(r.id)
        self.rules.extend(rules)
        return [r.as_dict() for r in rules]

    def pick_rule(self, method, path, query):
        chosen = None
        for r in self.rules:
            if r.matches(method, path, query) and r.decide(may_fire=chosen is None):
                chosen = r
        return chosen

    def record(self, rule, method, target):
        self.stats["faults"][rule.action] = self.stats["faults"].get(rule.action, 0) + 1
        event = {"n": len(self.log) + 1, "rule": rule.id, "action": rule.action,
                 "method": method, "path": target, "time": time.time()}
        self.log.append(event)
        if self.verbose:
            print(f"fault_proxy: {rule.id} {rule.action} {method} {target}", file=sys.stderr,
                  flush=True)

    # ---- control endpoint ----

    def control(self, method, path, body):
        """-> (status, JSON-able object)"""
        name = path[len(CONTROL):].strip("/")
        try:
            if name == "rules" and method == "GET":
                return 200, [r.as_dict() for r in self.rules]
            if name == "rules" and method == "POST":
                return 200, self.add_rules(json.loads(body or b"null"))
            if name.startswith("rules/") and method == "DELETE":
                rid = name[len("rules/"):]
                before = len(self.rules)
                self.rules[:] = [r for r in self.rules if r.id != rid]
                return (200, {"deleted": rid}) if len(self.rules) < before else (
                    404, {"error": f"no rule {rid}"})
            if name == "stats" and method == "GET":
                return 200, {**self.stats, "faults": dict(self.stats["faults"]),
                             "rules": [r.as_dict() for r in self.rules]}
            if name == "log" and method == "GET":
                return 200, self.log
            if name == "clear" and method == "POST":
                self.clear()
                return 200, {"cleared": True}
        except (ValueError, TypeError) as e:
            return 400, {"error": str(e)}
        return 404, {"error": f"no control {method} {path}"}

    # ---- connections ----

    async def handle(self, creader, cwriter):
        sock = cwriter.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = {"up": None, "counted": False}
        try:
            while True:
                keep = await self.one_request(creader, cwriter, conn)
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ClientGone, BadRequest,
                asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            self.close_upstream(conn)
            if not cwriter.is_closing():
                cwriter.close()

    def close_upstream(self, conn):
        if conn["up"] is not None:
            conn["up"][1].close()
            conn["up"] = None

    async def open_upstream(self, conn):
        r, w = await asyncio.open_connection(self.up_host, self.up_port, limit=MAX_HEAD)
        w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stats["upstream_connections"] += 1
        conn["up"] = (r, w)

    async def one_request(self, creader, cwriter, conn):
        """Serves one request of a client connection; returns whether to keep it open."""
        try:
            head = await creader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if e.partial.strip():
                raise
            return False  # the client closed between requests
        start, headers = parse_head(head)
        parts = start.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(start)
        method, target, version = parts
        path, _, query = target.partition("?")
        dpath = urllib.parse.unquote(path)
        client_close = (has_token(headers, "connection", "close") or
                        (version == "HTTP/1.0" and
                         not has_token(headers, "connection", "keep-alive")))

        te = header(headers, "transfer-encoding")
        cl = header(headers, "content-length")
        has_body = (te is not None and "chunked" in te.lower()) or (cl is not None and
                                                                    int(cl) > 0)
        if has_body and has_token(headers, "expect", "100-continue"):
            await self.send(cwriter, b"HTTP/1.1 100 Continue\r\n\r\n")

        rule = None
        if not path.startswith(CONTROL):
            if not conn["counted"]:
                conn["counted"] = True
                self.stats["connections"] += 1
            self.stats["requests"] += 1
            rule = self.pick_rule(method, dpath, query)
            if rule:
                self.record(rule, method, target)
        if rule and rule.action == "reset_in_body":
            # Part of the body, then a reset: the client is cut off while it sends.
            length = int(cl) if cl is not None else 2
            await creader.readexactly(int(rule.spec.get("bytes", length // 2)))
            self.reset(cwriter)
            return False

        # The request body, read whole (framing kept as received).
        if te is not None and "chunked" in te.lower():
            body = await read_chunked(creader)
        elif cl is not None and rule and rule.action in ("throttle", "stall_in_body"):
            length = int(cl)
            if rule.action == "throttle":
                body = await read_paced(creader, cwriter.get_extra_info("socket"), length,
                                        rate=float(rule.spec.get("rate", 65536)))
            else:
                body = await read_paced(creader, cwriter.get_extra_info("socket"), length,
                                        pause_at=int(rule.spec.get("bytes", length // 2)),
                                        delay=float(rule.spec.get("delay", 5.0)))
        elif cl is not None:
            body = await creader.readexactly(int(cl))
        else:
            body = b""

        if path.startswith(CONTROL):
            status, obj = self.control(method, path, body)
            data = json.dumps(obj, indent=1).encode()
            await self.send(cwriter, (
                f"HTTP/1.1 {status} {REASONS.get(status, 'X')}\r\nContent-Type: "
                f"application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data)
            return not client_close

        action = rule.action if rule else None

        if action in ("error", "slowdown", "signature", "drop", "reset"):
            if rule.spec.get("forward"):
                # The server executes the request; its answer is thrown away.
                await self.exchange(conn, method, head, body, None)
            if action in ("drop", "reset"):
                if action == "reset":
                    self.reset(cwriter)
                return False
            status, code, message = ERRORS[action]
            if action == "error":
                status = int(rule.spec.get("status", status))
                code = rule.spec.get("code", code)
                message = rule.spec.get("message", message)
            data = s3_error_body(code, message) if method != "HEAD" else b""
            close = bool(rule.spec.get("close")) or client_close
            await self.send(cwriter, (
                f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
                f"Content-Type: application/xml\r\n"
                f"Content-Length: {len(s3_error_body(code, message))}\r\n"
                f"x-amz-request-id: FAULTPROXY\r\n"
                + ("Connection: close\r\n" if close else "") + "\r\n").encode() + data)
            return not close

        if action == "delay":
            await asyncio.sleep(float(rule.spec.get("delay", 5.0)))

        keep = await self.exchange(conn, method, head, body, cwriter, rule)
        return keep and not client_close

    def reset(self, cwriter):
        """Closes the client connection with a TCP RST."""
        sock = cwriter.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        cwriter.transport.abort()

    async def send(self, w, data):
        try:
            w.write(data)
            await w.drain()
        except (ConnectionError, RuntimeError) as e:
            raise ClientGone() from e

    async def exchange(self, conn, method, head, body, cwriter, rule=None):
        """Sends the request upstream and relays the answer to cwriter (None: discard it).
        Returns whether both connections can be kept."""
        for attempt in (0, 1):
            reused = conn["up"] is not None
            if conn["up"] is None:
                await self.open_upstream(conn)
            ur, uw = conn["up"]
            try:
                uw.write(head + body)
                await uw.drain()
                rhead = await ur.readuntil(b"\r\n\r\n")
                while rhead[9:10] == b"1":  # 1xx interim answers (100 Continue)
                    rhead = await ur.readuntil(b"\r\n\r\n")
                break
            except (asyncio.IncompleteReadError, ConnectionError) as e:
                self.close_upstream(conn)
                partial = getattr(e, "partial", b"")
                if reused and attempt == 0 and not partial:
                    continue  # the server closed an idle connection: once more, on a new one
                raise
        start, rheaders = parse_head(rhead)
        status = int(start.split(" ")[1])
        up_close = has_token(rheaders, "connection", "close")
        te = header(rheaders, "transfer-encoding")
        cl = header(rheaders, "content-length")
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            framing, length = "none", 0
        elif te is not None and "chunked" in te.lower():
            framing, length = "chunked", None
        elif cl is not None:
            framing, length = "length", int(cl)
        else:
            framing, length = "eof", None
            up_close = True

        action = rule.action if rule else None
        if cwriter is None:
            await self.drain_body(ur, framing, length)
            if up_close:
                self.close_upstream(conn)
            return True

        await self.send(cwriter, rhead)
        if action == "drop_after_headers":
            self.close_upstream(conn)
            return False
        if action in ("truncate", "stall"):
            limit = rule.spec.get("bytes")
            if limit is None:
                limit = (length or 0) // 2
            sent = 0

            async def send_limited(piece):
                nonlocal sent
                if action == "truncate":
                    take = max(0, min(len(piece), limit - sent))
                    if take:
                        await self.send(cwriter, piece[:take])
                    sent += len(piece)
                    return
                if sent < limit <= sent + len(piece):
                    cut = limit - sent
                    await self.send(cwriter, piece[:cut])
                    await asyncio.sleep(float(rule.spec.get("delay", 5.0)))
                    await self.send(cwriter, piece[cut:])
                else:
                    await self.send(cwriter, piece)
                sent += len(piece)

            if action == "stall" and limit == 0:
                await asyncio.sleep(float(rule.spec.get("delay", 5.0)))
            await self.relay_body(ur, framing, length, send_limited)
            if action == "truncate":
                self.close_upstream(conn)
                return False
        else:
            await self.relay_body(ur, framing, length, lambda p: self.send(cwriter, p))
        if up_close:
            self.close_upstream(conn)
            return False
        return True

    async def relay_body(self, ur, framing, length, send):
        if framing == "none":
            return
        if framing == "chunked":
            await relay_chunked(ur, send)
            return
        remaining = length
        while remaining is None or remaining > 0:
            piece = await ur.read(1 << 16 if remaining is None else min(remaining, 1 << 16))
            if not piece:
                if remaining is None:
                    return
                raise asyncio.IncompleteReadError(b"", remaining)
            if remaining is not None:
                remaining -= len(piece)
            await send(piece)

    async def drain_body(self, ur, framing, length):
        async def nothing(piece):
            pass
        await self.relay_body(ur, framing, length, nothing)


async def serve(args):
    proxy = Proxy(args.upstream, verbose=args.verbose)
    if args.rules:
        with open(args.rules) as f:
            proxy.add_rules(json.load(f))
    server = await asyncio.start_server(proxy.handle, args.address, args.port, limit=MAX_HEAD)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def stop(*_):
        if not done.done():
            done.set_result(None)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    if args.exit_on_stdin_eof:
        loop.add_reader(sys.stdin.fileno(), lambda: (sys.stdin.buffer.raw.read(4096) or
                                                     stop()))
    await done
    server.close()


def main():
    ap = argparse.ArgumentParser(description="HTTP/1.1 fault-injecting proxy for S3 tests")
    ap.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of the S3 server")
    ap.add_argument("--address", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--rules", help="a JSON file of rules to start with")
    ap.add_argument("--verbose", action="store_true", help="log each fault on stderr")
    ap.add_argument("--exit-on-stdin-eof", action="store_true")
    args = ap.parse_args()
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
