#!/usr/bin/env python3
"""An MCP server over stdio, written with the official Python SDK (`mcp` on PyPI), that the MCP
client tests start as a child process (installed by tests/mcp/setup). `stdio_server.py`, no
arguments; it logs nothing to stdout, which belongs to the protocol.

Tools:
  env                returns the process environment as a JSON object (for the environment filter)
  echo {text}        returns text; annotated readOnlyHint: true
  slow {ms}          sleeps ms milliseconds, then answers (for timeouts)
  crash              ends the process at once, mid-call
  barrier {key, parties}
                     answers "met N" once `parties` calls with the same key are in progress
                     at the same time, or "alone" after 20 s; annotated readOnlyHint: true
                     (proves that the client runs read-only calls concurrently)
"""

import asyncio
import json
import os

from mcp.server import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("tandem-test-stdio")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def env() -> str:
    """Returns this process's environment as a JSON object."""
    return json.dumps(dict(os.environ), sort_keys=True)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Returns the text it is given."""
    return text


@server.tool()
async def slow(ms: int) -> str:
    """Sleeps ms milliseconds, then answers."""
    await asyncio.sleep(ms / 1000)
    return f"slept {ms} ms"


_waiting: dict[str, list[asyncio.Event]] = {}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def barrier(key: str, parties: int = 2) -> str:
    """Waits until `parties` calls with the same key are in progress at once."""
    here = asyncio.Event()
    group = _waiting.setdefault(key, [])
    group.append(here)
    if len(group) >= parties:
        for event in group:
            event.set()
    try:
        await asyncio.wait_for(here.wait(), 20)
    except asyncio.TimeoutError:
        return "alone"
    return f"met {len(group)}"


@server.tool()
def crash() -> str:
    """Ends the server process at once (no answer)."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
