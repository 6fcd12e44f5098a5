#!/usr/bin/env python3
"""Checks every message `tandem acp` sent, as logged by wiretap.py, against the official ACP JSON
schema (schema/schema.json of the pinned @agentclientprotocol/sdk npm package, see package.json).

    validate.py LOG [SCHEMA]

Each message is checked twice: its envelope against the schema's `Agent` message type, and its
payload against the exact type its method calls for (a response is matched to the method of
the client request with its id, read from the same log). A method the schema does not know
fails, unless it is an extension method (`_`-prefixed), which the schema leaves open. Prints
one line per failure and a count per method; the exit status is 1 on any failure.
"""

import collections
import json
import pathlib
import sys

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

DEFAULT_SCHEMA = (
    pathlib.Path(__file__).parent / "node_modules/@agentclientprotocol/sdk/schema/schema.json"
)

# What the agent answers to each client request.
RESPONSE_OF = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "logout": "LogoutResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/resume": "ResumeSessionResponse",
    "session/close": "CloseSessionResponse",
    "session/fork": "ForkSessionResponse",
    "session/delete": "DeleteSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
}
# The params of each request the agent sends the client.
AGENT_REQUEST = {
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "session/request_permission": "RequestPermissionRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/release": "ReleaseTerminalRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "elicitation/create": "CreateElicitationRequest",
}
# The params of each notification the agent sends.
AGENT_NOTIFICATION = {
    "session/update": "SessionNotification",
    "$/cancel_request": "CancelRequestNotification",
    "elicitation/complete": "CompleteElicitationNotification",
}


def main() -> int:
    log_path = sys.argv[1]
    schema_path = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_SCHEMA
    schema = json.loads(schema_path.read_text())
    defs = schema["$defs"]
    agent_branch = next(b for b in schema["anyOf"] if b.get("title") == "Agent")
    envelope = Draft202012Validator({"$defs": defs, **agent_branch})
    validators: dict[str, Draft202012Validator] = {}

    def of(name: str) -> Draft202012Validator:
        if name not in validators:
            if name not in defs:
                raise SystemExit(f"the schema at {schema_path} has no type {name}")
            validators[name] = Draft202012Validator({"$defs": defs, "$ref": f"#/$defs/{name}"})
        return validators[name]

    entries = [json.loads(l) for l in pathlib.Path(log_path).read_text().splitlines() if l]
    client_requests: dict[str, str] = {}
    failures: list[str] = []
    counts: collections.Counter[str] = collections.Counter()

    def fail(line: str, why: str) -> None:
        shown = line if len(line) <= 400 else line[:400] + f"… ({len(line)} bytes)"
        failures.append(f"FAIL {why}\n     {shown}")

    def check(validator: Draft202012Validator, value, line: str, what: str) -> None:
        error = best_match(validator.iter_errors(value))
        if error is not None:
            path = "/".join(str(p) for p in error.absolute_path)
            fail(line, f"{what}: {error.message[:300]} (at /{path})")

    for entry in entries:
        line = entry["line"]
        try:
            message = json.loads(line)
        except json.JSONDecodeError as e:
            if entry["dir"] == "out":
                fail(line, f"tandem sent a line that is not JSON: {e}")
            continue
        if entry["dir"] == "in":
            if isinstance(message, dict) and "method" in message and "id" in message:
                client_requests[json.dumps(message["id"])] = message["method"]
            continue
        if not isinstance(message, dict):
            fail(line, "tandem sent a JSON value that is not an object")
            continue
        check(envelope, message, line, "envelope")
        method = message.get("method")
        if method is not None and "id" in message:
            counts[f"request {method}"] += 1
            if method in AGENT_REQUEST:
                check(of(AGENT_REQUEST[method]), message.get("params"), line, f"{method} params")
            elif not method.startswith("_"):
                fail(line, f"request {method} is not in the ACP schema")
        elif method is not None:
            counts[f"notification {method}"] += 1
            if method in AGENT_NOTIFICATION:
                check(of(AGENT_NOTIFICATION[method]), message.get("params"), line, f"{method} params")
            elif not method.startswith("_"):
                fail(line, f"notification {method} is not in the ACP schema")
        else:
            answered = client_requests.get(json.dumps(message.get("id")))
            if "error" in message:
                counts[f"error for {answered}"] += 1
                check(of("Error"), message["error"], line, f"error for {answered}")
            elif answered is None:
                fail(line, "a result for no request the client sent")
            else:
                counts[f"result {answered}"] += 1
                if answered in RESPONSE_OF:
                    check(of(RESPONSE_OF[answered]), message.get("result"), line, f"{answered} result")
                elif not answered.startswith("_"):
                    fail(line, f"a result for {answered}, which the ACP schema does not define")

    for failure in failures:
        print(failure)
    total = sum(counts.values())
    summary = ", ".join(f"{k} ×{v}" for k, v in sorted(counts.items()))
    print(f"schema check: {total} messages from tandem, {len(failures)} invalid ({summary})")
    return 1 if failures or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
