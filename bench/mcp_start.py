"""Start of the studio's tool server (``manage.py mcp_serve``) against a bare MCP server.

    .venv/bin/python bench/mcp_start.py [--rounds 9] [--scratch DIR] [--keep] [--studio-root DIR]

The benchmark's harness starts a new MCP server process for every tool call
(``dora/agent/mcp_tools.py``: ``--temp_dir``, a server per call), and so will the studio's
experiments. Each side is a child process spawned over stdio by the ``mcp`` SDK's own client
(``mcp.client.stdio.stdio_client`` + ``ClientSession``, the SDK the studio serves with), the same way:

* **studio**: ``manage.py mcp_serve --task QID --temp_dir DIR`` (the harness's flags; perception
  ``model``, no checkpoints) on a scratch SQLite database holding the Florence xBD tile
  (../shared/realdata/xbd-hurricane-florence) and one task on it;
* **bare**: ``bench/_mcp_bare.py``, an MCP server of the same SDK with one tool, whose call is the
  tool's direct call (``kernel.tools.call_tool("ras.count_pixels", ...)``, imported when called).

Two figures, each the studio's median over the bare server's median, the sides interleaved
round by round (the side that goes first alternating), median of ``--rounds``:

* **start**: spawn → ``initialize`` → ``list_tools`` (the studio lists its 108 tools);
* **call**: spawn → ``initialize`` → one ``ras.count_pixels`` on the tile's damage mask → the
  process has exited (the harness's call). The two sides must return the same counts
  (hand-checked: value 3 on 26,492 px and value 4 on 274 px, tests/support/florence.py).

The studio lists a plain task's tools from a manifest cached under ``STUDIO_VAR_DIR/cache``
(``kernel.tools.spec.tool_manifest``, keyed by the tools' sources); the first start after a
change of them imports the tools and writes it, printed once as information (the cache is
removed before it).

Also printed (info): the same two ratios in the server process's CPU time (user + system, less
moved by the load of a shared machine than its wall time), ``manage.py mcp_serve --help`` and ``manage.py evaluate_runs --help`` (wall,
median), and the spread (min–max) of every side. Target (issue 35): start and call ≤ 1.3×.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _scratch_studio import scratch_studio  # noqa: E402  (bench/_scratch_studio.py, beside this file)

REAL = ROOT.parent / "shared" / "realdata"
FLORENCE = REAL / "xbd-hurricane-florence"
MASK = "hurricane-florence_00000018_mask.png"
PRE = "hurricane-florence_00000018_pre_original.png"
POST = "hurricane-florence_00000018_post_original.png"
QID = "florence_bench_mcp"
#: hand-checked counts of the mask (tests/support/florence.py)
COUNTS = {"3": 26492, "4": 274}
TARGET = 1.3


def setup(scratch: Path) -> dict:
    """A scratch database and data root with the Florence tile and one task; the child's environment."""
    return scratch_studio(scratch, FLORENCE, question_id=QID, sample_id="bench_mcp", content=lambda layers: {
        "question": "How many pixels show major damage or destruction, per class?",
        "task_category": "perception_and_assessment", "task_category_code": "T1",
        "disaster_type": "hurricane",
        "input_layers": {"pre_image": PRE, "post_image": POST},
        "trajectory": [{"call": "ras.count_pixels", "args": {"mask_path": MASK, "classes": [3, 4]}}],
        "answer_spec": [{"name": "pixels_by_class", "eval_type": "scalar_dict",
                         "source": "<counts> from trajectory[0].obs"}],
    })


async def one(params, *, call: bool, mask: str = MASK) -> float:
    """Seconds from spawn to the tool list (``call=False``) or to the exited process after one
    ``ras.count_pixels`` (``call=True``). The server's CPU time is read by ``timed``."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    t0 = time.perf_counter()
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            if not call:
                tools = await session.list_tools()
                dt = time.perf_counter() - t0
                assert any(t.name.endswith("count_pixels") for t in tools.tools), [t.name for t in tools.tools]
                return dt
            name = "ras_count_pixels"
            result = await session.call_tool(name, {"mask_path": mask, "classes": [3, 4]})
            assert not result.is_error, result.content
            obs = json.loads(result.content[0].text)
            if isinstance(obs, str):
                obs = json.loads(obs)
            assert obs.get("counts") == COUNTS, obs
    return time.perf_counter() - t0


def timed(params, *, call: bool, mask: str) -> tuple[float, float]:
    """(wall seconds of ``one``, CPU seconds of the server process: user + system of the
    children this process waited for, the server exiting when the client closes its stdin)."""
    import anyio

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = anyio.run(lambda: one(params, call=call, mask=mask))
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def timed_cli(args: list[str], env: dict) -> float:
    import subprocess

    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env={**os.environ, **env}, capture_output=True, check=True)
    return time.perf_counter() - t0


def fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}–{max(xs):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--studio-root", default=str(ROOT),
                    help="the checkout whose manage.py is the studio side (another commit, `git archive`d, "
                         "for a before/after against the same database and bare server)")
    args = ap.parse_args()
    base = Path(os.environ.get("STUDIO_BENCH_DIR", "/tmp/studio-bench"))
    base.mkdir(parents=True, exist_ok=True)
    scratch = Path(args.scratch) if args.scratch else Path(tempfile.mkdtemp(prefix="mcp-start-", dir=base))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        env = setup(scratch)
        from django.conf import settings
        from mcp.client.stdio import StdioServerParameters

        from annotation.models import Layer

        stored = Path(settings.STUDIO_DATA_ROOT) / Layer.objects.get(file_name=MASK).path
        data_dir, masks = str(stored.parent), {"studio": MASK, "bare": stored.name}
        work = scratch / "bare-work"
        run_dir = scratch / "temp_dir"
        sides = {
            "studio": StdioServerParameters(command=sys.executable, cwd=args.studio_root,
                                            env={**env, "PYTHONPATH": args.studio_root}, args=[
                str(Path(args.studio_root) / "manage.py"), "mcp_serve", "--task", QID, "--temp_dir", str(run_dir)]),
            "bare": StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=env, args=[
                str(ROOT / "bench" / "_mcp_bare.py"), data_dir, str(work)]),
        }
        times = {(side, call): [] for side in sides for call in (False, True)}
        # the studio's first start after a change of the tools' sources: no tool manifest cached
        # under STUDIO_VAR_DIR/cache, so it imports the tools and writes it (information)
        shutil.rmtree(scratch / "cache", ignore_errors=True)
        cold = timed(sides["studio"], call=False, mask=masks["studio"])
        for side in sides:  # one warm-up each (file caches, .pyc)
            timed(sides[side], call=True, mask=masks[side])
        cpu = {key: [] for key in times}
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for call in (False, True):
                for side in order:
                    wall, used = timed(sides[side], call=call, mask=masks[side])
                    times[side, call].append(wall)
                    cpu[side, call].append(used)
        helps = {"mcp_serve": [], "evaluate_runs": []}
        for _ in range(max(3, args.rounds // 3)):
            for cmd in helps:
                helps[cmd].append(timed_cli([str(ROOT / "manage.py"), cmd, "--help"], env))
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {args.rounds} rounds, interleaved")
        for (side, call), xs in times.items():
            print(f"  {side:6s} {'call ' if call else 'start'}: median {fmt(xs)}; server CPU {fmt(cpu[side, call])}")
        for label, call in (("spawn → tool list", False), ("spawn → one ras.count_pixels → exit", True)):
            s, b = statistics.median(times["studio", call]), statistics.median(times["bare", call])
            ratio = s / b
            print(f"BENCH\tmcp_start: {label}, mcp_serve vs a bare MCP server (median of {args.rounds})\t"
                  f"{ratio:.2f}× ({fmt(times['studio', call])} vs {fmt(times['bare', call])})\t"
                  f"≤ {TARGET}×\t{'ok' if ratio <= TARGET else 'OVER'}")
            c = statistics.median(cpu["studio", call]) / statistics.median(cpu["bare", call])
            print(f"BENCH\tmcp_start: {label}, server CPU time, mcp_serve vs bare (median of {args.rounds})\t"
                  f"{c:.2f}× ({fmt(cpu['studio', call])} vs {fmt(cpu['bare', call])})\t—\tinfo")
        print(f"BENCH\tmcp_start: spawn → tool list, first start without the tool manifest cached (once)\t"
              f"{cold[0]:.2f} s wall, {cold[1]:.2f} s server CPU\t—\tinfo")
        h_mcp, h_eval = statistics.median(helps["mcp_serve"]), statistics.median(helps["evaluate_runs"])
        print(f"BENCH\tmcp_start: manage.py mcp_serve --help vs evaluate_runs --help (wall)\t"
              f"{h_mcp / h_eval:.2f}× ({fmt(helps['mcp_serve'])} vs {fmt(helps['evaluate_runs'])})\t—\tinfo")
    finally:
        if not args.keep and not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
