"""The bad-input corpus (docs/security.md): one file per case in
``tests/bad_input/``, each a hostile input of the issue's list (``issue`` says which reproduction)
and the named error it must end in: the file, the field and the problem all appear in the message
(a ``CommandError`` of the import commands, a 400's ``detail`` in the API), and no row of the
studio's tables was written. Before the hardening each of these ended in a traceback or a 500."""
from __future__ import annotations

import html
import io
import json
from pathlib import Path
from urllib.parse import urlencode

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from django.apps import apps
from django.core.management import CommandError, call_command

from annotation.models import Event, Layer, Task

CORPUS = Path(__file__).parent / "bad_input"
CASES = sorted(CORPUS.glob("*.json"))
T1 = "t1_perception_and_assessment.json"


def _counts() -> dict:
    return {m.__name__: m.objects.count() for app in ("annotation", "replay", "evaluation")
            for m in apps.get_app_config(app).get_models()}


@pytest.fixture
def corpus_setup(db, make_user, tmp_path):
    from annotation.services.task_import import import_task_file
    from annotation.services.tasks import create_task

    mia = make_user("mia", "maintainer", "author", "reviewer", "scorer")
    make_user("sam", "scorer")
    event = Event.objects.create(slug="corpus", name="corpus")

    def setup(names: list[str]) -> dict:
        ctx = {}
        for name in names:
            if name == "released_s1":
                f = tmp_path / "setup" / T1
                f.parent.mkdir()
                f.write_text(json.dumps([{"sample_id": "s1", "input_data": {}, "tasks": [{
                    "task_category": "perception_and_assessment", "task_category_code": "T1", "question": "How many?",
                    "trajectory": [], "final_answer": {"n": 1}, "eval_spec": {"n": "scalar_count"}}]}]))
                import_task_file(mia, f, event)
                Task.objects.filter(question_id="s1_task0").update(status=Task.Status.RELEASED)
            elif name == "draft_s1":
                ctx["task"] = create_task(mia, event, dimension="t1", sample_id="s1",
                                          content={"question": "Q?", "trajectory": [], "answer_spec": []}).pk
            elif name == "raster_layer":
                ctx["raster_layer"] = Layer.objects.create(event=event, name="r", kind=Layer.Kind.RASTER,
                                                           file_name="r.tif", path="events/corpus/r.tif").pk
            elif name == "run_a":
                from evaluation.services.runs import import_run_dir

                ctx["run"] = import_run_dir(mia, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent_a",
                                            tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks")).pk
            elif name == "layer":
                ctx["layer"] = Layer.objects.create(event=event, name="a", kind=Layer.Kind.VECTOR, file_name="a.geojson",
                                                    path="events/corpus/a.geojson").pk
            else:
                raise AssertionError(f"unknown setup {name}")
        return ctx

    return mia, setup


def _deep(generate: dict) -> str:
    """``generate``'s text: ``prefix`` + ``deep`` ``[`` + as many ``]`` + ``suffix``."""
    n = generate["deep"]
    return generate.get("prefix", "") + "[" * n + "]" * n + generate.get("suffix", "")


def _zip(spec: dict) -> io.BytesIO:
    """The hostile zip of an ``upload`` case: ``entries`` small files, or one file ``depth`` folders
    deep, or one file with a name part of ``long_name`` characters (each in folder ``x_AP``)."""
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(spec.get("entries", 0)):
            zf.writestr(f"x_AP/t1_perception_and_assessment/p{i}.json", "{}")
        if "depth" in spec:
            zf.writestr("x_AP/" + "d/" * spec["depth"] + "benchmark.jsonl", "{}")
        if "long_name" in spec:
            zf.writestr("x_AP/" + "n" * spec["long_name"] + ".jsonl", "{}")
    buf.seek(0)
    buf.name = "x_AP.zip"
    return buf


def _run(case: dict, ctx: dict, tmp_path: Path, client, mia) -> str:
    """Feed the case's input to its target; return the error text it ends in."""
    target = case["target"]
    if target == "import_tasks":
        f = tmp_path / T1
        if "generate" in case:
            f.write_text(_deep(case["generate"]))
        else:
            f.write_text(case["task_file_text"])
        with pytest.raises(CommandError) as exc:
            call_command("import_tasks", str(f), "--event", "corpus", "--as-user", case.get("as_user", "mia"),
                         stdout=io.StringIO())
        return str(exc.value)
    if target == "import_runs":
        run = tmp_path / "run"
        f = run / "t1_perception_and_assessment" / "benchmark.jsonl"
        f.parent.mkdir(parents=True)
        if "generate" in case:
            n = case["generate"]["deep_record"]
            f.write_text('{"question_id": "s1_task0", "predicted_answer": ' + "[" * n + "]" * n + "}\n")
        elif "run_file_hex" in case:
            f.write_bytes(bytes.fromhex(case["run_file_hex"]))
        else:
            f.write_text(case["run_file_text"])
        with pytest.raises(CommandError) as exc:
            call_command("import_runs", str(run), "--agent", case.get("agent", "agent-x"), "--as-user", "mia",
                         stdout=io.StringIO())
        return str(exc.value)
    if target == "import_release":
        d = tmp_path / "release"
        (d / "tasks").mkdir(parents=True)
        if "generate" in case:  # a deep task file, or a deep manifest beside a good task file
            name = case["generate"].get("file", f"tasks/{T1}")
            (d / name).write_text(_deep(case["generate"]))
            if name != f"tasks/{T1}":
                (d / "tasks" / T1).write_text(json.dumps(case["samples"]))
        else:
            (d / "tasks" / T1).write_text(json.dumps(case["samples"]))
        for rel, text in (case.get("extra_files") or {}).items():  # files beside the task file
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
        if "manifest" in case:  # the sidecar, as an export writes it (its checksums worked out for the case)
            (d / "studio_manifest.json").write_text(json.dumps(case["manifest"]))
        with pytest.raises(CommandError) as exc:
            call_command("import_release", str(d), "--as-user", "mia", stdout=io.StringIO())
        return str(exc.value)
    if target == "import_xbd":
        d = tmp_path / "xbd"
        d.mkdir()
        (d / case["label_file"]).write_text(_deep(case["generate"]))
        with pytest.raises(CommandError) as exc:
            call_command("import_xbd", str(d), "--event", "corpus-xbd", stdout=io.StringIO())
        return str(exc.value)
    client.force_login(mia)
    if target == "upload":  # the runs page's zip upload: refused in the request, nothing stored
        r = client.post("/runs/", {"archive": _zip(case["zip"]), "agent": "x"})
        assert r.status_code == case["expect"]["status"], (r.status_code, r.content[:500])
        return html.unescape(r.content.decode())
    if target == "page":
        r = client.get(case["path"].format(**ctx))
        assert r.status_code == case["expect"]["status"], (r.status_code, r.content[:500])
        return r.content.decode()
    assert target == "api"
    path = case["path"].format(**ctx)
    send = getattr(client, case["method"].lower())
    if "form" in case:
        r = send(path, data=urlencode(case["form"]), content_type="application/x-www-form-urlencoded")
    else:
        payload = dict(case.get("json") or {})
        if "generate" in case and "question_bytes" in case["generate"]:
            payload["question"] = "q" * case["generate"]["question_bytes"]
        elif "generate" in case:  # a deep JSON line in a text field
            payload[case["generate"]["field"]] = _deep(case["generate"])
        body = case.get("raw") or json.dumps(payload).replace('"{layer}"', str(ctx.get("layer")))
        r = send(path, data=body, content_type="application/json")
    assert r.status_code == case["expect"]["status"], (r.status_code, r.content[:500])
    return r.json()["detail"]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bad_input_ends_in_a_named_error_and_writes_nothing(path, corpus_setup, tmp_path, client):
    case = json.loads(path.read_text())
    mia, setup = corpus_setup
    ctx = setup(case.get("setup", []))
    before = _counts()
    message = _run(case, ctx, tmp_path, client, mia)
    expect = case["expect"]
    for part in ("file", "field", "problem"):
        assert expect[part] in message, (part, expect[part], message[:500])
    assert _counts() == before


def test_the_corpus_covers_the_issue():
    """Every target of the issues' lists has cases, and each case file names its reproduction."""
    cases = [json.loads(p.read_text()) for p in CASES]
    assert {c["target"] for c in cases} == {"import_tasks", "import_runs", "import_release", "import_xbd", "api",
                                             "upload", "page"}
    assert all(c.get("issue") and {"file", "field", "problem"} <= set(c["expect"]) for c in cases)
    # 24 cases of the issue's list, less NaN in args and in classes: the benchmark's loader accepts
    # those, so they import losslessly (tests/test_taskfile_lossless.py)
    assert len(cases) >= 22
