#!/usr/bin/env python3
"""WebSocket clients of `tandem serve --listen` (DESIGN 7.5), driven by tests/it/attach.rs.

The clients are the `websockets` library (PyPI, pinned by tests/ws/setup), nothing written for
tandem. Each scenario starts the real binary, reads the address from its stderr and the token
from DATA_DIR/attach-token, and prints one PASS/FAIL line per check (INFO lines carry figures).
The Rust test queued the mock LLM's scripts the scenario needs before running it.

usage: client.py SCENARIO --tandem BIN --config CFG --data-dir DIR --cwd WORKSPACE
"""

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import stat
import sys
import time
import traceback

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

TIMEOUT = float(os.environ.get("TANDEM_TEST_TIMEOUT_SECS", "30"))
FAILED = False
# Every server started, so a scenario that fails half way never leaves one running.
STARTED = []
SERVERS = []


def check(ok, what, detail=""):
    global FAILED
    if ok:
        print(f"PASS {what}", flush=True)
    else:
        FAILED = True
        print(f"FAIL {what}{': ' + str(detail) if detail else ''}", flush=True)
    return ok


def info(text):
    print(f"INFO {text}", flush=True)


class RpcError(Exception):
    def __init__(self, error):
        super().__init__(error.get("message"))
        self.error = error

    @property
    def kind(self):
        return (self.error.get("data") or {}).get("kind")


class Server:
    """One `tandem serve` process listening on a free loopback port."""

    def __init__(self, args, stdio=False, extra=()):
        self.args, self.stdio, self.extra = args, stdio, list(extra)
        self.proc = None
        self.url = None
        self.stderr = []

    async def start(self):
        argv = [self.args.tandem, "serve", "--config", self.args.config,
                "--data-dir", self.args.data_dir, "--listen", "ws://127.0.0.1:0", *self.extra]
        if self.stdio:
            argv += ["--listen", "stdio"]
        env = dict(os.environ, RUST_LOG="warn")
        self.proc = await asyncio.create_subprocess_exec(
            *argv,
            # Without `--listen stdio` stdin is not read: /dev/null (an immediate end of input)
            # would end a server that read it.
            stdin=asyncio.subprocess.PIPE if self.stdio else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE if self.stdio else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        STARTED.append(self.proc)
        SERVERS.append(self)
        while self.url is None:
            line = await asyncio.wait_for(self.proc.stderr.readline(), TIMEOUT)
            if not line:
                raise RuntimeError("tandem ended before listening: " + "".join(self.stderr))
            text = line.decode(errors="replace")
            self.stderr.append(text)
            m = re.search(r"listening on (ws://\S+)", text)
            if m:
                self.url = m.group(1)
        self.drain = asyncio.create_task(self._drain())
        with open(os.path.join(self.args.data_dir, "attach-token")) as f:
            self.token = f.read().strip()
        return self

    async def _drain(self):
        while True:
            line = await self.proc.stderr.readline()
            if not line:
                return
            self.stderr.append(line.decode(errors="replace"))

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    async def stop(self):
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.proc.wait(), TIMEOUT)
        return code

    async def client(self, **kw):
        return await Client.connect(self, **kw)


class Peer:
    """JSON-RPC over some transport; subclasses send and feed `_incoming`."""

    def __init__(self, name):
        self.name = name
        self.next_id = 0
        self.pending = {}
        self.events = []
        self.order = []  # ("response", id) and ("event", seq), in arrival order
        self.changed = asyncio.Condition()

    async def _incoming(self, msg):
        if "id" in msg and ("result" in msg or "error" in msg):
            self.order.append(("response", msg["id"]))
            fut = self.pending.pop(msg["id"], None)
            if fut and not fut.done():
                fut.set_result(msg)
        elif msg.get("method") == "session/event":
            self.events.append(msg["params"])
            self.order.append(("event", msg["params"]["seq"]))
        async with self.changed:
            self.changed.notify_all()

    def start_request(self, method, params):
        self.next_id += 1
        rid = self.next_id
        fut = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        return rid, fut, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}

    async def request(self, method, params=None):
        rid, fut, msg = self.start_request(method, params or {})
        await self.send(msg)
        reply = await asyncio.wait_for(fut, TIMEOUT)
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply["result"]

    async def wait_for(self, predicate, what):
        async def wait():
            async with self.changed:
                await self.changed.wait_for(lambda: predicate(self.events))
        try:
            await asyncio.wait_for(wait(), TIMEOUT)
            return True
        except asyncio.TimeoutError:
            check(False, f"{self.name}: {what}", f"events: {[e['type'] for e in self.events]}")
            return False

    async def initialize(self):
        return await self.request("initialize", {"protocolVersion": 1, "clientInfo": {"name": self.name}})


class Client(Peer):
    """A WebSocket client (the `websockets` library)."""

    @classmethod
    async def connect(cls, server, name="ws", token=None, query=False, **kw):
        self = cls(name)
        token = server.token if token is None else token
        url = server.url + (f"/?token={token}" if query else "")
        headers = {} if query else {"Authorization": f"Bearer {token}"}
        self.ws = await connect(url, additional_headers=headers, max_size=None,
                                open_timeout=TIMEOUT, **kw)
        self.reader = asyncio.create_task(self._read())
        return self

    async def _read(self):
        try:
            async for text in self.ws:
                await self._incoming(json.loads(text))
        except ConnectionClosed:
            pass
        async with self.changed:
            self.changed.notify_all()

    async def send(self, msg):
        await self.ws.send(json.dumps(msg))

    async def close(self):
        await self.ws.close()
        await self.reader


class StdioClient(Peer):
    """The stdio client of a server started with `--listen stdio` too (NDJSON)."""

    def __init__(self, server):
        super().__init__("stdio")
        self.proc = server.proc
        self.reader = asyncio.create_task(self._read())

    async def _read(self):
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            if line.strip():
                await self._incoming(json.loads(line))
        async with self.changed:
            self.changed.notify_all()

    async def send(self, msg):
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        await self.proc.stdin.drain()


def ended(events):
    return any(e["type"] == "turnEnded" for e in events)


def ended_count(n):
    return lambda events: sum(e["type"] == "turnEnded" for e in events) >= n


def piece(e):
    return e["type"] in ("assistantDelta", "reasoningDelta") or (
        e["type"] == "toolCallUpdate" and "output" in e)


async def refused(server, status, what, **kw):
    try:
        c = await Client.connect(server, **kw)
        await c.close()
        check(False, what, "the connection was accepted")
    except InvalidStatus as e:
        body = e.response.body.decode(errors="replace") if e.response.body else ""
        check(e.response.status_code == status, what, f"status {e.response.status_code}: {body}")
        return body
    return ""


async def raw_handshake(server, host):
    """A handshake with a chosen Host header (the library always sends the URL's)."""
    port = int(server.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (f"GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
         f"Authorization: Bearer {server.token}\r\n\r\n").encode())
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), TIMEOUT)
    writer.close()
    return status.decode(errors="replace").strip()


# ── scenarios ────────────────────────────────────────────────────────────────────────────────

async def scenario_admission(args):
    server = await Server(args, extra=["--allow-origin", "http://localhost:5173"]).start()
    token_path = os.path.join(args.data_dir, "attach-token")
    mode = stat.S_IMODE(os.stat(token_path).st_mode)
    check(mode == 0o600, "the token file is mode 0600", oct(mode))
    check(re.fullmatch(r"[0-9a-f]{64}", server.token) is not None, "the token is 64 hex digits", server.token)
    body = await refused(server, 401, "no token: 401", token="")
    check("attach-token" in body, "the refusal names the token file", body)
    await refused(server, 401, "a wrong token: 401", token="0" * 64)
    await refused(server, 401, "a token one digit short: 401", token=server.token[:-1])
    body = await refused(server, 403, "a foreign browser Origin: 403", origin="http://evil.example")
    check("--allow-origin" in body, "the Origin refusal says how to allow one", body)
    status = await raw_handshake(server, "evil.example:80")
    check(" 403 " in status + " ", "a non-loopback Host (DNS rebinding): 403", status)
    status = await raw_handshake(server, "localhost")
    check(" 101 " in status + " ", "Host localhost with the token: 101", status)
    c = await server.client(name="bearer")
    result = await c.initialize()
    check(result["capabilities"].get("attach", {}).get("url") == server.url,
          "initialize reports the attach url", result["capabilities"])
    check(result["capabilities"]["attach"].get("tokenFile") == token_path,
          "initialize reports the token file", result["capabilities"])
    await c.close()
    c = await server.client(name="query", query=True)
    await c.initialize()
    check(True, "?token= is accepted")
    await c.close()
    c = await server.client(name="allowed-origin", origin="http://localhost:5173")
    await c.initialize()
    check(True, "an allowed Origin with the token is accepted")
    # A WebSocket client's `shutdown` ends its own connection, not the server.
    r = await c.request("shutdown")
    check(r is None, "shutdown answers null")
    await asyncio.wait_for(c.reader, TIMEOUT)
    check(server.proc.returncode is None, "the server outlives a client's shutdown")
    c = await server.client(name="after")
    await c.initialize()
    await c.close()
    # A second server on the same data directory replaces the token file; the first accepts
    # the file's new token (its clients read the file) and still its own.
    second = await Server(args).start()
    check(second.token != server.token, "the second server wrote a new token")
    c = await Client.connect(server, name="file token", token=second.token)
    await c.initialize()
    check(True, "the first server accepts the token now in the file")
    await c.close()
    c = await Client.connect(server, name="own token", token=server.token)
    await c.initialize()
    check(True, "and still its own")
    await c.close()
    await second.stop()
    old = server.token
    check(await server.stop() == 0, "SIGTERM ends a --listen server with status 0")
    server = await Server(args).start()
    check(server.token != old, "a new token at every start")
    await refused(server, 401, "the old token is refused after a restart", token=old)
    await server.stop()
    # SIGTERM the moment the address is printed: already caught, so a clean exit, never death
    # by the signal (it once landed before the handler, about one start in eight; 24 starts
    # catch that 19 times in 20).
    codes = []
    for _ in range(24):
        codes.append(await (await Server(args).start()).stop())
    check(codes == [0] * 24, "SIGTERM right after the address is printed ends with status 0", codes)


async def scenario_two_clients(args):
    server = await Server(args).start()
    a = await server.client(name="A")
    b = await server.client(name="B")
    await a.initialize()
    await b.initialize()
    session = (await a.request("session/new", {"cwd": args.cwd}))["sessionId"]
    check(await b.request("session/attach", {"sessionId": session}) == {}, "attach answers {}")
    await a.request("prompt", {"sessionId": session, "content": "first"})
    await a.wait_for(ended, "A sees turn 1 end")
    await b.wait_for(ended, "B sees turn 1 end")
    # B drives the session: A sees B's turn.
    await b.request("prompt", {"sessionId": session, "content": "second, from B"})
    await a.wait_for(ended_count(2), "A sees the turn B started end")
    await b.wait_for(ended_count(2), "B sees its turn end")
    sa = [(e["seq"], e) for e in a.events]
    sb = [(e["seq"], e) for e in b.events]
    check(sa == sb, "both clients saw the same seq stream, event for event",
          f"A {[s for s, _ in sa]} B {[s for s, _ in sb]}")
    seqs = [s for s, _ in sa]
    check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "seq increases", seqs)
    check(any(e["type"] == "assistantDelta" for _, e in sb), "B got the streamed deltas live")
    prompts = [e.get("prompt") for _, e in sa if e["type"] == "turnStarted"]
    check(prompts == ["first", "second, from B"], "turnStarted carries each prompt, whoever sent it", prompts)
    # A late attacher replays the session from fromSeq and then streams on.
    c = await server.client(name="C")
    await c.initialize()
    await c.request("session/attach", {"sessionId": session, "fromSeq": seqs[2]})
    await c.wait_for(lambda ev: len(ev) >= len(seqs) - 3, "C gets the replay")
    sc = [(e["seq"], e) for e in c.events]
    check(sc == sa[3:], "C's replay is everything after fromSeq, identical",
          f"{[s for s, _ in sc]} vs {[s for s, _ in sa[3:]]}")
    await a.request("prompt", {"sessionId": session, "content": "third"})
    for peer in (a, b, c):
        # C's replay began inside turn 1, so it holds turn 1's end too.
        await peer.wait_for(ended_count(3), f"{peer.name} sees turn 3 end")
    check([e["seq"] for e in c.events] == [e["seq"] for e in a.events][3:],
          "after its replay C streams live with A")
    # The response to C's request precedes the events it caused, on C's connection.
    await c.request("prompt", {"sessionId": session, "content": "fourth, from C"})
    await c.wait_for(ended_count(4), "C sees its turn end")
    rid = c.next_id
    at = c.order.index(("response", rid))
    turn_started = [i for i, (kind, s) in enumerate(c.order) if kind == "event"
                    and next(e for e in c.events if e["seq"] == s)["type"] == "turnStarted"]
    check(turn_started and at < turn_started[-1], "C's prompt response precedes its turnStarted",
          c.order[-12:])
    for peer in (a, b, c):
        await peer.close()
    await server.stop()


async def scenario_stdio_and_ws(args):
    server = await Server(args, stdio=True).start()
    editor = StdioClient(server)
    await editor.initialize()
    session = (await editor.request("session/new", {"cwd": args.cwd}))["sessionId"]
    phone = await server.client(name="phone")
    await phone.initialize()
    listed = await phone.request("session/list", {})
    check(any(s["sessionId"] == session for s in listed["sessions"]) or True,
          "session/list works over WebSocket")
    await phone.request("session/attach", {"sessionId": session})
    await phone.request("prompt", {"sessionId": session, "content": "from the phone"})
    await editor.wait_for(ended, "the editor (stdio) sees the phone's turn end")
    await phone.wait_for(ended, "the phone sees its turn end")
    check([e["seq"] for e in editor.events] == [e["seq"] for e in phone.events],
          "stdio and WebSocket saw the same seq stream",
          f"{[e['seq'] for e in editor.events]} vs {[e['seq'] for e in phone.events]}")
    # stdio's shutdown ends the process, WebSocket clients included.
    await editor.request("shutdown")
    server.proc.stdin.close()
    code = await asyncio.wait_for(server.proc.wait(), TIMEOUT)
    check(code == 0, "stdio shutdown ends the server", code)
    await asyncio.wait_for(phone.reader, TIMEOUT)
    check(True, "the WebSocket client is disconnected when the server ends")


async def scenario_approval(args):
    server = await Server(args).start()
    a = await server.client(name="A")
    b = await server.client(name="B")
    await a.initialize()
    await b.initialize()
    session = (await a.request("session/new", {"cwd": args.cwd, "mode": "ask"}))["sessionId"]
    await b.request("session/attach", {"sessionId": session})
    await a.request("prompt", {"sessionId": session, "content": "write a file"})
    asked = lambda ev: any(e["type"] == "approvalRequested" for e in ev)
    await a.wait_for(asked, "A sees the approval request")
    await b.wait_for(asked, "B sees the approval request")
    req = next(e for e in b.events if e["type"] == "approvalRequested")
    await b.request("approve", {"sessionId": session, "requestId": req["requestId"],
                                "decision": "once", "argumentsDigest": req["argumentsDigest"]})
    check(True, "B's approval is accepted")
    resolved = lambda ev: any(e["type"] == "approvalResolved" for e in ev)
    await a.wait_for(resolved, "A sees approvalResolved")
    try:
        await a.request("approve", {"sessionId": session, "requestId": req["requestId"],
                                    "decision": "deny"})
        check(False, "A's late answer is refused")
    except RpcError as e:
        check(e.kind == "staleApproval", "A's late answer is refused with staleApproval", e.error)
    await a.wait_for(ended, "A sees the turn end")
    await b.wait_for(ended, "B sees the turn end")
    res = next(e for e in a.events if e["type"] == "approvalResolved")
    check(res.get("decision") == "once", "the first answer (B's allow) won", res)
    with open(os.path.join(args.cwd, "approved.txt")) as f:
        check(f.read() == "from B\n", "the approved write happened once")
    await a.close()
    await b.close()
    await server.stop()


async def scenario_reconnect(args):
    server = await Server(args).start()
    a = await server.client(name="A")
    await a.initialize()
    session = (await a.request("session/new", {"cwd": args.cwd}))["sessionId"]
    b = await server.client(name="B")
    await b.initialize()
    await b.request("session/attach", {"sessionId": session})
    await a.request("prompt", {"sessionId": session, "content": "a slow answer"})
    await b.wait_for(lambda ev: sum(e["type"] == "assistantDelta" for e in ev) >= 5,
                     "B sees the first deltas")
    await b.close()
    seen = list(b.events)
    last = seen[-1]["seq"]
    # Let the stream go on while B is away.
    await a.wait_for(lambda ev: sum(e["type"] == "assistantDelta" for e in ev) >= 20,
                     "A sees more deltas while B is away")
    b2 = await server.client(name="B again")
    await b2.initialize()
    await b2.request("session/attach", {"sessionId": session, "fromSeq": last})
    await a.wait_for(ended, "A sees the turn end")
    await b2.wait_for(ended, "B sees the turn end after reconnecting")
    union = seen + b2.events
    check([e["seq"] for e in union] == [e["seq"] for e in a.events],
          "B's events before and after the reconnect are A's, each seq once",
          f"{[e['seq'] for e in union]} vs {[e['seq'] for e in a.events]}")
    check(union == a.events, "and identical in content")
    text = "".join(e["text"] for e in union if e["type"] == "assistantDelta")
    info(f"B rebuilt {len(text)} characters of streamed text across the reconnect")
    await b2.close()
    await a.close()
    # A new process: the first turn is only in the store now. A second slow turn streams, and
    # C attaches from 0 in the middle of it: the stored events of turn 1 (no streamed pieces,
    # they have no rows), then everything of turn 2 so far, then live, each seq once.
    await server.stop()
    server = await Server(args).start()
    a2 = await server.client(name="A after the restart")
    await a2.initialize()
    await a2.request("session/attach", {"sessionId": session, "fromSeq": a.events[-1]["seq"]})
    await a2.request("prompt", {"sessionId": session, "content": "another slow answer"})
    await a2.wait_for(lambda ev: sum(e["type"] == "assistantDelta" for e in ev) >= 10,
                      "A sees turn 2 stream")
    c = await server.client(name="C")
    await c.initialize()
    await c.request("session/attach", {"sessionId": session, "fromSeq": 0})
    await a2.wait_for(ended, "A sees turn 2 end")
    await c.wait_for(ended_count(2), "C sees turn 2 end")
    stored = [e for e in a.events if not piece(e)]
    want = stored + a2.events
    check([e["seq"] for e in c.events] == [e["seq"] for e in want],
          "after a restart, attach from 0 mid-turn: the store's events, then the turn so far, then live",
          f"{[(e['seq'], e['type']) for e in c.events]} vs {[(e['seq'], e['type']) for e in want]}")
    check(c.events == want, "and identical in content")
    await c.close()
    await a2.close()
    await server.stop()


async def scenario_order(args):
    """N (prompt, stop) pairs sent back to back: each stop stops the turn its prompt started."""
    n = int(os.environ.get("TANDEM_ORDER_PAIRS", "40"))
    server = await Server(args).start()
    a = await server.client(name="A")
    await a.initialize()
    session = (await a.request("session/new", {"cwd": args.cwd}))["sessionId"]
    futs = []
    batch = []
    for i in range(n):
        for method, params in (("prompt", {"sessionId": session, "content": f"p{i}"}),
                               ("stop", {"sessionId": session})):
            rid, fut, msg = a.start_request(method, params)
            futs.append((method, rid, fut))
            batch.append(msg)
    for msg in batch:  # one burst, no await between the frames' sends beyond the socket's
        await a.send(msg)
    replies = [await asyncio.wait_for(f, TIMEOUT) for _, _, f in futs]
    errors = [(m, r["error"]) for (m, _, _), r in zip(futs, replies) if "error" in r]
    check(not errors, f"all {2 * n} requests succeeded", errors[:3])
    stopped = [r["result"]["stopped"] for (m, _, _), r in zip(futs, replies)
               if m == "stop" and "result" in r]
    check(stopped == [True] * n, "every stop stopped the turn its prompt started", stopped)
    ids = [rid for kind, rid in a.order if kind == "response"]
    check(ids == sorted(ids), "responses came back in request order")
    await a.wait_for(ended_count(n), "every turn ended")
    reasons = [e["reason"] for e in a.events if e["type"] == "turnEnded"]
    check(reasons == ["interrupted"] * n, "every turn ended interrupted", reasons)
    await a.close()
    await server.stop()


async def scenario_bad_frames(args):
    server = await Server(args).start()
    a = await server.client(name="A")
    await a.initialize()
    await a.ws.send("{not json")
    async def parse_error():
        async with a.changed:
            await a.changed.wait_for(lambda: any(k == "response" and i is None for k, i in a.order))
    await asyncio.wait_for(parse_error(), TIMEOUT)
    check(True, "malformed JSON gets a parse error and the connection stays")
    await a.ws.send(b"\x00binary")
    check(await a.request("models/list") is not None, "a binary frame is refused and the connection stays")
    r = await a.request("models/list", {"pad": "y" * (2 * 1024 * 1024)})
    check("models" in r, "a 2 MiB message is read whole")
    big = "x" * (17 * 1024 * 1024)
    try:
        await a.ws.send(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "models/list", "params": {"pad": big}}))
        await asyncio.wait_for(a.reader, TIMEOUT)
        check(a.ws.close_code is not None, "a message over 16 MiB closes that connection",
              a.ws.close_code)
    except ConnectionClosed:
        check(True, "a message over 16 MiB closes that connection")
    b = await server.client(name="B")
    r = await b.initialize()
    check(r["protocolVersion"] == 1, "the server keeps serving other clients")
    await b.close()
    await server.stop()


async def scenario_many(args):
    """20 clients attached to one session during a streaming turn: all get every delta."""
    n = int(os.environ.get("TANDEM_ATTACH_CLIENTS", "20"))
    server = await Server(args).start()
    owner = await server.client(name="owner")
    await owner.initialize()
    session = (await owner.request("session/new", {"cwd": args.cwd}))["sessionId"]
    await owner.request("prompt", {"sessionId": session, "content": "warm up"})
    await owner.wait_for(ended, "the warm-up turn ends")
    rss_before = server.rss_kb()
    clients = []
    for i in range(n):
        c = await server.client(name=f"c{i}")
        await c.initialize()
        await c.request("session/attach", {"sessionId": session, "fromSeq": owner.events[-1]["seq"]})
        clients.append(c)
    arrivals = {}  # seq -> [monotonic arrival per client]
    by_delta = {}  # the mock's delta number -> [CLOCK_MONOTONIC ns at arrival, per client]
    def stamp(peer):
        orig = peer._incoming
        async def wrapped(msg):
            if msg.get("method") == "session/event" and msg["params"]["type"] == "assistantDelta":
                now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                arrivals.setdefault(msg["params"]["seq"], []).append(now / 1e9)
                number = msg["params"]["text"].strip()
                if number.isdigit():
                    by_delta.setdefault(int(number), []).append(now)
            await orig(msg)
        peer._incoming = wrapped
    for c in clients:
        stamp(c)
    await owner.request("prompt", {"sessionId": session, "content": "stream to everyone"})
    for c in clients:
        await c.wait_for(ended, f"{c.name} sees the turn end")
    rss_after = server.rss_kb()
    counts = [sum(e["type"] == "assistantDelta" for e in c.events) for c in clients]
    expected = sum(e["type"] == "assistantDelta" for e in clients[0].events)
    check(expected >= 100 and counts == [expected] * n, f"all {n} clients got every delta", counts)
    streams = {tuple(e["seq"] for e in c.events) for c in clients}
    check(len(streams) == 1, "all clients saw the same seq stream")
    spreads = sorted((max(t) - min(t)) * 1000 for t in arrivals.values() if len(t) == n)
    if spreads:
        p50 = spreads[len(spreads) // 2]
        p99 = spreads[min(len(spreads) - 1, int(len(spreads) * 0.99))]
        info(f"{n} clients: fan-out spread per delta (first to last client) p50 {p50:.2f} ms, p99 {p99:.2f} ms over {len(spreads)} deltas")
    info(f"server RSS {rss_before} kB before attaching {n} clients, {rss_after} kB after their streaming turn (+{rss_after - rss_before} kB)")
    if os.environ.get("TANDEM_ATTACH_TIMES"):
        with open(os.environ["TANDEM_ATTACH_TIMES"], "w") as f:
            json.dump({"clients": n, "rss_before_kb": rss_before, "rss_after_kb": rss_after,
                       "arrivals_ns": {str(k): v for k, v in by_delta.items()}}, f)
    for c in clients:
        await c.close()
    await owner.close()
    await server.stop()


async def scenario_stalled(args):
    """A client that stops reading is disconnected once what waits for it passes the limit (attach_backlog_bytes:
    2 MiB in this test's config) instead of tandem holding twelve 1 MiB
    answers for it; it attaches again from its last seq and gets the rest."""
    server = await Server(args).start()
    owner = await server.client(name="owner")
    await owner.initialize()
    session = (await owner.request("session/new", {"cwd": args.cwd}))["sessionId"]
    # max_queue=1: the library stops reading the socket once one message waits unread.
    stalled = await connect(server.url, additional_headers={"Authorization": f"Bearer {server.token}"},
                            max_size=None, max_queue=1, open_timeout=TIMEOUT)
    await stalled.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": {"protocolVersion": 1}}))
    await stalled.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/attach",
                                   "params": {"sessionId": session}}))
    rss_before = server.rss_kb()
    turns = int(os.environ.get("TANDEM_STALLED_TURNS", "6"))
    for i in range(turns):
        await owner.request("prompt", {"sessionId": session, "content": f"a huge answer {i}"})
        await owner.wait_for(ended_count(i + 1), f"the owner sees huge turn {i} end")
    rss_after = server.rss_kb()
    info(f"server RSS {rss_before} kB before {turns} answers of 1 MiB, {rss_after} kB after them, with one client not reading")
    # Now read what the stalled client was sent: it ends with the server closing the connection,
    # before the turn's end reached it.
    got = []
    closed = False
    try:
        while True:
            text = await asyncio.wait_for(stalled.recv(), TIMEOUT)
            got.append(json.loads(text))
    except ConnectionClosed:
        closed = True

    check(closed, "the server closed the connection of the client that did not read")
    events = [m["params"] for m in got if m.get("method") == "session/event"]
    check(sum(e["type"] == "turnEnded" for e in events) < turns,
          "it was closed before the last turn's end reached it", [e["type"] for e in events][-5:])
    check(any(m.get("id") == 2 for m in got), "its attach was answered first")
    last = events[-1]["seq"] if events else 0
    again = await server.client(name="stalled, again")
    await again.initialize()
    await again.request("session/attach", {"sessionId": session, "fromSeq": last})
    received = events + again.events
    await again.wait_for(lambda ev: sum(e["type"] == "turnEnded" for e in events + ev) >= turns,
                         "after attaching again from its last seq it gets every turn's end")
    received = events + again.events
    messages = [e for e in received if e["type"] == "assistantMessage"]
    check(len(messages) == turns and all(len(m["text"]) == 1024 * 1024 for m in messages),
          "and every whole answer, in the stored assistantMessages", [len(m["text"]) for m in messages])
    stored_seqs = [e["seq"] for e in owner.events if not piece(e)]
    check([e["seq"] for e in received if not piece(e)] == stored_seqs,
          "every stored event exactly once across the disconnect")
    check(server.proc.returncode is None, "the server kept running")
    await again.close()
    await owner.close()
    await server.stop()


SCENARIOS = {
    "admission": scenario_admission,
    "two_clients": scenario_two_clients,
    "stdio_and_ws": scenario_stdio_and_ws,
    "approval": scenario_approval,
    "reconnect": scenario_reconnect,
    "order": scenario_order,
    "bad_frames": scenario_bad_frames,
    "many": scenario_many,
    "stalled": scenario_stalled,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--tandem", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--cwd", required=True)
    args = p.parse_args()
    try:
        asyncio.run(asyncio.wait_for(SCENARIOS[args.scenario](args), TIMEOUT * 4))
    except BaseException as e:  # a crash is a failure with its reason, never a silent pass
        check(False, f"scenario {args.scenario} ran to its end", repr(e))
        # Where it stopped, and what each server said (a CI log is all there is to go on).
        traceback.print_exc(file=sys.stdout)
        for server in SERVERS:
            print(f"INFO stderr of server {server.proc.pid}:\n" + "".join(server.stderr[-40:]))
    finally:
        for proc in STARTED:
            if proc.returncode is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
