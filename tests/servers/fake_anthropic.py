#!/usr/bin/env python3
"""Fake Anthropic Messages API (POST /v1/messages) for tests: answers from
fixtures in tests/fixtures/anthropic/ (see fake_provider.py for the script
format and control endpoints). Like the real API it refuses a request
without x-api-key (401) or anthropic-version (400). Loopback only; prints
its port; exits after --lifetime seconds."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_provider  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "anthropic")


def check(headers, body):
    if not headers.get("x-api-key"):
        return 401, {"type": "error", "error": {"type": "authentication_error",
                                                "message": "x-api-key header is required"}}
    if not headers.get("anthropic-version"):
        return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                "message": "anthropic-version: header is required"}}
    if not isinstance(body, dict) or "max_tokens" not in body or "messages" not in body:
        return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                "message": "max_tokens: Field required"}}
    return None


def ev(name, data):
    return {"event": name, "data": dict({"type": name}, **data)}


def to_sse(msg):
    """A Messages API response as its event stream (message_start, one
    start/delta/stop triple per content block (thinking as thinking_delta then
signature_delta, redacted_thinking whole in its start event), message_delta,
message_stop)."""
    usage = dict(msg.get("usage", {}))
    out_tokens = usage.get("output_tokens", 0)
    start = dict(msg, content=[], stop_reason=None, stop_sequence=None, usage=dict(usage, output_tokens=1))
    events = [ev("message_start", {"message": start})]
    for i, block in enumerate(msg.get("content", [])):
        if block["type"] == "text":
            events.append(ev("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}}))
            events.append(ev("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": block["text"]}}))
        elif block["type"] == "thinking":
            # the documented order: the text in thinking_delta events, then
            # the signature in one signature_delta just before the stop
            events.append(ev("content_block_start", {"index": i, "content_block": {
                "type": "thinking", "thinking": "", "signature": ""}}))
            text = block["thinking"]
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                if piece:
                    events.append(ev("content_block_delta", {"index": i, "delta": {
                        "type": "thinking_delta", "thinking": piece}}))
            events.append(ev("content_block_delta", {"index": i, "delta": {
                "type": "signature_delta", "signature": block["signature"]}}))
        elif block["type"] == "redacted_thinking":
            # sent whole in content_block_start, no deltas
            events.append(ev("content_block_start", {"index": i, "content_block": block}))
        elif block["type"] == "tool_use":
            events.append(ev("content_block_start", {"index": i, "content_block": dict(block, input={})}))
            events.append(ev("content_block_delta", {"index": i, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}))}}))
        events.append(ev("content_block_stop", {"index": i}))
    events.append(ev("message_delta", {"delta": {"stop_reason": msg.get("stop_reason"), "stop_sequence": None},
                                       "usage": {"output_tokens": out_tokens}}))
    events.append(ev("message_stop", {}))
    return events


if __name__ == "__main__":
    fake_provider.main("Anthropic", {"/v1/messages"}, FIXTURES, check, to_sse)
