#!/usr/bin/env python3
"""An ACP client built on the ACP Python SDK (agent-client-protocol on PyPI) that drives the
real `tandem acp` binary. tests/it/acp.rs runs one scenario per call, with the mock LLM's scripts
already queued, and reads the per-check lines this prints:

    PASS <check>
    FAIL <check>: <what was seen>

Exit status 0 means every check passed. Usage:

    client.py SCENARIO --tandem BIN --config FILE --data-dir DIR --cwd WORKSPACE
"""

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import acp
from acp import schema as s
from acp.stdio import spawn_agent_process

TIMEOUT = float(os.environ.get("TANDEM_TEST_TIMEOUT_SECS", "30"))
FAILURES: list[str] = []


def check(name: str, ok: bool, detail: Any = "") -> bool:
    if ok:
        print(f"PASS {name}", flush=True)
    else:
        print(f"FAIL {name}: {detail}", flush=True)
        FAILURES.append(name)
    return ok


def dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return model


class Recorder:
    """The client side: records every update and request; answers permissions from a queue."""

    def __init__(self, fs: dict[str, str] | None = None, elicitation: bool = False) -> None:
        self.updates: list[dict] = []
        self.permissions: list[dict] = []
        self.reads: list[dict] = []
        self.writes: list[dict] = []
        self.elicitations: list[dict] = []
        self.answers: list[str] = []  # option ids to pick, in order; "hold" waits for cancel
        self.elicitation_answers: list[str] = []
        self.fs = fs
        self.elicitation = elicitation
        self.held: list[asyncio.Future] = []
        self.permission_seen = asyncio.Event()
        self.chunk_seen = asyncio.Event()
        self.changed = asyncio.Event()

    async def until(self, predicate, what: str) -> None:
        """Wait (up to TIMEOUT) until `predicate(self)` holds, woken by each update."""

        async def wait() -> None:
            while not predicate(self):
                self.changed.clear()
                await self.changed.wait()

        await timed(wait(), what)

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.permissions.append(
            {"toolCall": dump(tool_call), "options": [dump(o) for o in options]}
        )
        self.permission_seen.set()
        choice = self.answers.pop(0) if self.answers else "reject_once"
        if choice == "hold":
            fut: asyncio.Future = asyncio.get_running_loop().create_future()
            self.held.append(fut)
            return await fut
        return s.RequestPermissionResponse(
            outcome=s.AllowedOutcome(outcome="selected", option_id=choice)
        )

    def release_held(self) -> None:
        # ACP: after session/cancel the client answers open permission requests `cancelled`.
        for fut in self.held:
            if not fut.done():
                fut.set_result(s.RequestPermissionResponse(outcome=s.DeniedOutcome(outcome="cancelled")))

    async def session_update(self, session_id, update, **kwargs):
        u = dump(update)
        self.updates.append(u)
        self.changed.set()
        if u.get("sessionUpdate") == "agent_message_chunk":
            self.chunk_seen.set()

    async def read_text_file(self, session_id, path, line=None, limit=None, **kwargs):
        self.reads.append({"path": path})
        if self.fs is None or path not in self.fs:
            raise acp.RequestError.resource_not_found(path)
        return s.ReadTextFileResponse(content=self.fs[path])

    async def write_text_file(self, session_id, path, content, **kwargs):
        self.writes.append({"path": path, "content": content})
        if self.fs is not None:
            self.fs[path] = content
        return s.WriteTextFileResponse()

    async def create_elicitation(self, message, mode, **kwargs):
        self.elicitations.append({"message": message, "mode": dump(mode), **{k: dump(v) for k, v in kwargs.items()}})
        answer = self.elicitation_answers.pop(0) if self.elicitation_answers else "?"
        return s.AcceptElicitationResponse(action="accept", content={"answer": answer})

    async def ext_method(self, method, params):
        return {}

    async def ext_notification(self, method, params):
        return None

    def of(self, kind: str) -> list[dict]:
        return [u for u in self.updates if u.get("sessionUpdate") == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.get("content", {}).get("text", "") for u in self.of(kind))


def capabilities(fs: bool, elicitation: bool) -> s.ClientCapabilities:
    caps: dict[str, Any] = {
        "fs": {"readTextFile": fs, "writeTextFile": fs},
        "terminal": False,
    }
    if elicitation:
        caps["elicitation"] = {"form": {}}
    return s.ClientCapabilities.model_validate(caps)


class Tandem:
    def __init__(self, args: argparse.Namespace, recorder: Recorder) -> None:
        self.args = args
        self.recorder = recorder

    def spawn(self):
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        command = [self.args.tandem, "acp", "--config", self.args.config, "--data-dir", self.args.data_dir]
        if self.args.wiretap:
            # Log every line both ways for validate.py (the schema check of what tandem sends).
            wiretap = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wiretap.py")
            command = [sys.executable, wiretap, self.args.wiretap, "--", *command]
        return spawn_agent_process(
            lambda _agent: self.recorder,
            *command,
            env=env,
            # elicitation/create is behind the Python SDK's unstable flag.
            use_unstable_protocol=self.recorder.elicitation,
        )


async def timed(awaitable, what: str):
    try:
        return await asyncio.wait_for(awaitable, TIMEOUT)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out after {TIMEOUT}s waiting for {what}")


def text(t: str):
    return [acp.text_block(t)]


async def start(conn, recorder: Recorder, cwd: str, fs=False, elicitation=False):
    init = await timed(
        conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=capabilities(fs, elicitation),
            client_info=s.Implementation(name="tandem-acp-test", version="1"),
        ),
        "initialize",
    )
    session = await timed(conn.new_session(cwd=cwd, mcp_servers=[]), "session/new")
    return dump(init), dump(session)


def option(config_options: list[dict], ident: str) -> dict:
    for o in config_options:
        if o.get("id") == ident:
            return o
    return {}


def statuses(recorder: Recorder, tool_call_id: str) -> list[str]:
    return [
        u.get("status")
        for u in recorder.of("tool_call_update")
        if u.get("toolCallId") == tool_call_id and u.get("status")
    ]


# ---------------------------------------------------------------------------------------------
# scenarios


async def handshake(args):
    rec = Recorder()
    async with Tandem(args, rec).spawn() as (conn, _proc):
        init, session = await start(conn, rec, args.cwd)
        caps = init.get("agentCapabilities", {})
        check("initialize.protocolVersion", init.get("protocolVersion") == 1, init)
        check("initialize.loadSession", caps.get("loadSession") is True, caps)
        prompt_caps = caps.get("promptCapabilities", {})
        check(
            "initialize.promptCapabilities",
            prompt_caps.get("image") is True and prompt_caps.get("embeddedContext") is True,
            prompt_caps,
        )
        sess_caps = caps.get("sessionCapabilities", {})
        check(
            "initialize.sessionCapabilities",
            all(k in sess_caps for k in ("list", "resume", "close")),
            sess_caps,
        )
        check("initialize.agentInfo", init.get("agentInfo", {}).get("name") == "tandem", init)
        check(
            "initialize._meta.steering",
            init.get("_meta", {}).get("steering", {}).get("method") == "_session/steering",
            init.get("_meta"),
        )
        options = session.get("configOptions", [])
        model = option(options, "model")
        mode = option(options, "mode")
        check(
            "session/new.configOptions.model",
            model.get("category") == "model"
            and model.get("currentValue") == "mock"
            and {"mock", "mock-2"} <= {o["value"] for o in model.get("options", [])},
            model,
        )
        check(
            "session/new.configOptions.mode",
            mode.get("category") == "mode"
            and mode.get("currentValue") == "ask"
            and {"ask", "autoEdit", "plan", "fullAuto"} <= {o["value"] for o in mode.get("options", [])},
            mode,
        )
        sid = session["sessionId"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("say hello")), "prompt"))
        check("prompt.stopReason end_turn", resp.get("stopReason") == "end_turn", resp)
        check("prompt.agent_message_chunk", rec.text() == "Hello from the mock.", rec.text())
        check("prompt.agent_thought_chunk", rec.text("agent_thought_chunk") == "thinking", rec.text("agent_thought_chunk"))
        mcp = dump(
            await timed(
                conn.new_session(
                    cwd=args.cwd,
                    mcp_servers=[s.McpServerStdio(name="files", command="/bin/true", args=[], env=[])],
                ),
                "session/new with MCP servers",
            )
        )
        # MCP servers are supported: the reply comes at once (servers start in the background), and
        # a server that is no MCP server (/bin/true exits at once) is a warning naming it.
        check(
            "session/new with mcpServers answers with a session",
            bool(mcp.get("sessionId")) and "mcpServers" not in mcp.get("_meta", {}).get("tandem", {}),
            mcp,
        )
        await rec.until(
            lambda r: any("MCP server `files`" in json.dumps(u) for u in r.updates),
            "the warning about MCP server `files`",
        )
        warned = [u for u in rec.updates if "MCP server `files`" in json.dumps(u)]
        check("a server that cannot start is a warning naming it", bool(warned), rec.updates[-3:])
        try:
            await timed(conn.new_session(cwd="relative/path", mcp_servers=[]), "bad cwd")
            check("session/new rejects a relative cwd", False, "no error")
        except acp.RequestError as e:
            check("session/new rejects a relative cwd", "absolute" in str(e), e)


async def permissions(args):
    rec = Recorder()
    ws = args.cwd
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, ws)
        sid = session["sessionId"]

        async def turn(prompt: str, answers: list[str]) -> dict:
            rec.answers = list(answers)
            return dump(await timed(conn.prompt(session_id=sid, prompt=text(prompt)), prompt))

        # allow_once
        asked = len(rec.permissions)
        resp = await turn("write a.txt", ["allow_once"])
        check("allow_once: stopReason end_turn", resp.get("stopReason") == "end_turn", resp)
        perm = rec.permissions[asked] if len(rec.permissions) > asked else {}
        kinds = sorted(o.get("kind") for o in perm.get("options", []))
        check(
            "permission options are the four ACP kinds",
            kinds == ["allow_always", "allow_once", "reject_always", "reject_once"],
            perm,
        )
        content = perm.get("toolCall", {}).get("content", [])
        diff = [c for c in content if c.get("type") == "diff"]
        check(
            "permission carries the diff",
            len(diff) == 1
            and diff[0].get("path") == os.path.join(ws, "a.txt")
            and diff[0].get("newText") == "one\n"
            and diff[0].get("oldText") is None,
            content,
        )
        calls = [u for u in rec.of("tool_call") if u.get("toolCallId") == "w1"]
        call = calls[0] if calls else {}
        check(
            "tool_call has kind, title, locations and rawInput",
            call.get("kind") == "edit"
            and "a.txt" in call.get("title", "")
            and call.get("locations", [{}])[0].get("path") == os.path.join(ws, "a.txt")
            and call.get("rawInput", {}).get("content") == "one\n",
            call,
        )
        check("allow_once: tool completed", "completed" in statuses(rec, "w1"), statuses(rec, "w1"))
        check("allow_once: file written", read(ws, "a.txt") == "one\n", read(ws, "a.txt"))

        # allow_always, then the same tool is not asked again
        asked = len(rec.permissions)
        await turn("write b.txt", ["allow_always"])
        check("allow_always: file written", read(ws, "b.txt") == "two\n", read(ws, "b.txt"))
        await turn("write c.txt", [])
        check(
            "allow_always: remembered, no second permission request",
            len(rec.permissions) == asked + 1 and read(ws, "c.txt") == "three\n",
            (len(rec.permissions) - asked, read(ws, "c.txt")),
        )

        # reject_once
        await turn("edit a.txt", ["reject_once"])
        check(
            "reject_once: not written, tool failed",
            read(ws, "a.txt") == "one\n" and "failed" in statuses(rec, "e1"),
            (read(ws, "a.txt"), statuses(rec, "e1")),
        )

        # reject_always, then the same tool is rejected without asking
        await turn("edit a.txt again", ["reject_always"])
        asked = len(rec.permissions)
        await turn("edit a.txt a third time", ["allow_once"])
        check(
            "reject_always: remembered, rejected without asking",
            len(rec.permissions) == asked
            and read(ws, "a.txt") == "one\n"
            and "failed" in statuses(rec, "e3"),
            (len(rec.permissions) - asked, read(ws, "a.txt"), statuses(rec, "e3")),
        )

        # shell: permission before the command, output streamed into the card
        asked = len(rec.permissions)
        await turn("run echo", ["allow_once"])
        shell_perm = rec.permissions[asked] if len(rec.permissions) > asked else {}
        check(
            "shell: permission asked with kind execute",
            shell_perm.get("toolCall", {}).get("kind") == "execute",
            shell_perm,
        )
        outputs = " ".join(
            c.get("content", {}).get("text", "")
            for u in rec.of("tool_call_update")
            if u.get("toolCallId") == "x1"
            for c in u.get("content", []) or []
        )
        check("shell: output shown", "hello-from-shell" in outputs, outputs)


def read(ws: str, name: str):
    try:
        with open(os.path.join(ws, name)) as f:
            return f.read()
    except FileNotFoundError:
        return None


async def client_fs(args):
    ws = args.cwd
    path = os.path.join(ws, "notes.txt")
    rec = Recorder(fs={path: "unsaved buffer line\n"})
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, ws, fs=True)
        sid = session["sessionId"]
        rec.answers = ["allow_once"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("fix notes")), "prompt"))
        check("fs: stopReason end_turn", resp.get("stopReason") == "end_turn", resp)
        check(
            "fs: read_file went through fs/read_text_file",
            any(r["path"] == path for r in rec.reads),
            rec.reads,
        )
        check(
            "fs: the edit went through fs/write_text_file",
            rec.writes == [{"path": path, "content": "saved buffer line\n"}],
            rec.writes,
        )
        check("fs: the disk was not written by tandem", read(ws, "notes.txt") == "disk line\n", read(ws, "notes.txt"))


async def cancel(args):
    rec = Recorder()
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, args.cwd)
        sid = session["sessionId"]
        # Mid-stream: the mock streams a first chunk, then stalls until the request is dropped.
        task = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("stream forever")))
        await timed(rec.chunk_seen.wait(), "the first agent_message_chunk")
        await conn.cancel(session_id=sid)
        resp = dump(await timed(task, "the cancelled prompt"))
        check("cancel mid-stream: stopReason cancelled", resp.get("stopReason") == "cancelled", resp)
        check("cancel mid-stream: partial text was streamed", rec.text().startswith("partial"), rec.text())

        # While a permission request is open: it is withdrawn and the prompt ends cancelled.
        rec.answers = ["hold"]
        task = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("write then wait")))
        await timed(rec.permission_seen.wait(), "session/request_permission")
        await conn.cancel(session_id=sid)
        rec.release_held()
        resp = dump(await timed(task, "the prompt cancelled at a permission"))
        check("cancel at permission: stopReason cancelled", resp.get("stopReason") == "cancelled", resp)
        check("cancel at permission: nothing written", read(args.cwd, "never.txt") is None, read(args.cwd, "never.txt"))

        # The session is usable afterwards.
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("again")), "prompt after cancel"))
        check("after cancel: next prompt ends end_turn", resp.get("stopReason") == "end_turn", resp)


async def model_switch(args):
    rec = Recorder()
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, args.cwd)
        sid = session["sessionId"]
        resp = dump(await timed(conn.set_config_option(config_id="model", session_id=sid, value="mock-2"), "set model"))
        check(
            "set_config_option model: new current value",
            option(resp.get("configOptions", []), "model").get("currentValue") == "mock-2",
            resp,
        )
        await asyncio.sleep(0.2)
        updates = rec.of("config_option_update")
        check(
            "set_config_option model: config_option_update sent",
            any(option(u.get("configOptions", []), "model").get("currentValue") == "mock-2" for u in updates),
            updates,
        )
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("which model?")), "prompt"))
        check("model switch: prompt ends end_turn", resp.get("stopReason") == "end_turn", resp)
        resp = dump(await timed(conn.set_config_option(config_id="mode", session_id=sid, value="plan"), "set mode"))
        check(
            "set_config_option mode: plan",
            option(resp.get("configOptions", []), "mode").get("currentValue") == "plan",
            resp,
        )
        try:
            await timed(conn.set_config_option(config_id="model", session_id=sid, value="nope"), "bad model")
            check("set_config_option rejects an unknown model", False, "no error")
        except acp.RequestError as e:
            check("set_config_option rejects an unknown model", "unknown model" in str(e), e)


async def load(args):
    rec = Recorder()
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, args.cwd)
        sid = session["sessionId"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("remember the llama")), "prompt"))
        check("load: first prompt end_turn", resp.get("stopReason") == "end_turn", resp)

    # A new process: the session comes from the store.
    rec2 = Recorder()
    async with Tandem(args, rec2).spawn() as (conn, _proc):
        await timed(conn.initialize(protocol_version=1, client_capabilities=capabilities(False, False)), "initialize")
        listed = dump(await timed(conn.list_sessions(cwd=args.cwd), "session/list"))
        ids = [x.get("sessionId") for x in listed.get("sessions", [])]
        info = next((x for x in listed.get("sessions", []) if x.get("sessionId") == sid), {})
        check(
            "session/list shows the session with title and updatedAt",
            sid in ids and "llama" in (info.get("title") or "") and "T" in (info.get("updatedAt") or ""),
            listed,
        )
        resp = dump(await timed(conn.load_session(cwd=args.cwd, session_id=sid, mcp_servers=[]), "session/load"))
        replayed = list(rec2.updates)
        check(
            "session/load replays the user prompt",
            "remember the llama" in "".join(u.get("content", {}).get("text", "") for u in replayed if u.get("sessionUpdate") == "user_message_chunk"),
            replayed,
        )
        check(
            "session/load replays the tool call with its result",
            any(u.get("sessionUpdate") == "tool_call" and u.get("toolCallId") == "r1" for u in replayed)
            and any(u.get("sessionUpdate") == "tool_call_update" and u.get("toolCallId") == "r1" and u.get("status") == "completed" for u in replayed),
            replayed,
        )
        check(
            "session/load replays the answer",
            "The llama is remembered." in rec2.text(),
            rec2.text(),
        )
        check(
            "session/load returns configOptions",
            option(resp.get("configOptions", []), "model").get("currentValue") == "mock",
            resp,
        )
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("and now?")), "prompt after load"))
        check("load: a prompt continues the session", resp.get("stopReason") == "end_turn", resp)
        closed = await timed(conn.close_session(session_id=sid), "session/close")
        check("session/close", closed is not None or True)
        try:
            await timed(conn.prompt(session_id=sid, prompt=text("closed?")), "prompt after close")
            check("session/close: the session is gone", False, "prompt accepted")
        except acp.RequestError as e:
            check("session/close: the session is gone", "unknown session" in str(e), e)

    rec3 = Recorder()
    async with Tandem(args, rec3).spawn() as (conn, _proc):
        await timed(conn.initialize(protocol_version=1, client_capabilities=capabilities(False, False)), "initialize")
        resp = dump(await timed(conn.resume_session(cwd=args.cwd, session_id=sid), "session/resume"))
        await asyncio.sleep(0.2)
        replayed = [u for u in rec3.updates if u.get("sessionUpdate") != "available_commands_update"]
        check("session/resume does not replay", replayed == [], rec3.updates)
        check(
            "session/resume returns configOptions",
            option(resp.get("configOptions", []), "model").get("currentValue") == "mock",
            resp,
        )


async def steering(args):
    rec = Recorder()
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, args.cwd)
        sid = session["sessionId"]
        task = asyncio.create_task(conn.prompt(session_id=sid, prompt=text("look around")))
        await timed(rec.chunk_seen.wait(), "the first chunk")
        queued = await timed(conn.ext_method("session/steering", {"sessionId": sid, "text": "also check the tests"}), "steering")
        check("_session/steering is queued", queued == {"queued": True}, queued)
        resp = dump(await timed(task, "the steered prompt"))
        check("steering: prompt ends end_turn", resp.get("stopReason") == "end_turn", resp)
        check(
            "steering: shown as a user message chunk",
            "also check the tests" in rec.text("user_message_chunk"),
            rec.updates,
        )
        try:
            await timed(conn.ext_method("session/steering", {"sessionId": sid, "text": "late"}), "late steering")
            check("steering without a turn is an error", False, "accepted")
        except acp.RequestError as e:
            check("steering without a turn is an error", "no turn" in str(e), e)


async def questions(args):
    # With forms: ask_user through elicitation/create.
    rec = Recorder(elicitation=True)
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, args.cwd, elicitation=True)
        sid = session["sessionId"]
        rec.elicitation_answers = ["blue"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("ask me")), "prompt"))
        check("elicitation: prompt ends end_turn", resp.get("stopReason") == "end_turn", resp)
        el = rec.elicitations[0] if rec.elicitations else {}
        check(
            "elicitation/create asked the question with its choices",
            "favourite colour" in el.get("message", "")
            and '"enum": ["red", "blue"]' in json.dumps(el),
            el,
        )
    # Without forms: a permission-style choice.
    rec = Recorder()
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, args.cwd)
        sid = session["sessionId"]
        rec.answers = ["choice:0"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("ask me")), "prompt"))
        check("question as permission: prompt ends end_turn", resp.get("stopReason") == "end_turn", resp)
        perm = rec.permissions[0] if rec.permissions else {}
        check(
            "question as permission: one option per choice",
            [o.get("name") for o in perm.get("options", [])][:2] == ["red", "blue"],
            perm,
        )


async def protected_fs(args):
    """The model tries protected paths while the client offers fs: none reaches the client."""
    ws = args.cwd
    secret = os.path.join(ws, ".env")
    rec = Recorder(fs={secret: "API_TOKEN=hunter2-secret\n"})
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, ws, fs=True)
        sid = session["sessionId"]
        # Every write is refused before any approval; the secret read asks and is rejected.
        rec.answers = ["reject_once"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("make yourself at home")), "prompt"))
        check("protected: stopReason end_turn", resp.get("stopReason") == "end_turn", resp)
        check("protected: the client never got fs/write_text_file", rec.writes == [], rec.writes)
        check(
            "protected: the client was never asked to read .env",
            all(r["path"] != secret for r in rec.reads),
            rec.reads,
        )
        asked = [p.get("toolCall", {}).get("toolCallId") for p in rec.permissions]
        check("protected: only the secret read asked for permission", asked == ["s1"], rec.permissions)
        for call_id in ["p1", "p2", "p3", "p4", "p5"]:
            check(
                f"protected: {call_id} failed",
                "failed" in statuses(rec, call_id),
                statuses(rec, call_id),
            )


async def network(args):
    """The user's network switch as an ACP config option."""
    rec = Recorder()
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, args.cwd)
        sid = session["sessionId"]
        net = option(session.get("configOptions", []), "network")
        check(
            "network: offered as a config option, off by default",
            net.get("currentValue") == "off"
            and sorted(o.get("value") for o in net.get("options", [])) == ["off", "on"],
            net,
        )
        await timed(conn.set_config_option(config_id="mode", session_id=sid, value="fullAuto"), "set mode")
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("connect")), "prompt 1"))
        check("network: first prompt ends end_turn", resp.get("stopReason") == "end_turn", resp)
        resp = dump(await timed(conn.set_config_option(config_id="network", session_id=sid, value="on"), "set network"))
        check(
            "network: set_config_option answers the new value",
            option(resp.get("configOptions", []), "network").get("currentValue") == "on",
            resp,
        )
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("connect again")), "prompt 2"))
        check("network: second prompt ends end_turn", resp.get("stopReason") == "end_turn", resp)
        check(
            "network: the change was announced as a config_option_update",
            any(
                option(u.get("configOptions", []), "network").get("currentValue") == "on"
                for u in rec.of("config_option_update")
            ),
            rec.of("config_option_update"),
        )
        try:
            await timed(conn.set_config_option(config_id="network", session_id=sid, value="maybe"), "bad value")
            check("network: an unknown value is rejected", False, "no error")
        except acp.RequestError as e:
            check("network: an unknown value is rejected", "on" in str(e) and "off" in str(e), e)
        check("network: no permission was asked in fullAuto", rec.permissions == [], rec.permissions)

async def mcp(args):
    """MCP servers from session/new (stdio with env, HTTP with a header) and from session/load."""
    with open(os.path.join(args.data_dir, "mcp-servers.json")) as f:
        cfg = json.load(f)
    stdio = s.McpServerStdio(
        name="t",
        command=cfg["python"],
        args=[cfg["script"]],
        env=[s.EnvVariable(name="FROM_ACP", value="yes")],
    )
    http = s.HttpMcpServer(
        type="http",
        name="h",
        url=cfg["url"],
        headers=[s.HttpHeader(name="Authorization", value=f"Bearer {cfg['token']}")],
    )
    rec = Recorder()
    async with Tandem(args, rec).spawn() as (conn, _proc):
        init = dump(
            await timed(
                conn.initialize(
                    protocol_version=acp.PROTOCOL_VERSION,
                    client_capabilities=capabilities(False, False),
                ),
                "initialize",
            )
        )
        check(
            "initialize.mcpCapabilities.http",
            init.get("agentCapabilities", {}).get("mcpCapabilities", {}).get("http") is True,
            init.get("agentCapabilities"),
        )
        session = dump(
            await timed(conn.new_session(cwd=args.cwd, mcp_servers=[stdio, http]), "session/new")
        )
        sid = session["sessionId"]
        rec.answers = ["allow_once", "allow_once", "allow_once"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("use the servers")), "prompt"))
        check("mcp: stopReason end_turn", resp.get("stopReason") == "end_turn", resp)
        titles = [p.get("toolCall", {}).get("title", "") for p in rec.permissions]
        check(
            "mcp: each call asks, titled with its server",
            len(titles) == 3
            and titles[0].startswith("t: echo")
            and titles[1].startswith("t: env")
            and titles[2].startswith("h: echo"),
            titles,
        )
        calls = {u.get("toolCallId"): u for u in rec.of("tool_call")}
        check(
            "mcp: tool_call carries the server in its title and the arguments as rawInput",
            calls.get("e1", {}).get("title", "").startswith("t: echo")
            and calls.get("e1", {}).get("rawInput") == {"text": "acp says hi"},
            calls.get("e1"),
        )
        for ident in ["e1", "v1", "h1"]:
            check(f"mcp: {ident} completed", "completed" in statuses(rec, ident), statuses(rec, ident))

    # A new process: session/load starts the servers the client names again.
    rec2 = Recorder()
    async with Tandem(args, rec2).spawn() as (conn, _proc):
        await timed(conn.initialize(protocol_version=1, client_capabilities=capabilities(False, False)), "initialize")
        await timed(conn.load_session(cwd=args.cwd, session_id=sid, mcp_servers=[stdio]), "session/load")
        rec2.answers = ["allow_once"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("again")), "prompt after load"))
        check("mcp: after load, end_turn", resp.get("stopReason") == "end_turn", resp)
        check("mcp: after load, the server's tool ran", "completed" in statuses(rec2, "e2"), statuses(rec2, "e2"))


async def checkpoints(args):
    """Checkpoints over ACP: the prompt's `_meta.tandem.turnId`, `_session/checkpoints`,
    `_turn/diff`, `session/fork` (the schema's unstable method) and `_session/rewind`."""
    rec = Recorder()
    ws = args.cwd
    async with Tandem(args, rec).spawn() as (conn, _proc):
        init, session = await start(conn, rec, ws)
        sid = session["sessionId"]
        caps = init.get("agentCapabilities", {}).get("sessionCapabilities", {})
        check("initialize.sessionCapabilities.fork", "fork" in caps, caps)
        tandem_meta = init.get("_meta", {}).get("tandem", {})
        check(
            "initialize._meta.tandem names the checkpoint methods",
            tandem_meta.get("rewind", {}).get("method") == "_session/rewind"
            and tandem_meta.get("turnDiff", {}).get("method") == "_turn/diff"
            and tandem_meta.get("checkpoints", {}).get("method") == "_session/checkpoints",
            tandem_meta,
        )
        rec.answers = ["allow_once"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("change a.txt")), "prompt"))
        turn = resp.get("_meta", {}).get("tandem", {}).get("turnId")
        check("prompt._meta.tandem.turnId", bool(turn), resp)
        listed = await timed(conn.ext_method("session/checkpoints", {"sessionId": sid}), "_session/checkpoints")
        points = listed.get("checkpoints", [])
        check(
            "_session/checkpoints lists the turn and its file",
            len(points) == 1 and points[0].get("turnId") == turn
            and points[0].get("files") == [{"path": "a.txt", "change": "modified"}],
            listed,
        )
        diff = await timed(conn.ext_method("turn/diff", {"sessionId": sid, "turnId": turn}), "_turn/diff")
        files = diff.get("files", [])
        check(
            "_turn/diff has the old and new text",
            len(files) == 1 and files[0].get("oldText") == "alpha\n" and files[0].get("newText") == "beta\n",
            diff,
        )
        fork = dump(await timed(conn.fork_session(cwd=ws, session_id=sid, mcp_servers=[]), "session/fork"))
        forked = fork.get("sessionId")
        check("session/fork answers a new session", bool(forked) and forked != sid, fork)
        resp = dump(await timed(conn.prompt(session_id=forked, prompt=text("in the fork")), "prompt in the fork"))
        check("the fork takes prompts", resp.get("stopReason") == "end_turn", resp)
        rewound = await timed(
            conn.ext_method("session/rewind", {"sessionId": sid, "turnId": turn, "restore": "both"}),
            "_session/rewind",
        )
        check(
            "_session/rewind restores the file and the conversation",
            rewound.get("restored") == ["a.txt"] and rewound.get("conflicts") == []
            and rewound.get("conversationRewound") is True,
            rewound,
        )
        check("a.txt is back", read(ws, "a.txt") == "alpha\n", read(ws, "a.txt"))
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("after the rewind")), "prompt after the rewind"))
        check("the session goes on after the rewind", resp.get("stopReason") == "end_turn", resp)
        try:
            await conn.ext_method("session/rewind", {"sessionId": sid, "turnId": turn, "restore": "conversation"})
            check("a rewound turn is unknown", False, "no error")
        except acp.RequestError as e:
            check("a rewound turn is unknown", "not a turn" in str(e), e)


async def plan(args):
    """The model's plan as ACP `plan` updates, live and in a load's replay."""
    rec = Recorder()
    ws = args.cwd
    async with Tandem(args, rec).spawn() as (conn, _proc):
        _init, session = await start(conn, rec, ws)
        sid = session["sessionId"]
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("plan it")), "prompt"))
        check("prompt ends", resp.get("stopReason") == "end_turn", resp)
        plans = rec.of("plan")
        want = [
            {"content": "Read", "priority": "medium", "status": "completed"},
            {"content": "Write", "priority": "medium", "status": "in_progress"},
        ]
        check("a plan update with the entries", bool(plans) and plans[-1].get("entries") == want, plans)
    rec2 = Recorder()
    async with Tandem(args, rec2).spawn() as (conn, _proc):
        await timed(
            conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=capabilities(False, False),
                client_info=s.Implementation(name="tandem-acp-test", version="1"),
            ),
            "initialize",
        )
        await timed(conn.load_session(cwd=ws, session_id=sid, mcp_servers=[]), "session/load")
        plans = rec2.of("plan")
        check("the load replays the current plan", bool(plans) and plans[-1].get("entries") == want, plans)


async def commands(args):
    """Slash commands over ACP: `available_commands_update` after session/new (the built-ins and
    the workspace's `.claude/commands`), a built-in answered without a turn, a custom command
    expanded for the model, and the `_hooks/list` extension."""
    rec = Recorder()
    ws = args.cwd
    async with Tandem(args, rec).spawn() as (conn, _proc):
        init, session = await start(conn, rec, ws)
        sid = session["sessionId"]
        tandem_meta = init.get("_meta", {}).get("tandem", {})
        check(
            "initialize._meta.tandem names the hook methods",
            tandem_meta.get("hooksList", {}).get("method") == "_hooks/list"
            and tandem_meta.get("hooksTrust", {}).get("method") == "_hooks/trust",
            tandem_meta,
        )
        await rec.until(lambda r: r.of("available_commands_update"), "available_commands_update")
        names = {c["name"]: c for c in rec.of("available_commands_update")[-1]["availableCommands"]}
        check("the built-ins are offered", {"status", "undo", "compact", "init"} <= set(names), names)
        check(
            "a .claude/commands file is offered with its hint",
            names.get("review", {}).get("input", {}).get("hint") == "FILE",
            names,
        )
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("/status")), "/status"))
        check(
            "/status answers without a turn",
            resp.get("stopReason") == "end_turn"
            and resp.get("_meta", {}).get("tandem", {}).get("command", {}).get("name") == "status",
            resp,
        )
        check("/status shows the model", "`mock`" in rec.text(), rec.text())
        resp = dump(await timed(conn.prompt(session_id=sid, prompt=text("/review a.rs")), "/review"))
        check("/review runs a turn", resp.get("stopReason") == "end_turn", resp)
        hooks = await timed(conn.ext_method("hooks/list", {"sessionId": sid}), "_hooks/list")
        check("_hooks/list answers the native shape", hooks.get("trusted") is True and hooks.get("hooks") == [], hooks)


SCENARIOS = {
    "handshake": handshake,
    "permissions": permissions,
    "client_fs": client_fs,
    "cancel": cancel,
    "model_switch": model_switch,
    "load": load,
    "steering": steering,
    "questions": questions,
    "protected_fs": protected_fs,
    "network": network,
    "mcp": mcp,
    "checkpoints": checkpoints,
    "plan": plan,
    "commands": commands,
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--tandem", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--wiretap", help="log every line to and from tandem here (see wiretap.py)")
    args = parser.parse_args()
    try:
        asyncio.run(SCENARIOS[args.scenario](args))
    except Exception as e:  # a crash is a failed check, reported like the others
        check(f"{args.scenario} ran to the end", False, f"{type(e).__name__}: {e}")
    print(f"{args.scenario}: {len(FAILURES)} failed", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
