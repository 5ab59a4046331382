"""bench/replay.py's floor pass (``EngineFloor``; docs/benchmarks.md, "The floor"): while it is
active the engine's own bookkeeping is stubbed out, and afterwards, an exception or not, every
stubbed function is the real one again, so that the passes after it (and the hash check) measure
the real engine. No timing here.

The values the stubs give are the ones the docstring names: 64 zeros for a step key, an input
fingerprint and a replay hash; no named files and no artifacts; and a ``finish`` that sets the
run's final fields on the instance without writing (``final_answer`` and ``replay_hash`` left out).
"""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

import kernel.engine as engine
import replay.services.runs as services  # where execute_replay looks up the stubbed names

BENCH = Path(__file__).resolve().parents[1] / "bench" / "replay.py"
_spec = importlib.util.spec_from_file_location("bench_replay", BENCH)
bench_replay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_replay)

STUBBED = [(engine, "step_key"), (engine, "_named_files"), (engine, "_artifacts"),
           (services, "input_fingerprint"), (services, "replay_hash"), (services._Progress, "finish")]


def test_the_floor_stubs_the_bookkeeping_and_gives_it_back():
    real = {(owner, name): getattr(owner, name) for owner, name in STUBBED}
    with bench_replay.EngineFloor():
        assert all(getattr(owner, name) is not real[(owner, name)] for owner, name in STUBBED)
        assert engine.step_key("ras.area", 1, {"mask_path": "m.png"}, None) == "0" * 64
        assert engine._named_files({"mask_path": "m.png"}, None) == []
        assert engine._artifacts({"mask_path": "m.png"}, None) == []
        assert services.input_fingerprint(None, None, "gt") == "0" * 64
        assert services.replay_hash([], {}) == "0" * 64
        progress = SimpleNamespace(run=SimpleNamespace(status="queued"))
        services._Progress.finish(progress, status="succeeded", final_answer={"a": 1}, replay_hash="h", steps_done=3)
        assert vars(progress.run) == {"status": "succeeded", "steps_done": 3}
    assert all(getattr(owner, name) is real[(owner, name)] for owner, name in STUBBED)


def test_the_floor_gives_the_bookkeeping_back_after_an_exception():
    real = {(owner, name): getattr(owner, name) for owner, name in STUBBED}
    with pytest.raises(RuntimeError):
        with bench_replay.EngineFloor():
            raise RuntimeError("a pass failed")
    assert all(getattr(owner, name) is real[(owner, name)] for owner, name in STUBBED)
