#!/usr/bin/python3
"""A test that needs a missing file reports ctest's skip, never a pass (issue 10, item 7).

Checks, over the tests ctest lists in BUILD:
  1. every test has SKIP_RETURN_CODE 77;
  2. every test script (shell, Python, JavaScript) that uses the shared models, onnxruntime-node,
     torch or Chromium asks for them (tests/support/need.sh, or an explicit exit / return 77),
     and every C test that reads CALQ_SHARED or /usr/share asks with NEED_FILE / SKIP_BECAUSE
     and ends with TEST_RESULT() (tests/support/expect.h);
  3. in practice: a C test and two shell tests pointed at a missing shared folder exit 77.
Usage: skip_rule.py BUILD SRC CALQ TEST_CALIB_ULTRAFACE"""
import json
import os
import re
import subprocess
import sys

build, src, calq, uf_test = sys.argv[1:5]
fails = []
info = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True,
                                 check=True).stdout)
NEEDS = re.compile(r"SHARED|shared_dir|/usr/share|NODE_PATH|onnxruntime|chromium|import torch|models/")
ASKS = {".sh": re.compile(r"need_(files|python|node_module|skip)|exit 77"),
        ".py": re.compile(r"return 77|exit\(77\)"), ".js": re.compile(r"exit\(77\)")}
checked = 0
for t in info["tests"]:
    name = t["name"]
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    if str(props.get("SKIP_RETURN_CODE")) != "77":
        fails.append(f"{name}: no SKIP_RETURN_CODE 77")
    cmd = t.get("command", [])
    for a in cmd[1:] + cmd[:1]:
        ext = os.path.splitext(a)[1]
        if ext in ASKS and os.path.isfile(a) and a.startswith(src):
            text = open(a, encoding="utf-8").read()
            checked += 1
            lint = os.path.relpath(a, src).startswith("tests/lint/")  # read the sources, need nothing
            if not lint and NEEDS.search(text) and not ASKS[ext].search(text):
                fails.append(f"{name}: {os.path.relpath(a, src)} uses shared files or peers but never skips (77)")
            break
    else:
        exe = os.path.basename(cmd[0]) if cmd else ""
        c = os.path.join(src, "tests", "unit", exe + ".c")
        if exe == "calq_conformance":
            c = os.path.join(src, "tests", "conformance", "onnx_backend.c")
        if os.path.isfile(c):
            text = open(c, encoding="utf-8").read()
            checked += 1
            if re.search(r'getenv\("CALQ_SHARED"\)|\bfx_shared(_path)?\(', text) and not (
                    re.search(r"NEED_FILE|SKIP_BECAUSE", text) and "TEST_RESULT()" in text):
                fails.append(f"{name}: {os.path.relpath(c, src)} reads CALQ_SHARED (getenv or fx_shared) but never skips "
                             "(NEED_FILE, TEST_RESULT)")
            if "/usr/share" in text and "77" not in text:
                fails.append(f"{name}: {os.path.relpath(c, src)} reads /usr/share but never returns 77")

# what a missing shared folder does
env = dict(os.environ, CALQ_SHARED="/nonexistent/shared")
r = subprocess.run([uf_test], env=env, capture_output=True, text=True)
if r.returncode != 77:
    fails.append(f"test_calib_ultraface with CALQ_SHARED missing: exit {r.returncode}, expected 77")
for script in ("peers/calib_cli.sh", "peers/fallback.sh"):
    r = subprocess.run(["sh", os.path.join(src, "tests", script), calq, "/nonexistent/shared"], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 77:
        fails.append(f"{script} with a missing shared folder: exit {r.returncode}, expected 77")

for f in fails:
    print("FAIL:", f)
print(f"skip_rule: {len(info['tests'])} tests, {checked} sources checked, {len(fails)} problem(s)")
sys.exit(1 if fails else 0)
