"""Validate JSON documents against JSON Schemas with the reference validator (jsonschema).

Reads JSON lines {"schema": <schema or null>, "doc": "<text>"} on stdin ("schema": null means
any JSON object). Writes one JSON line per input: {"ok": bool, "error": str}. Formats (date,
date-time, time, uuid) are checked too.
"""
import json
import sys

import jsonschema

checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
for line in sys.stdin:
    req = json.loads(line)
    try:
        doc = json.loads(req["doc"])
        if req["schema"] is None:
            if not isinstance(doc, dict):
                raise ValueError("not an object")
        else:
            jsonschema.Draft202012Validator(req["schema"], format_checker=checker).validate(doc)
        print(json.dumps({"ok": True, "error": ""}))
    except Exception as e:  # noqa: BLE001 - every failure is reported to the Go test
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}))
    sys.stdout.flush()
