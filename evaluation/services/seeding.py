"""A large synthetic benchmark over the real scenes (``manage.py seed_synthetic --tasks N --runs M``).

For load tests and benchmarks (``bench/lists.py``, ``bench/export.py``): N tasks and M scored agent
runs, bulk-created in batches (100,000 tasks with 2 runs in a few minutes on 2 cores; see
docs/benchmarks.md). Everything it makes is marked synthetic and never mixes with real work:

* events ``synthetic-<real event slug>``, named ``[synthetic] …``, ``metadata.synthetic = true``; their
  layers are rows pointing at the real event's stored files (nothing is copied);
* tasks ``synthetic-<0000001>_task<i>`` whose question starts with ``[synthetic]``; their trajectories
  use real tools on the scene's real file names (T1 damage pixels, T2 destroyed regions + buffer,
  T3 truck trips, T4 damaged area, T5 damaged share), revision 1, status ``approved`` (or a mix);
* one gold replay per task, ``mode = "synthetic"``, ``gold_accepted`` (so exports and releases can
  read it): its observations are derived from the scene's stored mask class counts and the task's
  own parameters — not computed by running the tools (``manage.py replay`` would recompute them);
* agents ``synthetic-agent-<m>`` with one run each: a record per task whose predicted answer and
  trajectory are perturbations of the gold (agent m answers well with probability 0.85 − 0.2·m,
  at least 0.2), drawn from ``random.Random(seed)``. Scores are not drawn: every record is scored
  by ``evaluation.scoring.evaluate_samples`` (the official evaluator's computation), and the run's
  ``dora_score`` / ``dimensions`` aggregate the records exactly as the evaluator does (the same
  sums in the same order: equal to one ``evaluate_samples`` call over the whole set); each run's
  leaderboard sums (``RunAggregate``) are written with its final scores, as an import writes them;
* with ``verdicts=K`` (``--verdicts K``), the first K records of each run carry three verdicts each, as
  a scoring sample would: one of the judge ``synthetic-judge`` and one of each of two people,
  ``synthetic-scorer-1`` and ``synthetic-scorer-2`` (users with the scorer role and an unusable
  password). Their E1–E6 flags are drawn (each flag with probability 0.1 on a record whose
  ``task_score`` is under 0.5, 0.02 otherwise; the second person and the judge each disagree with
  the first on a flag with probability 0.1 and 0.15; the people's verdicts marked final), ``is_correct`` follows the flags (the
  taxonomy's rule) and the grade is 1.0 for a correct plan, else 0.2 to 0.8 on the 0.2 grid; so the
  agreement and judge-report pages have real statistics to compute.

Re-running refuses while synthetic data exist unless ``--replace`` (which deletes the earlier
synthetic events, tasks, replays, agents and runs first). Needs at least one imported real scene: a
GT mask layer that annotates an image (``manage.py import_xbd DIR``).
"""
from __future__ import annotations

import random
import secrets
import time
from dataclasses import dataclass

from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from annotation.models import Event, Layer, Task, TaskRevision
from annotation.services.content import layer_manifest_entry
from evaluation.models import Agent, AgentRun, RunRecord, Verdict
from evaluation.scoring import evaluate_samples
from evaluation.scoring.aggregate import round6
from evaluation.services.leaderboard import write_run_aggregate
from kernel.engine import replay_hash
from kernel.taxonomy import E_CODES, plan_is_correct
from releases.services.export import CATEGORY_BY_DIM
from replay.models import ReplayRun
from studio.accounts import upsert_user

PREFIX = "synthetic-"
QUESTION_PREFIX = "[synthetic] "
DIMS = ("t1", "t2", "t3", "t4", "t5")
METRICS = ("t_any", "t_ord", "t_em", "par_acc", "eff")
DAMAGE_CLASSES = {"1": "intact", "2": "partially damaged", "3": "totally destroyed"}
SAMPLE_CLASSES = {"building_damage": DAMAGE_CLASSES}  # a sample's classes: {layer name: {value: name}}
JUDGE_NAME = f"{PREFIX}judge"
SCORERS = (f"{PREFIX}scorer-1", f"{PREFIX}scorer-2")
STATUS_MIX = (("approved", 0.60), ("draft", 0.15), ("submitted", 0.10), ("in_review", 0.10), ("returned", 0.05))


@dataclass
class Scene:
    """A real image with its GT mask, re-homed in a synthetic event."""

    event: Event
    pre: Layer | None
    post: Layer
    mask: Layer
    damaged_px: int  # pixels of mask classes >= 2 (xBD: 2 minor, 3 major, 4 destroyed)
    total_px: int
    gsd_m: float


def _mask_ref(i: int) -> str:
    return f"<mask_path> from trajectory[{i}].obs"


def _task_content(dim: str, scene: Scene, n: int, rng: random.Random) -> dict:
    """Symbolic trajectory, answer spec and the synthetic gold (filled trajectory, answer) of task ``n``."""
    pre = scene.pre.file_name if scene.pre else scene.post.file_name
    post = scene.post.file_name
    seg = {"call": "seg.building_damage", "args": {"pre_image_path": pre, "post_image_path": post}}
    seg_obs = {"tool": "seg.building_damage", "mask_path": f"seg_building_damage_{n:012x}.png", "classes": DAMAGE_CLASSES,
               "_meta": {"mode": "synthetic"}}
    count = {"call": "ras.count_pixels", "args": {"mask_path": _mask_ref(0), "classes": [2, 3]}}
    count_obs = {"tool": "ras.count_pixels", "counts": {"2": scene.damaged_px}, "total": scene.damaged_px, "classes": [2, 3]}
    where = f"{post} (scene {n})"
    if dim == "t1":
        question = f"How many pixels of {where} show partially damaged or destroyed buildings?"
        steps, obs = [seg, count], [seg_obs, count_obs]
        spec = [{"name": "damaged_pixels", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"}]
        answer = {"damaged_pixels": scene.damaged_px}
    elif dim == "t2":
        meter = rng.choice((10, 25, 50, 100))
        regions = 1 + rng.randrange(60)
        question = f"How many destroyed-building regions are in {where}, and buffer them by {meter} m?"
        vec = {"call": "ras.vectorize", "args": {"mask_path": _mask_ref(0), "classes": [3], "pixel_size_m": scene.gsd_m}}
        buf = {"call": "vec.buffer", "args": {"vector_path": "<vector_path> from trajectory[1].obs", "meter": meter}}
        steps = [seg, vec, buf]
        obs = [seg_obs, {"tool": "ras.vectorize", "vector_path": f"ras_vectorize_{n:012x}.geojson", "count": regions,
                         "total_pixels": scene.damaged_px, "total_area_m2": round(scene.damaged_px * scene.gsd_m ** 2, 3)},
               {"tool": "vec.buffer", "buffer_path": f"vec_buffer_{n:012x}.geojson", "distance_input_m": meter,
                "distance_used_units": meter, "input_vector": f"ras_vectorize_{n:012x}.geojson"}]
        spec = [{"name": "destroyed_regions", "eval_type": "scalar_count", "source": "<count> from trajectory[1].obs"}]
        answer = {"destroyed_regions": regions}
    elif dim == "t3":
        per_trip = rng.choice((500, 1000, 2000, 5000))
        trips = round(scene.damaged_px / per_trip, 6)
        question = f"Debris of {per_trip} damaged pixels fills one truck: how many truck trips does {where} need?"
        div = {"call": "calc.div", "args": {"a": "<total> from trajectory[1].obs", "b": per_trip}}
        steps = [seg, count, div]
        obs = [seg_obs, count_obs, {"tool": "calc.div", "ratio": trips, "a": scene.damaged_px, "b": per_trip}]
        spec = [{"name": "truck_trips", "eval_type": "scalar_continuous", "source": "<ratio> from trajectory[2].obs"}]
        answer = {"truck_trips": trips}
    elif dim == "t4":
        area = round(scene.damaged_px * scene.gsd_m ** 2, 6)
        km2 = round(area * 1e-6, 9)
        question = f"What area (km²) of {where} was damaged between the two dates?"
        area_step = {"call": "ras.area", "args": {"mask_path": _mask_ref(0), "pixel_size_m": scene.gsd_m, "classes": [2, 3]}}
        mul = {"call": "calc.mul", "args": {"a": "<area_m2> from trajectory[1].obs", "b": 1e-6}}
        steps = [seg, area_step, mul]
        obs = [seg_obs, {"tool": "ras.area", "area_m2": area, "pixel_count": scene.damaged_px, "pixel_size_m": scene.gsd_m},
               {"tool": "calc.mul", "product": km2, "a": area, "b": 1e-6}]
        spec = [{"name": "damaged_area_km2", "eval_type": "scalar_continuous", "source": "<product> from trajectory[2].obs"}]
        answer = {"damaged_area_km2": km2}
    else:
        ratio = round(scene.damaged_px / scene.total_px, 9)
        pct = round(ratio * 100, 6)
        question = f"Report the damaged pixels of {where} and their share of the image in percent."
        div = {"call": "calc.div", "args": {"a": "<total> from trajectory[1].obs", "b": scene.total_px}}
        mul = {"call": "calc.mul", "args": {"a": "<ratio> from trajectory[2].obs", "b": 100}}
        steps = [seg, count, div, mul]
        obs = [seg_obs, count_obs, {"tool": "calc.div", "ratio": ratio, "a": scene.damaged_px, "b": scene.total_px},
               {"tool": "calc.mul", "product": pct, "a": ratio, "b": 100}]
        spec = [{"name": "damaged_pixels", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"},
                {"name": "damaged_pct", "eval_type": "ratio_pct", "source": "<product> from trajectory[3].obs"}]
        answer = {"damaged_pixels": scene.damaged_px, "damaged_pct": pct}
    filled = [{"call": s["call"], "args": s["args"], "obs": o} for s, o in zip(steps, obs)]
    input_data = {"post_image": layer_manifest_entry(scene.post)}
    if scene.pre:
        input_data = {"pre_image": layer_manifest_entry(scene.pre), **input_data}
    return {"question": QUESTION_PREFIX + question, "trajectory": steps, "answer_spec": spec, "filled": filled,
            "answer": answer, "input_data": input_data, "tools": sorted({s["call"] for s in steps})}


def _prediction(gold: dict, spec: list, filled: list, skill: float, rng: random.Random) -> dict:
    """A synthetic run record: the gold answer and trajectory, perturbed (see the module docstring)."""
    if rng.random() < 0.02:
        return {"predicted_answer": None, "trajectory": [], "error": "synthetic: the agent timed out"}
    answer = {}
    for field in spec:
        g = gold[field["name"]]
        if rng.random() < skill:
            v = g * (1 + rng.uniform(-0.1, 0.1))  # inside the tolerance band mostly
        else:
            v = g * rng.choice((0.3, 0.6, 1.8, 3.0))
        answer[field["name"]] = int(round(v)) if field["eval_type"] == "scalar_count" else round(v, 6)
    steps = [{"call": s["call"], "args": dict(s["args"])} for s in filled]
    if rng.random() > skill and len(steps) > 1:
        del steps[rng.randrange(1, len(steps))]
    if rng.random() > skill:
        for s in steps:
            if "classes" in s["args"]:
                s["args"]["classes"] = [3]
                break
    return {"predicted_answer": answer, "trajectory": steps, "error": ""}


def real_scenes() -> list[Layer]:
    """GT mask layers of real (non-synthetic) events that annotate an image, by id."""
    return list(Layer.objects.filter(kind=Layer.Kind.MASK, annotates__isnull=False)
                .exclude(event__slug__startswith=PREFIX).select_related("event", "annotates").order_by("id"))


def _synthetic_events(masks: list[Layer]) -> list[Scene]:
    """Create ``synthetic-<slug>`` events whose layers point at the real files; one Scene per mask."""
    scenes = []
    by_event: dict[int, dict[int, Layer]] = {}
    for mask in masks:
        real = mask.event
        if real.pk not in by_event:
            ev = Event.objects.create(
                slug=(PREFIX + real.slug)[:120], name=f"[synthetic] {real.name}"[:200], disaster_type=real.disaster_type,
                source=f"synthetic tasks over the real event {real.slug}",
                metadata={"synthetic": True, "real_event": real.slug})
            copies = {}
            real_layers = list(real.layers.order_by("id"))
            for layer in real_layers:
                fields = {f.attname: getattr(layer, f.attname) for f in Layer._meta.concrete_fields
                          if f.attname not in ("id", "event_id", "annotates_id", "created_at")}
                copies[layer.pk] = Layer.objects.create(event=ev, **fields)
            for layer in real_layers:
                if layer.annotates_id in copies:
                    Layer.objects.filter(pk=copies[layer.pk].pk).update(annotates=copies[layer.annotates_id])
            by_event[real.pk] = copies
        copies = by_event[real.pk]
        post = copies[mask.annotates_id]
        pre_real = (real.layers.filter(kind=Layer.Kind.RASTER, phase="pre").exclude(pk=mask.annotates_id)
                    .order_by("id").first())
        counts = {int(k): int(v) for k, v in (mask.class_counts or {}).items() if str(k).lstrip("-").isdigit()}
        damaged = sum(v for k, v in counts.items() if k >= 2) or 1000
        width, height = mask.width or post.width or 1024, mask.height or post.height or 1024
        scenes.append(Scene(event=copies[mask.pk].event, pre=copies[pre_real.pk] if pre_real else None, post=post,
                            mask=copies[mask.pk], damaged_px=damaged, total_px=width * height,
                            gsd_m=float(mask.gsd_m or post.gsd_m or 0.5)))
    return scenes


def delete_synthetic() -> dict:
    """Delete every synthetic agent, run, replay, task and event (``--replace``); returns counts."""
    with transaction.atomic():
        n_runs = AgentRun.objects.filter(agent__name__startswith=PREFIX).count()
        Verdict.objects.filter(record__run__agent__name__startswith=PREFIX).delete()
        RunRecord.objects.filter(run__agent__name__startswith=PREFIX).delete()
        AgentRun.objects.filter(agent__name__startswith=PREFIX).delete()
        Agent.objects.filter(name__startswith=PREFIX).delete()
        tasks = Task.objects.filter(event__slug__startswith=PREFIX)
        n_tasks = tasks.count()
        ReplayRun.objects.filter(task__event__slug__startswith=PREFIX).delete()
        tasks.update(head=None)
        TaskRevision.objects.filter(task__event__slug__startswith=PREFIX).delete()
        tasks.delete()
        Layer.objects.filter(event__slug__startswith=PREFIX).update(annotates=None)
        Layer.objects.filter(event__slug__startswith=PREFIX).delete()
        Event.objects.filter(slug__startswith=PREFIX).delete()
    return {"tasks": n_tasks, "runs": n_runs}


def _verdict_rows(records: list[tuple[int, float | None]], scorers: list, rng: random.Random) -> list[Verdict]:
    """The sample's verdicts of ``records`` (``(record id, task_score)``): per record one of each of
    ``scorers`` (users) and one of the judge :data:`JUDGE_NAME`, drawn as the module docstring says."""
    rows, now = [], timezone.now()
    for record_id, score in records:
        p = 0.1 if score is None or score < 0.5 else 0.02
        first = {c: rng.random() < p for c in E_CODES}
        for who, flip in ((scorers[0], 0.0), (scorers[1], 0.1), (None, 0.15)):
            flags = {c: (not v) if rng.random() < flip else v for c, v in first.items()}
            ok = plan_is_correct(flags)
            grade = 1.0 if ok else rng.choice((0.2, 0.4, 0.6, 0.8))
            common = dict(record_id=record_id, is_correct=ok, grade=grade, errors=flags)
            if who is None:
                rows.append(Verdict(source=Verdict.Source.JUDGE, judge_name=JUDGE_NAME, judge_is_correct=ok,
                                    prompt_version="synthetic", **common))
            else:  # marked final by the person, so it counts in agreement (a decided verdict)
                rows.append(Verdict(source=Verdict.Source.HUMAN, annotator=who, sealed_at=now, **common))
    return rows


def _scorers() -> list:
    """The users :data:`SCORERS` with the scorer role and no usable password (nobody logs in as them)."""
    users = []
    for name in SCORERS:
        user = upsert_user(name, secrets.token_urlsafe(16), ["scorer"])
        user.set_unusable_password()
        user.save(update_fields=["password"])
        users.append(user)
    return users


def seed_synthetic(n_tasks: int, n_runs: int, *, batch: int = 5000, seed: int = 0, tasks_per_sample: int = 2,
                   status: str = "approved", replace: bool = False, verdicts: int = 0, log=lambda msg: None) -> dict:
    """Create the synthetic benchmark (see the module docstring); returns
    ``{"tasks", "runs", "records", "verdicts", "events", "seconds", "dora_scores": {run name: score}}``.
    ``verdicts``: records of each run (its first, by id) given a judge's and two people's verdicts.

    Raises ``ValueError`` for bad sizes, no real scene, or synthetic data present without ``replace``.
    """
    if n_tasks < 1 or n_runs < 0 or batch < 1 or tasks_per_sample < 1 or verdicts < 0:
        raise ValueError("--tasks, --batch and --tasks-per-sample must be at least 1, --runs and --verdicts at least 0")
    if status not in ("approved", "mix"):
        raise ValueError(f"--status: '{status}' is not 'approved' or 'mix'")
    t0 = time.monotonic()
    if Event.objects.filter(slug__startswith=PREFIX).exists() or Agent.objects.filter(name__startswith=PREFIX).exists():
        if not replace:
            raise ValueError("synthetic data already exist: pass --replace to delete them first")
        gone = delete_synthetic()
        log(f"deleted earlier synthetic data: {gone['tasks']} tasks, {gone['runs']} runs")
    masks = real_scenes()
    if not masks:
        raise ValueError("no real scene: import real data first (e.g. manage.py import_xbd ../shared/realdata/xbd-hurricane-florence)")
    with transaction.atomic():
        scenes = _synthetic_events(masks)
        agents = [Agent.objects.create(name=f"{PREFIX}agent-{m + 1}") for m in range(n_runs)]
        runs = [AgentRun.objects.create(agent=a, name=f"{PREFIX}run-{m + 1}", source_dir="synthetic (seed_synthetic)")
                for m, a in enumerate(agents)]
    skills = [max(0.2, 0.85 - 0.2 * m) for m in range(n_runs)]
    rngs = [random.Random(f"{seed}:run:{m}") for m in range(n_runs)]
    task_rng = random.Random(f"{seed}:tasks")
    status_rng = random.Random(f"{seed}:status")
    # per run and dimension: the evaluator's sums, in the evaluator's order (see evaluate_dimension)
    agg = [{d: {"n": 0, "scored": 0, "sum": 0.0, **{m: 0.0 for m in METRICS}} for d in DIMS} for _ in runs]
    batch = max(tasks_per_sample, batch - batch % tasks_per_sample)
    n_records = 0
    for start in range(0, n_tasks, batch):
        stop = min(n_tasks, start + batch)
        with transaction.atomic():
            tasks, contents = [], []
            now = timezone.now()
            for i in range(start, stop):
                k, j = divmod(i, tasks_per_sample)
                dim = DIMS[k % len(DIMS)]
                scene = scenes[(k // len(DIMS)) % len(scenes)]
                sample_id = f"{PREFIX}{k + 1:07d}"
                content = _task_content(dim, scene, i + 1, task_rng)
                st = "approved"
                if status == "mix":
                    r, acc = status_rng.random(), 0.0
                    for name, p in STATUS_MIX:
                        acc += p
                        if r < acc:
                            st = name
                            break
                tasks.append(Task(event=scene.event, sample_id=sample_id, task_index=j, question_id=f"{sample_id}_task{j}",
                                  dimension=dim, status=st, version=1))
                contents.append((content, scene, dim))
            Task.objects.bulk_create(tasks, batch_size=2000)
            if tasks[0].pk is None:  # a backend that does not return ids from bulk inserts
                ids = dict(Task.objects.filter(question_id__in=[t.question_id for t in tasks]).values_list("question_id", "id"))
                for t in tasks:
                    t.pk = t.id = ids[t.question_id]
            revisions = []
            for t, (c, scene, dim) in zip(tasks, contents):
                cat, code = CATEGORY_BY_DIM[dim]
                revisions.append(TaskRevision(
                    task_id=t.pk, number=1, question=c["question"], task_category=cat, task_category_code=code,
                    disaster_type=scene.event.disaster_type, input_data=c["input_data"], classes=SAMPLE_CLASSES,
                    tools=c["tools"], trajectory=c["trajectory"], answer_spec=c["answer_spec"], message="synthetic seed"))
            TaskRevision.objects.bulk_create(revisions, batch_size=2000)
            Task.objects.filter(pk__gte=tasks[0].pk, pk__lte=tasks[-1].pk, event__slug__startswith=PREFIX).update(
                head=Subquery(TaskRevision.objects.filter(task_id=OuterRef("pk"), number=1).values("id")[:1]))
            head_ids = dict(TaskRevision.objects.filter(task_id__in=[t.pk for t in tasks], number=1).values_list("task_id", "id"))
            replays = []
            for t, (c, _scene, _dim) in zip(tasks, contents):
                replays.append(ReplayRun(
                    task_id=t.pk, revision_id=head_ids[t.pk], mode="synthetic", status=ReplayRun.Status.SUCCEEDED,
                    steps_total=len(c["trajectory"]), steps_done=len(c["trajectory"]),
                    eval_spec={f["name"]: f["eval_type"] for f in c["answer_spec"]}, final_answer=c["answer"],
                    filled_trajectory=c["filled"], replay_hash=replay_hash(c["filled"], c["answer"]), gold_accepted=True,
                    started_at=now, finished_at=now))
            ReplayRun.objects.bulk_create(replays, batch_size=2000)

            # gold samples of this batch in the benchmark's layout (whole samples: batch % tasks_per_sample == 0)
            samples: dict[str, dict[str, dict]] = {d: {} for d in DIMS}
            for t, (c, scene, dim) in zip(tasks, contents):
                sample = samples[dim].setdefault(t.sample_id, {
                    "sample_id": t.sample_id, "disaster_type": scene.event.disaster_type, "input_data": c["input_data"],
                    "classes": SAMPLE_CLASSES, "tasks": []})
                sample["tasks"].append({"question": c["question"], "trajectory": c["filled"], "final_answer": c["answer"],
                                        "eval_spec": {f["name"]: f["eval_type"] for f in c["answer_spec"]}})
            samples_by_dim = {d: list(v.values()) for d, v in samples.items() if v}
            for r_i, run in enumerate(runs):
                records_by_dim: dict[str, list] = {d: [] for d in samples_by_dim}
                preds = []
                for t, (c, _scene, dim) in zip(tasks, contents):
                    pred = _prediction(c["answer"], c["answer_spec"], c["filled"], skills[r_i], rngs[r_i])
                    preds.append(pred)
                    records_by_dim[dim].append({"question_id": t.question_id, "sample_id": t.sample_id, **pred})
                result = evaluate_samples(samples_by_dim, records_by_dim)
                scored = {}
                for dim, block in result["full"].items():
                    a = agg[r_i][dim]
                    for e in block["tasks"]:
                        scored[(e["sample_id"], e["task_idx"])] = e
                        a["n"] += 1
                        if e["task_score"] is not None:
                            a["scored"] += 1
                            a["sum"] += e["task_score"]
                        for m in METRICS:
                            a[m] += e[m]
                rows = []
                for t, (_c, _scene, dim), pred in zip(tasks, contents, preds):
                    e = scored[(t.sample_id, t.task_index)]
                    rows.append(RunRecord(
                        run=run, task_id=t.pk, question_id=t.question_id, sample_id=t.sample_id, task_index=t.task_index,
                        dimension=dim, predicted_answer=pred["predicted_answer"], trajectory=pred["trajectory"],
                        error=pred["error"], task_score=e["task_score"], field_scores=e["field_scores"],
                        n_scored_fields=e["n_scored_fields"], **{m: e[m] for m in METRICS}))
                RunRecord.objects.bulk_create(rows, batch_size=2000)
                n_records += len(rows)
        log(f"{stop:>9,} tasks  {n_records:>10,} records  {time.monotonic() - t0:7.1f} s")

    dora_scores = {}
    with transaction.atomic():
        for r_i, run in enumerate(runs):
            dims, dim_scores = {}, []
            for dim in DIMS:
                a = agg[r_i][dim]
                if not a["n"]:
                    continue
                d = {"dim_score": round6(a["sum"] / a["scored"] if a["scored"] else 0.0), "n_tasks": a["n"],
                     "n_scored_tasks": a["scored"], **{m: round6(a[m] / a["n"]) for m in METRICS}}
                dims[dim] = d
                dim_scores.append(d["dim_score"])
            run.dora_score = round6(sum(dim_scores) / len(dim_scores)) if dim_scores else 0.0
            run.dimensions = dims
            run.save(update_fields=["dora_score", "dimensions"])
            write_run_aggregate(run.pk)  # the leaderboard's sums, as an import writes them
            dora_scores[run.name] = run.dora_score
    n_verdicts = 0
    if verdicts and runs:
        with transaction.atomic():
            scorers, rng = _scorers(), random.Random(f"{seed}:verdicts")
            for run in runs:
                sample = list(RunRecord.objects.filter(run=run).order_by("id").values_list("id", "task_score")[:verdicts])
                made = Verdict.objects.bulk_create(_verdict_rows(sample, scorers, rng), batch_size=2000)
                n_verdicts += len(made)
        log(f"{n_verdicts:,} verdicts on {min(verdicts, n_tasks) * len(runs):,} records")
    return {"tasks": n_tasks, "runs": n_runs, "records": n_records, "verdicts": n_verdicts,
            "events": len({s.event.pk for s in scenes}),
            "seconds": round(time.monotonic() - t0, 1), "dora_scores": dora_scores}
