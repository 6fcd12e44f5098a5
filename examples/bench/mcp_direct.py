"""The anchor of the MCP benchmark (examples/bench/mcp.rs): the same `echo` call tandem makes,
made directly by the official Python SDK's client to the same stdio server
(tests/mcp/stdio_server.py). Prints one JSON line: {"median_us": N, "samples": [...]}.

usage: python mcp_direct.py SERVER_SCRIPT WARMUPS RUNS
"""

import asyncio
import json
import statistics
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    script, warmups, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    params = StdioServerParameters(command=sys.executable, args=[script])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            samples = []
            for i in range(warmups + runs):
                start = time.perf_counter()
                result = await session.call_tool("echo", {"text": f"call {i}"})
                elapsed = time.perf_counter() - start
                if result.is_error or result.content[0].text != f"call {i}":
                    raise SystemExit(f"echo answered {result!r}")
                if i >= warmups:
                    samples.append(elapsed * 1e6)
    print(json.dumps({"median_us": statistics.median(samples), "samples": samples}))


asyncio.run(main())
