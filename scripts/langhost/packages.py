"""Every distribution installed where the program runs, as JSON: name (PEP 503 normalised), version, and
the path of the pulumi-plugin.json in its top-level package or "". The set `pip list` reports: the first
distribution of a name on sys.path wins. Run by the language host (main.go) with the program's Python."""

import importlib.metadata
import importlib.util
import json
import os
import re

seen, out = set(), []
for dist in importlib.metadata.distributions():
    name = dist.metadata["Name"] or ""
    key = re.sub(r"[-_.]+", "-", name).lower()
    if not key or key in seen:
        continue
    seen.add(key)
    plugin = ""
    module = name.replace("-", "_")
    try:
        # A dotted name's find_spec imports its parent package: top-level packages only, nothing imported.
        spec = importlib.util.find_spec(module) if module.isidentifier() else None
        for location in (spec.submodule_search_locations or []) if spec else []:
            path = os.path.join(str(location), "pulumi-plugin.json")
            if os.path.isfile(path):
                plugin = path
                break
    except Exception:  # a distribution whose module cannot be found is listed without a plugin
        pass
    out.append({"name": key, "version": dist.version, "plugin": plugin})
print(json.dumps(out))
