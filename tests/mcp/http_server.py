#!/usr/bin/env python3
"""An MCP server over streamable HTTP, written with the official Python SDK (`mcp` on PyPI), that
the MCP client tests start and talk to (installed by tests/mcp/setup).

    http_server.py [--port N] [--token TOKEN] [--sse]

It listens on 127.0.0.1 (port 0, the default, picks a free one), prints its URL
(http://127.0.0.1:PORT/mcp) as the first line of stdout, and answers 401 to any request without
`Authorization: Bearer TOKEN` (TOKEN from --token, else $MCP_TEST_TOKEN, else "test-token").
With --sse it serves the same tools over the SDK's deprecated HTTP+SSE transport instead (URL
http://127.0.0.1:PORT/sse), for the test that tandem refuses that transport by name.

Tools:
  echo {text}        returns text; annotated readOnlyHint: true
  slow {ms}          sleeps ms milliseconds, then answers (for timeouts)
  crash              ends the process at once, mid-call
  add_tool {name}    registers a tool `name` (which echoes) and sends notifications/tools/list_changed
  image              returns a 1x1 PNG image content
  resource           returns an embedded text resource
  fail {reason}      returns a result with isError: true and the reason as its text
  stall_listing      sends notifications/tools/list_changed, after which tools/list never answers
                     (for the test that a stop does not wait for a stalled re-listing)
"""

import argparse
import asyncio
import os
import socket

import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import EmbeddedResource, TextResourceContents, ToolAnnotations

# The smallest valid PNG: one transparent pixel.
PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)

class StallableServer(MCPServer):
    """An MCPServer whose tools/list hangs forever once `stall_listing` was called."""

    stalled = False

    async def list_tools(self):
        if self.stalled:
            await asyncio.Event().wait()
        return await super().list_tools()


server = StallableServer("tandem-test-http")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Returns the text it is given."""
    return text


@server.tool()
async def slow(ms: int) -> str:
    """Sleeps ms milliseconds, then answers."""
    await asyncio.sleep(ms / 1000)
    return f"slept {ms} ms"


@server.tool()
def crash() -> str:
    """Ends the server process at once (no answer)."""
    os._exit(3)


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Registers a new tool `name` and tells the client its tool list changed."""

    def added(text: str = "") -> str:
        return f"{name}: {text}"

    server.add_tool(added, name=name, description=f"Added at run time by add_tool ({name}).")
    # The session's own notification: clients of protocol versions before 2026-07-28 (rmcp's
    # `initialize` lifecycle) get notifications/tools/list_changed this way.
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
async def stall_listing(ctx: Context) -> str:
    """Makes every later tools/list hang, and says the tool list changed."""
    server.stalled = True
    await ctx.session.send_tool_list_changed()
    # Answer well after the notification, so the client has handled it before the answer (rmcp
    # handles notifications in tasks of their own, which may otherwise trail the response).
    await asyncio.sleep(0.5)
    return "listing stalled"


@server.tool()
def image() -> Image:
    """Returns a 1x1 PNG."""
    return Image(data=PNG_1X1, format="png")


@server.tool()
def resource() -> EmbeddedResource:
    """Returns an embedded text resource."""
    return EmbeddedResource(
        type="resource",
        resource=TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="remember the milk"),
    )


@server.tool()
def fail(reason: str = "it failed on purpose") -> str:
    """Answers with isError: true."""
    raise ToolError(reason)


class RequireBearer:
    """ASGI middleware: 401 (with a Bearer challenge) unless the request carries the token.
    Lifespan events pass through, since the SDK's session manager runs in the app's lifespan."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != self.expected:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="tandem-test"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b'{"error": "unauthorized"}'})
            return
        await self.app(scope, receive, send)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=os.environ.get("MCP_TEST_TOKEN", "test-token"))
    parser.add_argument("--sse", action="store_true", help="serve the deprecated HTTP+SSE transport")
    args = parser.parse_args()

    # Bind and listen before printing the URL, so a client that reads it can connect at once.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    path = "/sse" if args.sse else "/mcp"
    print(f"http://127.0.0.1:{sock.getsockname()[1]}{path}", flush=True)

    inner = server.sse_app() if args.sse else server.streamable_http_app()
    app = RequireBearer(inner, args.token)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
