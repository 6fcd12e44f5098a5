"""tandem's LSP face driven by a real LSP client: pygls's LanguageClient (pinned by tests/lsp/setup).

Usage: client.py SCENARIO --tandem BIN --config FILE --data-dir DIR --cwd WORKSPACE

Each scenario starts `tandem lsp` (with RUST_LOG=off: pygls never reads the server's stderr),
prints one `PASS name` or `FAIL name: why` line per check, and exits non-zero on a failure.
tests/it/lsp.rs queues the mock LLM's answers for each scenario and checks the disk and the
mock's requests afterwards. Every wait is bounded by TANDEM_TEST_TIMEOUT_SECS.
"""

import argparse
import asyncio
import os
import sys

from lsprotocol import types
from pygls.lsp.client import LanguageClient

TIMEOUT = float(os.environ.get("TANDEM_TEST_TIMEOUT_SECS", "30"))
FAILED = False

COMMANDS = [
    "tandem.prompt",
    "tandem.stop",
    "tandem.steer",
    "tandem.switchModel",
    "tandem.setMode",
    "tandem.newSession",
    "tandem.undo",
]


def check(name, ok, why=""):
    global FAILED
    if ok:
        print(f"PASS {name}", flush=True)
    else:
        FAILED = True
        print(f"FAIL {name}: {why}", flush=True)


def capabilities(show_message=True, progress=False, literals=False, show_document=False, apply_edit=False):
    window = types.WindowClientCapabilities(
        work_done_progress=progress or None,
        show_message=types.ShowMessageRequestClientCapabilities() if show_message else None,
        show_document=types.ShowDocumentClientCapabilities(support=True) if show_document else None,
    )
    text_document = None
    if literals:
        text_document = types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(
                code_action_literal_support=types.ClientCodeActionLiteralOptions(
                    code_action_kind=types.ClientCodeActionKindOptions(value_set=[""])
                )
            )
        )
    workspace = types.WorkspaceClientCapabilities(apply_edit=True) if apply_edit else None
    return types.ClientCapabilities(window=window, text_document=text_document, workspace=workspace)


class Session:
    """One `tandem lsp` process with a pygls client that records what the server sent."""

    def __init__(self, args, answers=None):
        self.args = args
        self.client = LanguageClient("tandem-test", "0")
        self.asked = []  # ShowMessageRequestParams, in order
        self.answers = list(answers or [])  # titles (or None) to answer them with
        self.logs = []
        self.progress = []  # (token, value dict)
        self.created = []
        self.shown = []  # ShowDocumentParams
        self.edits = []  # ApplyWorkspaceEditParams
        self.edit_answers = []  # (applied, failure_reason), in order
        self.changed = asyncio.Event()
        c = self.client

        @c.feature(types.WORKSPACE_APPLY_EDIT)
        def apply(params):
            self.edits.append(params)
            self.changed.set()
            applied, reason = self.edit_answers.pop(0) if self.edit_answers else (True, None)
            return types.ApplyWorkspaceEditResult(applied=applied, failure_reason=reason)

        @c.feature(types.WINDOW_SHOW_DOCUMENT)
        def show(params):
            self.shown.append(params)
            self.changed.set()
            return types.ShowDocumentResult(success=True)

        # An answer is a title, None (dismissed), or (event, title): held until the event is set.
        @c.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        async def smr(params):
            self.asked.append(params)
            self.changed.set()
            title = self.answers.pop(0) if self.answers else None
            if isinstance(title, tuple):
                event, title = title
                await event.wait()
            return None if title is None else types.MessageActionItem(title=title)

        @c.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create(params):
            self.created.append(params.token)
            return None

        @c.feature(types.PROGRESS)
        def progress(params):
            value = params.value
            if not isinstance(value, dict):
                value = c.protocol._converter.unstructure(value)
            self.progress.append((params.token, value))
            self.changed.set()

        @c.feature(types.WINDOW_LOG_MESSAGE)
        def log(params):
            self.logs.append(params.message)
            self.changed.set()

    async def spawn(self):
        a = self.args
        env = dict(os.environ, RUST_LOG="off")
        await self.client.start_io(
            a.tandem, "lsp", "--config", a.config, "--data-dir", a.data_dir, env=env
        )

    async def start(self, caps, spawned=False, options=None):
        a = self.args
        if not spawned:
            await self.spawn()
        root = "file://" + a.cwd
        result = await asyncio.wait_for(
            self.client.initialize_async(
                types.InitializeParams(
                    capabilities=caps,
                    process_id=os.getpid(),
                    root_uri=root,
                    initialization_options=options,
                )
            ),
            TIMEOUT,
        )
        self.client.initialized(types.InitializedParams())
        return result

    def command_future(self, command, argument=None):
        """Send `workspace/executeCommand` now (written before this returns) and return its future."""
        params = types.ExecuteCommandParams(
            command=command, arguments=[argument] if argument is not None else None
        )
        return self.client.protocol.send_request_async("workspace/executeCommand", params)

    async def command(self, command, argument=None):
        return await asyncio.wait_for(self.command_future(command, argument), TIMEOUT)

    async def wait_for(self, what, predicate):
        async def loop():
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        try:
            await asyncio.wait_for(loop(), TIMEOUT)
            return True
        except asyncio.TimeoutError:
            check(what, False, f"timed out; logs={self.logs!r} asked={len(self.asked)}")
            return False

    async def wait_log(self, text):
        return await self.wait_for(f"log {text!r}", lambda: any(text in m for m in self.logs))

    async def stop(self):
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), TIMEOUT)
            self.client.exit(None)
        finally:
            await self.client.stop()


def uri(args, name):
    return "file://" + os.path.join(args.cwd, name)


def value(result, key):
    if isinstance(result, dict):
        return result.get(key)
    return getattr(result, key, None)


async def initialize(args):
    s = Session(args)
    await s.spawn()
    await expect_error(s, "a tandem command before initialize is -32002", "tandem.stop", None, -32002)
    result = await s.start(capabilities(show_message=True, progress=True), spawned=True)
    caps = result.capabilities
    commands = list(caps.execute_command_provider.commands) if caps.execute_command_provider else []
    check("executeCommandProvider lists the seven tandem commands", commands == COMMANDS, repr(commands))
    check("codeActionProvider is advertised", bool(caps.code_action_provider), repr(caps.code_action_provider))
    sync = caps.text_document_sync
    kind = sync if isinstance(sync, types.TextDocumentSyncKind) else getattr(sync, "change", sync)
    check("text sync is full", kind == types.TextDocumentSyncKind.Full, repr(sync))
    actions = await asyncio.wait_for(
        s.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri(args, "a.txt")),
                range=types.Range(
                    start=types.Position(line=0, character=0), end=types.Position(line=1, character=0)
                ),
                context=types.CodeActionContext(diagnostics=[]),
            )
        ),
        TIMEOUT,
    )
    titles = [a.title for a in actions or []]
    check(
        "code actions explain, fix and ask on a range",
        titles == ["tandem: explain", "tandem: fix", "tandem: ask…"],
        repr(titles),
    )
    # Without codeActionLiteralSupport they are Commands running tandem.prompt with uri and range.
    first = (actions or [None])[0]
    ok = (
        isinstance(first, types.Command)
        and first.command == "tandem.prompt"
        and first.arguments[0]["uri"] == uri(args, "a.txt")
        and first.arguments[0]["range"]["end"]["line"] == 1
    )
    check("code actions are Commands without literal support", ok, repr(first))
    await asyncio.wait_for(s.client.shutdown_async(None), TIMEOUT)
    await expect_error(s, "a tandem command after shutdown is -32600", "tandem.stop", None, -32600)
    s.client.exit(None)
    await s.client.stop()


async def approvals(args):
    # The first write is allowed once, the second denied, the third dismissed.
    s = Session(args, answers=["Allow once", "Deny", None])
    await s.start(capabilities(show_message=True))
    r = await s.command("tandem.prompt", {"text": "write a.txt"})
    check("tandem.prompt answers a turnId", str(value(r, "turnId") or "").startswith("t"), repr(r))
    if await s.wait_log("wrote a"):
        asked = s.asked[0] if s.asked else None
        titles = [a.title for a in (asked.actions or [])] if asked else []
        check("the approval offers Allow once, Always allow, Deny", titles == ["Allow once", "Always allow", "Deny"], repr(titles))
        message = asked.message if asked else ""
        check(
            "the approval names the tool, the path and shows the diff",
            "write_file" in message and "a.txt" in message and "+one" in message,
            repr(message),
        )
    await s.command("tandem.prompt", {"text": "write b.txt"})
    await s.wait_log("b denied")
    await s.command("tandem.prompt", {"text": "write c.txt"})
    await s.wait_log("c dismissed")
    check("three approvals were asked", len(s.asked) == 3, repr(len(s.asked)))
    check("no showDocument without the capability", not s.shown, repr(s.shown))
    await s.stop()


async def no_show_message(args):
    s = Session(args, answers=["Allow once"])
    await s.start(capabilities(show_message=False))
    await s.command("tandem.prompt", {"text": "write a.txt"})
    await s.wait_log("denied by default")
    check("no showMessageRequest was sent", len(s.asked) == 0, repr(s.asked))
    await s.stop()


async def opt_in_show_message(args):
    # eglot's case: no `window.showMessage` declared, but it answers showMessageRequest; the
    # user opts in through initializationOptions.
    s = Session(args, answers=["Allow once"])
    await s.start(capabilities(show_message=False), options={"approvals": "showMessageRequest"})
    await s.command("tandem.prompt", {"text": "write a.txt"})
    await s.wait_log("allowed after opting in")
    check("the approval was asked with showMessageRequest", len(s.asked) == 1, repr(len(s.asked)))
    await s.stop()


async def progress(args):
    s = Session(args)
    await s.start(capabilities(show_message=True, progress=True, show_document=True))
    await s.command("tandem.prompt", {"text": "tell me a story"})
    done = await s.wait_for(
        "progress ends", lambda: any(v.get("kind") == "end" for _, v in s.progress)
    )
    if done:
        kinds = [v.get("kind") for _, v in s.progress]
        check("workDoneProgress/create came first", len(s.created) == 1, repr(s.created))
        check(
            "progress is begin, report…, end",
            kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds,
            repr(kinds),
        )
        begin = s.progress[0][1]
        check("begin shows the prompt", "tell me a story" in (begin.get("message") or ""), repr(begin))
        reports = [v.get("message") or "" for _, v in s.progress if v.get("kind") == "report"]
        check("a report shows the latest text", any("upon a time" in m for m in reports), repr(reports))
        check(
            "every message has the created token",
            all(t == s.created[0] for t, _ in s.progress),
            repr([t for t, _ in s.progress]),
        )
    if await s.wait_log("Once upon a time, the end."):
        check("logMessage has the whole answer", "Once upon a time, the end." in s.logs, repr(s.logs))
    if await s.wait_for("the transcript is shown", lambda: len(s.shown) == 1):
        shown = s.shown[0]
        expected = "file://" + os.path.join(args.data_dir, "transcripts")
        check("showDocument opens the transcript without focus", shown.uri.startswith(expected) and shown.take_focus is False, repr(shown))
        path = shown.uri[len("file://"):]
        text = open(path).read() if os.path.exists(path) else ""
        check("the transcript holds the prompt and the answer", "tell me a story" in text and "Once upon a time, the end." in text, repr(text))
    await s.stop()


async def progress_cancel(args):
    # The progress of a turn offers a cancel button; pressing it stops the turn.
    s = Session(args)
    await s.start(capabilities(show_message=True, progress=True))
    await s.command("tandem.prompt", {"text": "a long story"})
    if await s.wait_for("progress begins", lambda: any(v.get("kind") == "begin" for _, v in s.progress)):
        token, begin = next((t, v) for t, v in s.progress if v.get("kind") == "begin")
        check("the progress is cancellable", begin.get("cancellable") is True, repr(begin))
        s.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    ended = await s.wait_for("progress ends", lambda: any(v.get("kind") == "end" for _, v in s.progress))
    if ended:
        end = next(v for _, v in s.progress if v.get("kind") == "end")
        check("cancel stops the turn", end.get("message") == "stopped", repr(end))
    await s.stop()


async def ordering(args):
    pairs = int(os.environ.get("TANDEM_LSP_PAIRS", "50"))
    s = Session(args)
    await s.start(capabilities(show_message=True))
    context = uri(args, "context.txt")
    notes = uri(args, "notes.txt")
    s.client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=notes, language_id="plaintext", version=1, text="old text\n")
        )
    )
    futures = []
    # One burst, written back to back: every prompt names a file that is not open (read from
    # disk), and its stop follows it at once.
    for i in range(pairs):
        futures.append(s.command_future("tandem.prompt", {"text": f"explain {i}", "uri": context}))
        futures.append(s.command_future("tandem.stop"))
    # The change is sent just before the prompt that reads the open document.
    s.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=notes, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="CHANGED-TEXT-42\n")],
        )
    )
    last = s.command_future("tandem.prompt", {"text": "explain the notes", "uri": notes})
    results = await asyncio.wait_for(
        asyncio.gather(*futures, last, return_exceptions=True), TIMEOUT * 3
    )
    prompts, stops = results[0:-1:2], results[1:-1:2]
    bad_prompts = [(i, r) for i, r in enumerate(prompts) if not value(r, "turnId")]
    bad_stops = [(i, r) for i, r in enumerate(stops) if value(r, "stopped") is not True]
    check(f"all {pairs} prompts started a turn", not bad_prompts, repr(bad_prompts[:3]))
    check(f"all {pairs} stops stopped the turn their prompt started", not bad_stops, repr(bad_stops[:3]))
    check("the last prompt started a turn", bool(value(results[-1], "turnId")), repr(results[-1]))
    await s.wait_log("slow reply")
    await s.stop()


async def restart(args):
    s = Session(args)
    await s.start(capabilities(show_message=True))
    await s.command("tandem.prompt", {"text": "remember the llama"})
    await s.wait_log("The llama is remembered.")
    await s.stop()
    s = Session(args)
    await s.start(capabilities(show_message=True))
    await s.command("tandem.prompt", {"text": "which animal?"})
    await s.wait_log("A llama.")
    r = await s.command("tandem.newSession")
    check("tandem.newSession answers a sessionId", str(value(r, "sessionId") or "").startswith("s"), repr(r))
    await s.stop()


async def expect_error(s, name, command, argument, code):
    try:
        r = await s.command(command, argument)
        check(name, False, f"answered {r!r}")
    except asyncio.TimeoutError:
        check(name, False, "timed out")
    except Exception as e:  # pygls raises JsonRpc*Error with the code
        got = getattr(e, "code", None)
        check(name, got == code, f"{type(e).__name__} code={got}: {e}")


async def commands(args):
    s = Session(args)
    await s.start(capabilities(show_message=True))
    await expect_error(s, "an unknown mode is invalid params", "tandem.setMode", {"mode": "bogus"}, -32602)
    r = await s.command("tandem.setMode", {"mode": "autoEdit"})
    check("tandem.setMode answers the mode", value(r, "mode") == "autoEdit", repr(r))
    await s.command("tandem.prompt", {"text": "write u.txt"})
    await s.wait_log("wrote u")
    path = os.path.join(args.cwd, "u.txt")
    check("autoEdit wrote without asking", os.path.exists(path) and not s.asked, repr(s.asked))
    r = await s.command("tandem.undo")
    output = value(r, "output") or ""
    check("tandem.undo runs /undo and answers its output", "Undid the last turn" in output, repr(r))
    check("the undone write is gone from disk", not os.path.exists(path), "u.txt still there")
    await expect_error(s, "steering with no turn running is refused", "tandem.steer", {"text": "faster"}, -32000)
    r = await s.command("tandem.switchModel", {"model": "mock-2"})
    check("tandem.switchModel answers the model", value(r, "model") == "mock-2", repr(r))
    await s.command("tandem.prompt", {"text": "who are you"})
    await s.wait_log("I am mock-2")
    await expect_error(s, "an unknown tandem command is method not found", "tandem.bogus", {}, -32601)
    await expect_error(s, "a prompt without text is invalid params", "tandem.prompt", {}, -32602)
    r = await s.command("tandem.stop")
    check("tandem.stop with no turn answers stopped false", value(r, "stopped") is False, repr(r))
    await s.stop()


async def shell_and_late(args):
    # The second request is held open until the test releases it after `tandem.stop`.
    release = asyncio.Event()
    s = Session(args, answers=["Always allow", (release, "Allow once")])

    await s.start(capabilities(show_message=True))
    await s.command("tandem.prompt", {"text": "run the echo"})
    if await s.wait_log("ran it"):
        message = s.asked[0].message
        check("a shell approval shows the command", "echo hello-from-lsp" in message, repr(message))
        titles = [a.title for a in s.asked[0].actions]
        check("a safe prefix offers Always allow", titles == ["Allow once", "Always allow", "Deny"], repr(titles))
    await s.command("tandem.prompt", {"text": "write never.txt"})
    await s.wait_for("the second approval is open", lambda: len(s.asked) == 2)
    r = await s.command("tandem.stop")
    check("tandem.stop during an open approval stops the turn", value(r, "stopped") is True, repr(r))
    release.set()
    await s.command("tandem.prompt", {"text": "still there?"})
    await s.wait_log("still here")
    check("the late answer did not run the write", not os.path.exists(os.path.join(args.cwd, "never.txt")), "never.txt written")
    await s.stop()


def open_doc(s, uri, text):
    s.client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="plaintext", version=1, text=text)
        )
    )


async def apply_edit(args):
    notes = uri(args, "notes.txt")
    s = Session(args, answers=["Allow once", "Allow once", "Allow once"])
    s.edit_answers = [(True, None), (False, "the user refused the edit")]
    await s.start(capabilities(show_message=True, apply_edit=True))
    open_doc(s, notes, "unsaved buffer line\n")
    await s.command("tandem.prompt", {"text": "fix the notes"})
    await s.wait_log("done 1")
    check("one applyEdit for the open document", len(s.edits) == 1, repr(s.edits))
    if s.edits:
        changes = s.edits[0].edit.changes or {}
        edits = changes.get(notes) or []
        check(
            "the edit replaces the buffer with the new text",
            len(edits) == 1 and edits[0].new_text == "saved buffer line\n" and edits[0].range.end.line == 1,
            repr(changes),
        )
    await s.command("tandem.prompt", {"text": "again"})
    await s.wait_log("done 2")
    check("the refused applyEdit was asked", len(s.edits) == 2, repr(len(s.edits)))
    await s.stop()
    # Without workspace.applyEdit an open document is still read from the buffer, but the
    # approved edit is written to disk.
    s = Session(args, answers=["Allow once"])
    await s.start(capabilities(show_message=True))
    open_doc(s, notes, "disk line\n")
    await s.command("tandem.prompt", {"text": "shout"})
    await s.wait_log("done 3")
    check("no applyEdit without the capability", not s.edits, repr(s.edits))
    await s.stop()


async def questions(args):
    s = Session(args, answers=["blue"])
    await s.start(capabilities(show_message=True))
    await s.command("tandem.prompt", {"text": "pick a colour"})
    await s.wait_log("picked")
    asked = s.asked[0] if s.asked else None
    titles = [a.title for a in (asked.actions or [])] if asked else []
    check("a question with choices is a showMessageRequest with them", titles == ["red", "blue"], repr(titles))
    check("the question is the message", asked is not None and "Which colour?" in asked.message, repr(asked))
    await s.command("tandem.prompt", {"text": "ask me anything"})
    await s.wait_log("carried on")
    check("a free-text question sends no request", len(s.asked) == 1, repr(len(s.asked)))
    await s.stop()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("scenario")
    p.add_argument("--tandem", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--cwd", required=True)
    args = p.parse_args()
    scenario = {
        "initialize": initialize,
        "approvals": approvals,
        "no_show_message": no_show_message,
        "opt_in_show_message": opt_in_show_message,
        "progress": progress,
        "progress_cancel": progress_cancel,
        "ordering": ordering,
        "restart": restart,
        "commands": commands,
        "shell_and_late": shell_and_late,
        "apply_edit": apply_edit,
        "questions": questions,
    }[args.scenario]
    try:
        await scenario(args)
    except Exception as e:  # a crash is a failure with its reason, never a silent pass
        check(f"scenario {args.scenario} ran", False, f"{type(e).__name__}: {e}")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    asyncio.run(main())
