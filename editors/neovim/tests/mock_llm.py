#!/usr/bin/env python3
"""Mock OpenAI-compatible chat completions server for the tandem Neovim plugin's tests.

Usage: mock_llm.py --script RESPONSES.json --log REQUESTS.jsonl

It listens on 127.0.0.1 on a free port and prints that port on its first stdout line.
Every `POST /v1/chat/completions` takes the next scripted response from the queue and streams it
as Server-Sent Events (`data: {chat.completion.chunk}` ... `data: [DONE]`), then closes the
connection. Each request body is appended as one JSON line to the log file before answering, so
specs can assert on what tandem sent (model ids, steering messages, tool results).

The script file is a JSON list; each item is one response, a list of steps:
  {"text": "..."}                      assistant content delta
  {"reasoning": "..."}                 reasoning_content delta
  {"tool_call": {"id", "name", "arguments"}}   one tool call; arguments (object or string) are
                                       streamed in two chunks, as real servers split them
  {"delay_ms": N}                      pause; aborts early when the client hangs up (stop tests)
  {"finish": "stop" | "tool_calls"}    finish_reason (default: tool_calls if a call was sent)
When the queue is empty the mock answers "(mock: no scripted response left)".
Python 3.11 standard library only.
"""

import argparse
import json
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
QUEUE: list = []
LOG_PATH = None
COUNTER = [0]


class ClientGone(Exception):
    """The client closed the socket (for example tandem stopped the turn)."""


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, closed after the body, so tandem never waits for a
    # keep-alive connection and the end of the stream is unambiguous.
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):  # keep stdout for the port line only
        sys.stderr.write("mock_llm: " + (fmt % args) + "\n")

    def do_GET(self):
        body = b'{"object":"list","data":[{"id":"mock-model"},{"id":"mock-model-2"}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsable": raw.decode("utf-8", "replace")}
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_error(404, "mock only serves /v1/chat/completions")
            return
        with LOCK:
            if LOG_PATH:
                with open(LOG_PATH, "a", encoding="utf-8") as f:
                    f.write(json.dumps(body) + "\n")
            steps = QUEUE.pop(0) if QUEUE else [{"text": "(mock: no scripted response left)"}]
            COUNTER[0] += 1
            n = COUNTER[0]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            self.stream(steps, body.get("model", "mock-model"), n)
        except (BrokenPipeError, ConnectionResetError, ClientGone):
            sys.stderr.write("mock_llm: client closed the stream early\n")

    def chunk(self, model, n, delta=None, finish=None, usage=None):
        obj = {
            "id": f"chatcmpl-mock-{n}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [] if usage else [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        }
        if usage:
            obj["usage"] = usage
        self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
        self.wfile.flush()

    def wait(self, ms):
        # Sleep in small slices and watch the socket: a readable socket that yields no bytes means
        # the client hung up, so a "long delay" response ends as soon as tandem stops the turn.
        deadline = time.monotonic() + ms / 1000.0
        sock = self.connection
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            readable, _, _ = select.select([sock], [], [], min(left, 0.05))
            if readable:
                try:
                    data = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    raise ClientGone()
                if not data:
                    raise ClientGone()

    def stream(self, steps, model, n):
        self.chunk(model, n, delta={"role": "assistant", "content": ""})
        sent_tool = False
        finish = None
        index = 0
        out_tokens = 0
        for step in steps:
            if "text" in step:
                self.chunk(model, n, delta={"content": step["text"]})
                out_tokens += max(1, len(step["text"].split()))
            elif "reasoning" in step:
                self.chunk(model, n, delta={"reasoning_content": step["reasoning"]})
            elif "tool_call" in step:
                call = step["tool_call"]
                args = call.get("arguments", {})
                args = args if isinstance(args, str) else json.dumps(args)
                half = len(args) // 2
                first = {"index": index, "id": call.get("id", f"call_{n}_{index}"), "type": "function",
                         "function": {"name": call["name"], "arguments": args[:half]}}
                self.chunk(model, n, delta={"tool_calls": [first]})
                self.chunk(model, n, delta={"tool_calls": [{"index": index, "function": {"arguments": args[half:]}}]})
                index += 1
                sent_tool = True
            elif "delay_ms" in step:
                self.wait(step["delay_ms"])
            elif "finish" in step:
                finish = step["finish"]
        self.chunk(model, n, finish=finish or ("tool_calls" if sent_tool else "stop"))
        self.chunk(model, n, usage={"prompt_tokens": 100 + n, "completion_tokens": out_tokens + 1,
                                    "total_tokens": 101 + n + out_tokens})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main():
    global LOG_PATH
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", help="JSON file: list of responses (lists of steps)")
    parser.add_argument("--log", help="append each request body as a JSON line here")
    args = parser.parse_args()
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            QUEUE.extend(json.load(f))
    LOG_PATH = args.log
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True  # a handler stuck in a long delay must not block shutdown
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
