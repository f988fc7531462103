"""JSON output for the committed manifests: objects indented, lists of scalars kept on one line."""
from __future__ import annotations

import json


def dumps(obj, indent: int = 1, _level: int = 0) -> str:
    pad = " " * (indent * (_level + 1))
    end = " " * (indent * _level)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {dumps(v, indent, _level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    if isinstance(obj, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in obj):
            return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in obj) + "]"
        return "[\n" + ",\n".join(pad + dumps(v, indent, _level + 1) for v in obj) + "\n" + end + "]"
    return json.dumps(obj, ensure_ascii=False)
