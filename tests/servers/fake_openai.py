#!/usr/bin/env python3
"""Fake OpenAI Chat Completions API (POST /v1/chat/completions, also
/chat/completions as some compatible servers mount it) for tests: answers
from fixtures in tests/fixtures/openai/ (see fake_provider.py for the script
format and control endpoints). Loopback only; prints its port; exits after
--lifetime seconds."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_provider  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "openai")


def check(headers, body):
    if not isinstance(body, dict) or "messages" not in body or "model" not in body:
        return 400, {"error": {"message": "you must provide a model parameter", "type": "invalid_request_error",
                               "param": None, "code": None}}
    return None


def to_sse(comp):
    """A chat.completion as its chunk stream: role, content, each tool call
    (id and name, then arguments), the finish reason, a usage chunk with
    empty choices (stream_options.include_usage), and [DONE]."""
    base = {"id": comp.get("id"), "object": "chat.completion.chunk", "created": comp.get("created"),
            "model": comp.get("model")}

    def chunk(delta, finish=None):
        return {"data": dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])}

    choice = comp["choices"][0]
    msg = choice["message"]
    events = [chunk({"role": "assistant", "content": ""})]
    if msg.get("content"):
        events.append(chunk({"content": msg["content"]}))
    for i, call in enumerate(msg.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]}))
    events.append(chunk({}, choice.get("finish_reason")))
    events.append({"data": dict(base, choices=[], usage=comp.get("usage"))})
    events.append({"data": "[DONE]"})
    return events


if __name__ == "__main__":
    fake_provider.main("OpenAI", {"/v1/chat/completions", "/chat/completions"}, FIXTURES, check, to_sse)
