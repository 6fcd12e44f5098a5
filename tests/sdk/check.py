"""Consume the mock LLM's Anthropic and Gemini streams with the vendors' official SDKs.

tests/it/providers.rs queues the scripts, runs this with MOCK_ROOT=http://127.0.0.1:PORT and asserts
on the one JSON line it prints: what each SDK parsed out of the stream (text, reasoning, tool
calls, signatures, stop reason, usage). Any SDK error propagates and fails the test.
"""

import base64
import json
import os

import anthropic
from google import genai
from google.genai import types

root = os.environ["MOCK_ROOT"]
result = {}

client = anthropic.Anthropic(api_key="sk-ant-sdk-check", base_url=root, max_retries=0)
with client.messages.stream(
    model="claude-sonnet-4-5",
    max_tokens=1024,
    messages=[{"role": "user", "content": "Read a.txt"}],
) as stream:
    text_events = [event.text for event in stream if event.type == "text"]
    message = stream.get_final_message()
result["anthropic"] = {
    "streamedText": "".join(text_events),
    "blocks": [block.type for block in message.content],
    "text": "".join(b.text for b in message.content if b.type == "text"),
    "thinking": [
        {"thinking": b.thinking, "signature": b.signature}
        for b in message.content
        if b.type == "thinking"
    ],
    "toolUses": [
        {"id": b.id, "name": b.name, "input": b.input}
        for b in message.content
        if b.type == "tool_use"
    ],
    "stopReason": message.stop_reason,
    "usage": {
        "input": message.usage.input_tokens,
        "output": message.usage.output_tokens,
        "cacheRead": message.usage.cache_read_input_tokens,
    },
}

gclient = genai.Client(
    api_key="gm-sdk-check",
    http_options=types.HttpOptions(base_url=root, api_version="v1beta"),
)
text, thoughts, calls, signatures = "", "", [], []
finish, usage = None, None
for chunk in gclient.models.generate_content_stream(
    model="gemini-2.5-flash", contents="Read a.txt"
):
    candidate = chunk.candidates[0]
    for part in (candidate.content.parts if candidate.content else None) or []:
        if part.thought_signature:
            signatures.append(base64.b64encode(part.thought_signature).decode())
        if part.function_call:
            calls.append(
                {"name": part.function_call.name, "args": dict(part.function_call.args)}
            )
        elif part.thought:
            thoughts += part.text or ""
        elif part.text:
            text += part.text
    if candidate.finish_reason:
        finish = candidate.finish_reason.value
    if chunk.usage_metadata:
        usage = {
            "prompt": chunk.usage_metadata.prompt_token_count,
            "candidates": chunk.usage_metadata.candidates_token_count,
        }
result["gemini"] = {
    "text": text,
    "thoughts": thoughts,
    "calls": calls,
    "signatures": signatures,
    "finishReason": finish,
    "usage": usage,
}

print(json.dumps(result))
