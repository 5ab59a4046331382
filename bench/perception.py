"""Cost of the benchmark's perception networks in the studio's model mode, and of the tool server
between calls.

    .venv/bin/python bench/perception.py [--families segformer,hrnet,swin,dpt,bitemporal_dpt]
        [--one-window hrnet,dpt,bitemporal_dpt] [--calls 5] [--no-mcp] [--scratch DIR] [--keep]

Seeded checkpoints in the benchmark's format (``perception_models.write_benchmark_checkpoint``,
the parity tests' files: same names, shapes and cost as the released ones) are written once into
a scratch folder (``STUDIO_BENCH_DIR``, default /tmp/studio-bench), never into the repository.

**Per family** (one child process each, so that its peak memory is its own): the CPU time (user +
system of the process, all torch threads: ``time.process_time``) and wall time of loading the
checkpoint (``load_model``: read, strict check, build), of the inference on a 1,024 × 1,024 tile
(``predict_labels``, the benchmark's windows, batches and averaging), and the process's peak
resident memory (``VmHWM``), with its resident memory after the imports and inputs and after the
load for reference. Inputs: the Florence xBD tile
(../shared/realdata/xbd-hurricane-florence, 1,024² RGB pre and post) for the RGB and bi-temporal
families, a seeded 14-band field of the benchmark's band means for SegFormer. Families:
``segformer`` (``landslide_ms``, mit_b0), ``hrnet`` (``building_lowres``, HRNet-W48 at 1,440 px),
``swin`` (``landslide_bitemporal``, Swin-T UPerNet), ``dpt`` (``water``, DINOv3 ViT-L/16 DPT, one
image) and ``bitemporal_dpt`` (``building_damage``, the same on pre and post). A family named in
``--one-window`` runs on a crop that makes exactly one full window (512 px for SegFormer, 480 px
for HRNet, 518 px for the others) and its tile figure is that window's inference CPU time times the tile's window count
(9, 16, 4, 4 and 4): an extrapolation, printed as such, whose peak memory is one window's (the tile
runs two windows a batch, so its peak is higher).

**The tool server** (``manage.py mcp_serve`` over stdio, the ``mcp`` SDK's client, a scratch
SQLite database with one task on a 64 × 64 crop of the Florence tile): ``--calls`` (default 5)
``seg.building_damage`` calls in one server process, in model mode (``STUDIO_CHECKPOINT_DIR``
the scratch folder: the BitemporalDPT, 1.3 GB) and in GT mode. Per call, the server's CPU time
(read from ``/proc/<pid>/stat`` between the calls) and the client's wall time; the server's peak
memory (``VmHWM``) and whether torch's library is mapped into it (``/proc/<pid>/maps``). Figures:
the later calls' median over the first call in model mode (the first loads the model, the later
ones find it in the process's cache; the crop is small so that the forward pass does not hide
the load); GT mode's first call and peak memory over model mode's (the benchmark's harness starts
a server per call, so a first call is what each call costs there); torch in the GT server: it
must be absent.

Rows: ``BENCH<TAB>figure<TAB>value<TAB>target<TAB>verdict`` (no target: information), as the other
benchmarks print them for ``run_all.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _scratch_studio import scratch_studio  # noqa: E402  (bench/_scratch_studio.py, beside this file)

REAL = ROOT.parent / "shared" / "realdata"
FLORENCE = REAL / "xbd-hurricane-florence"
TILE = "hurricane-florence_00000018_"
#: family → (model of the zoo, input kind, checkpoint seed, one-window crop side in px)
FAMILIES = {
    "segformer": ("landslide_ms", "ms14", 18, 512),
    "hrnet": ("building_lowres", "rgb", 1, 480),
    "swin": ("landslide_bitemporal", "bitemporal", 6, 518),
    "dpt": ("water", "rgb", 3, 518),
    "bitemporal_dpt": ("building_damage", "bitemporal", 7, 518),
}
SIDE = 1024
QID = "florence_bench_perception"
MCP_CROP = 64


def windows(family: str, h: int, w: int) -> int:
    """Number of network windows the benchmark's pipeline of ``family`` runs on an ``h`` × ``w``
    image (``perception_models.window_boxes`` with that family's window, stride and padding)."""
    from kernel.tools import perception_models as pm

    if family == "segformer":
        return len(pm.window_boxes(h, w, pm.MS14_WINDOW, pm.MS14_STRIDE))
    if family == "hrnet":
        return len(pm.window_boxes(max(h, pm.LOWRES_WINDOW), max(w, pm.LOWRES_WINDOW),
                                   pm.LOWRES_WINDOW, pm.LOWRES_STRIDE))
    if family == "dpt":
        ph, pw = pm.dpt_padding(h, w)
        return len(pm.window_boxes(h + ph, w + pw, pm.DPT_WINDOW, pm.DPT_WINDOW))
    return len(pm.window_boxes(h, w, pm.DPT_WINDOW, pm.DPT_WINDOW))


def inputs(family: str, side_h: int, side_w: int):
    """The (bands, H, W) arrays the family's tool passes to ``predict_labels``."""
    import numpy as np
    import rasterio

    from kernel.tools import perception_models as pm

    kind = FAMILIES[family][1]
    if kind == "ms14":
        rng = np.random.default_rng(1)
        yy, xx = np.mgrid[0:side_h, 0:side_w].astype(np.float64)
        phase = rng.uniform(0, 2 * np.pi, (2, 14))
        field = np.sin(yy[..., None] / 23.0 + phase[0]) * np.cos(xx[..., None] / 17.0 + phase[1])
        img = np.asarray(pm.MS14_BAND_MEAN) * np.exp(0.8 * field) * rng.lognormal(0.0, 0.1, (side_h, side_w, 14))
        return [np.moveaxis(img, -1, 0).astype(np.float32)]
    arrays = []
    for when in (("pre", "post") if kind == "bitemporal" else ("post",)):
        with rasterio.open(FLORENCE / f"{TILE}{when}_original.png") as src:
            arrays.append(src.read()[:3, :side_h, :side_w])
    return arrays


def _status_mib(field: str, pid: int | str = "self") -> float:
    """A memory field of ``/proc/<pid>/status`` (``VmRSS``: resident now, ``VmHWM``: its peak
    since the process's ``exec``), MiB. (``ru_maxrss`` is not used: Linux carries it across
    ``fork`` and ``exec``, so a child would report its parent's peak.)"""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(l for l in status.splitlines() if l.startswith(field + ":")).split()[1]) / 1024


def _rss_mib() -> float:
    return _status_mib("VmRSS")


def child(family: str, ckpt: Path, one_window: bool) -> dict:
    """Run in a fresh process: load, infer, and report CPU, wall and peak memory as a dict."""
    import warnings

    warnings.filterwarnings("ignore")
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    import numpy as np
    import torch

    from kernel.tools import perception_models as pm

    imports = time.process_time() - t_cpu
    model, _, _, crop = FAMILIES[family]
    h = w = crop if one_window else SIDE
    arrays = inputs(family, h, w)
    rss_inputs = _rss_mib()
    c0, w0 = time.process_time(), time.perf_counter()
    pm.load_model(model, ckpt)
    c1, w1 = time.process_time(), time.perf_counter()
    rss_loaded = _rss_mib()
    labels, _ = pm.predict_labels(model, arrays, ckpt)
    c2, w2 = time.process_time(), time.perf_counter()
    assert labels.shape == (h, w), labels.shape
    return {"family": family, "model": model, "threads": torch.get_num_threads(), "h": h, "w": w,
            "windows": windows(family, h, w), "tile_windows": windows(family, SIDE, SIDE),
            "import_cpu": imports, "load_cpu": c1 - c0, "load_wall": w1 - w0,
            "infer_cpu": c2 - c1, "infer_wall": w2 - w1, "total_wall": w2 - t_wall,
            "rss_inputs_mib": rss_inputs, "rss_loaded_mib": rss_loaded,
            "peak_rss_mib": _status_mib("VmHWM"),
            "file_mib": (ckpt / pm.MODEL_ZOO[model].file).stat().st_size / 2**20,
            "classes": np.bincount(labels.ravel()).tolist()}


# ------------------------------------------------------------------------------------------------
# the tool server
# ------------------------------------------------------------------------------------------------
def setup_server_db(scratch: Path, ckpt: Path) -> dict:
    """A scratch database and data root holding a ``MCP_CROP`` px crop of the Florence tile (pre, post,
    damage mask) and one task on it; the server's environment."""
    import numpy as np
    import rasterio

    crop_dir = scratch / "florence-crop"
    crop_dir.mkdir(parents=True, exist_ok=True)
    for suffix in ("pre_original.png", "post_original.png", "mask.png"):
        with rasterio.open(FLORENCE / f"{TILE}{suffix}") as src:
            arr = src.read()[:, 300:300 + MCP_CROP, 300:300 + MCP_CROP]
            profile = {"driver": "PNG", "count": arr.shape[0], "width": MCP_CROP, "height": MCP_CROP,
                       "dtype": arr.dtype.name}
        with rasterio.open(crop_dir / f"{TILE}{suffix}", "w", **profile) as dst:
            dst.write(np.ascontiguousarray(arr))
    return scratch_studio(scratch, crop_dir, question_id=QID, sample_id="bench_perception",
                          checkpoint_dir=str(ckpt), content=lambda layers: {
        "question": "How many pixels show damaged buildings?",
        "task_category": "perception_and_assessment", "task_category_code": "T1",
        "disaster_type": "hurricane",
        "input_layers": {"pre_image": f"{TILE}pre_original.png", "post_image": f"{TILE}post_original.png"},
        "trajectory": [{"call": "seg.building_damage",
                        "args": {"pre_image_path": f"{TILE}pre_original.png",
                                 "post_image_path": f"{TILE}post_original.png"}}],
        "answer_spec": [{"name": "mask", "eval_type": "scalar",
                         "source": "<mask_path> from trajectory[0].obs"}],
    })


def _server_pid() -> int:
    """The pid of this process's ``mcp_serve`` child (the ``mcp`` client spawns it)."""
    me = os.getpid()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == me and b"mcp_serve" in (p / "cmdline").read_bytes():
                return int(p.name)
        except (OSError, ValueError, IndexError):
            continue
    raise RuntimeError("no mcp_serve child found")


def _cpu(pid: int) -> float:
    """user + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def serve_calls(env: dict, mode: str, temp_dir: Path, calls: int) -> dict:
    """``calls`` ``seg.building_damage`` calls in one ``mcp_serve --perception MODE`` process."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT), env=env, args=[
        str(ROOT / "manage.py"), "mcp_serve", "--task", QID, "--temp_dir", str(temp_dir),
        "--perception", mode])
    out = {"mode": mode, "calls": []}
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            pid = _server_pid()
            for _ in range(calls):
                c0, t0 = _cpu(pid), time.perf_counter()
                result = await session.call_tool("seg_building_damage", {
                    "pre_image_path": f"{TILE}pre_original.png", "post_image_path": f"{TILE}post_original.png"})
                wall, cpu = time.perf_counter() - t0, _cpu(pid) - c0
                obs = json.loads(result.content[0].text)
                if isinstance(obs, str):
                    obs = json.loads(obs)
                assert not result.is_error and "mask_path" in obs, obs
                out["calls"].append({"wall": wall, "cpu": cpu, "meta": obs.get("_meta", {})})
            out["peak_rss_mib"] = _status_mib("VmHWM", pid)
            out["torch_mapped"] = "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    return out


def mcp_child(scratch: Path, ckpt: Path, calls: int) -> dict:
    import anyio

    env = setup_server_db(scratch, ckpt)
    return {mode: anyio.run(serve_calls, env, mode, scratch / f"temp-{mode}", calls) for mode in ("gt", "model")}


# ------------------------------------------------------------------------------------------------
def run_child(args: list[str]) -> dict:
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{args}: exit {r.returncode}: {r.stderr.strip()[-600:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--one-window", default="", help="families measured on one window and extrapolated")
    ap.add_argument("--no-mcp", action="store_true", help="leave out the tool server's figures")
    ap.add_argument("--calls", type=int, default=5, help="seg.building_damage calls per tool server")
    ap.add_argument("--scratch", default=None, help="scratch folder (kept; checkpoints reused)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--mcp-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.child:
        family, ckpt, one = args.child.split(":")
        print(json.dumps(child(family, Path(ckpt), one == "1")))
        return
    if args.mcp_child:
        print(json.dumps(mcp_child(Path(args.scratch), Path(args.scratch) / "ckpt", args.calls)))
        return

    base = Path(os.environ.get("STUDIO_BENCH_DIR", "/tmp/studio-bench"))
    base.mkdir(parents=True, exist_ok=True)
    scratch = Path(args.scratch) if args.scratch else Path(tempfile.mkdtemp(prefix="perception-", dir=base))
    ckpt = scratch / "ckpt"
    families = [f for f in args.families.split(",") if f]
    one_window = set(filter(None, args.one_window.split(",")))
    try:
        from kernel.tools import perception_models as pm

        t0 = time.perf_counter()
        needed = {FAMILIES[f][0]: FAMILIES[f][2] for f in families}
        if not args.no_mcp:
            needed["building_damage"] = FAMILIES["bitemporal_dpt"][2]
        for model, seed in needed.items():
            path = ckpt / pm.MODEL_ZOO[model].file
            if not path.is_file():
                pm.write_benchmark_checkpoint(model, path, seed=seed)
        print(f"checkpoints written in {time.perf_counter() - t0:.0f} s; load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
        for family in families:
            one = family in one_window
            r = run_child(["--child", f"{family}:{ckpt}:{int(one)}"])
            print(f"  {json.dumps(r)}", flush=True)
            scale = r["tile_windows"] / r["windows"]
            tile_cpu = r["infer_cpu"] * scale
            how = (f"one {r['h']} px window × {r['tile_windows']} (extrapolated)" if one
                   else f"{r['tile_windows']} windows, measured")
            print(f"BENCH\tperception {family} ({r['model']}): CPU time, 1,024² tile, {how}\t"
                  f"{tile_cpu:.1f} s ({tile_cpu / r['tile_windows']:.1f} s a window; load {r['load_cpu']:.1f} s; "
                  f"wall {r['infer_wall'] * scale:.0f} s, {r['threads']} threads)\t—\tinfo")
            print(f"BENCH\tperception {family}: peak memory{' (one window)' if one else ''} (VmHWM)\t"
                  f"{r['peak_rss_mib']:.0f} MiB (after imports and inputs {r['rss_inputs_mib']:.0f} MiB, after the load "
                  f"{r['rss_loaded_mib']:.0f} MiB; checkpoint file {r['file_mib']:.0f} MiB)\t—\tinfo", flush=True)
        if not args.no_mcp:
            m = run_child(["--mcp-child", "--scratch", str(scratch), "--calls", str(max(2, args.calls))])
            print(f"  {json.dumps(m)}", flush=True)
            first, later = m["model"]["calls"][0], m["model"]["calls"][1:]
            cpu = statistics.median(c["cpu"] for c in later)
            wall = statistics.median(c["wall"] for c in later)
            print(f"BENCH\tperception mcp_serve model mode: later seg.building_damage calls (median of {len(later)}) "
                  f"/ 1st, server CPU\t{cpu / first['cpu']:.3f} ({cpu:.2f} s ({min(c['cpu'] for c in later):.2f}–"
                  f"{max(c['cpu'] for c in later):.2f}) vs {first['cpu']:.2f} s; wall {wall:.2f} s vs "
                  f"{first['wall']:.2f} s; the first loads the model: {first['cpu'] - cpu:.2f} s more)\t—\tinfo")
            gt = m["gt"]
            g = gt["calls"][0]["cpu"]
            print(f"BENCH\tperception mcp_serve GT mode vs model mode: 1st call's server CPU (a server per "
                  f"call, as the benchmark's harness)\t{g / first['cpu']:.3f} ({g:.2f} s vs {first['cpu']:.2f} s; "
                  f"GT's later calls {statistics.median(c['cpu'] for c in gt['calls'][1:]):.2f} s)\t—\tinfo")
            print(f"BENCH\tperception mcp_serve GT vs model mode: server peak memory\t"
                  f"{gt['peak_rss_mib'] / m['model']['peak_rss_mib']:.3f} ({gt['peak_rss_mib']:.0f} MiB vs "
                  f"{m['model']['peak_rss_mib']:.0f} MiB)\t—\tinfo")
            print(f"BENCH\tperception mcp_serve GT mode: torch loaded into the server\t"
                  f"{'yes' if gt['torch_mapped'] else 'no'} (model mode: "
                  f"{'yes' if m['model']['torch_mapped'] else 'no'})\tno\t{'FAIL' if gt['torch_mapped'] else 'ok'}")
    finally:
        if not args.keep and not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
