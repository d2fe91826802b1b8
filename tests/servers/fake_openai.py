#!/usr/bin/env python3
"""Fake OpenAI Chat Completions API (POST /v1/chat/completions, also
/chat/completions as some compatible servers mount it) and Responses API
(POST /v1/responses) for tests: answers
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
    if isinstance(body, dict) and "input" in body and "model" in body:
        return None  # a Responses API request
    if not isinstance(body, dict) or "messages" not in body or "model" not in body:
        return 400, {"error": {"message": "you must provide a model parameter", "type": "invalid_request_error",
                               "param": None, "code": None}}
    return None


def responses_sse(resp):
    """A Responses API response object as its semantic event stream:
    response.created, per output item output_item.added, its deltas
    (output_text.delta, function_call_arguments.delta,
    reasoning_summary_text.delta) and output_item.done, then
    response.completed (or .incomplete) carrying the whole response."""
    seq = [0]

    def ev(name, data):
        seq[0] += 1
        return {"event": name, "data": dict({"type": name, "sequence_number": seq[0]}, **data)}

    start = dict(resp, status="in_progress", output=[], usage=None)
    events = [ev("response.created", {"response": start})]
    for i, item in enumerate(resp.get("output", [])):
        t = item.get("type")
        if t == "message":
            events.append(ev("response.output_item.added", {"output_index": i, "item": dict(
                item, status="in_progress", content=[])}))
            for j, c in enumerate(item.get("content", [])):
                events.append(ev("response.content_part.added", {"item_id": item["id"], "output_index": i,
                                                                  "content_index": j, "part": dict(c, text="")}))
                events.append(ev("response.output_text.delta", {"item_id": item["id"], "output_index": i,
                                                                 "content_index": j, "delta": c.get("text", "")}))
                events.append(ev("response.output_text.done", {"item_id": item["id"], "output_index": i,
                                                                "content_index": j, "text": c.get("text", "")}))
        elif t == "function_call":
            events.append(ev("response.output_item.added", {"output_index": i, "item": dict(
                item, status="in_progress", arguments="")}))
            events.append(ev("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": i,
                                                                         "delta": item.get("arguments", "")}))
            events.append(ev("response.function_call_arguments.done", {"item_id": item["id"], "output_index": i,
                                                                        "arguments": item.get("arguments", "")}))
        elif t == "reasoning":
            events.append(ev("response.output_item.added", {"output_index": i, "item": dict(item, summary=[])}))
            for j, part in enumerate(item.get("summary", [])):
                events.append(ev("response.reasoning_summary_text.delta", {
                    "item_id": item["id"], "output_index": i, "summary_index": j, "delta": part["text"]}))
        events.append(ev("response.output_item.done", {"output_index": i, "item": item}))
    terminal = "response.incomplete" if resp.get("status") == "incomplete" else "response.completed"
    events.append(ev(terminal, {"response": resp}))
    return events


def to_sse(comp):
    """A chat.completion as its chunk stream: role, content, each tool call
    (id and name, then arguments), the finish reason, a usage chunk with
    empty choices (stream_options.include_usage), and [DONE]. A Responses
    API object (object "response") goes through responses_sse."""
    if comp.get("object") == "response":
        return responses_sse(comp)
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
        # compatible servers (llama.cpp) may send a numeric id and no type: keep what the fixture has
        head = {"index": i, "id": call["id"], "function": {"name": call["function"]["name"], "arguments": ""}}
        if "type" in call:
            head["type"] = call["type"]
        events.append(chunk({"tool_calls": [head]}))
        events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]}))
    events.append(chunk({}, choice.get("finish_reason")))
    events.append({"data": dict(base, choices=[], usage=comp.get("usage"))})
    events.append({"data": "[DONE]"})
    return events


if __name__ == "__main__":
    fake_provider.main("OpenAI", {"/v1/chat/completions", "/chat/completions",
                                  "/v1/responses", "/responses"}, FIXTURES, check, to_sse)
