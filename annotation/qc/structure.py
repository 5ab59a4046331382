"""Structure checks: the content is a task at all (a query, steps, an input_data manifest), and a
benchmark task file has the layout its loader and evaluator need (``check_task_file``; one
task of it maps onto QC content with ``content_from_dora_task``)."""
from __future__ import annotations

from typing import Any

from kernel.vocabulary import BY_KEY, dimension_of_code, dimension_of_file

from .plan import Analysis
from .registry import Finding, declare, finding

__all__ = ["CHECKS", "check_structure", "TASK_FIELDS", "check_task_file", "content_from_dora_task"]

#: the checks of this concern: id → (severity, meaning)
CHECKS: dict[str, tuple[str, str]] = declare("structure", {
    "structure.question": ("error", "the query is empty"),
    "structure.trajectory": ("error", "the trajectory has no step"),
    "structure.step": ("error", "a step is not {call: str, args: dict}"),
    "structure.input_data": ("error", "input_data is not a dict of layer entries with a path"),
    "structure.field": ("error", "a field the benchmark's task-file layout requires is missing or of the wrong type"),
    "structure.duplicate_id": ("error", "two samples share a sample id (question ids collide)"),
    "structure.category": ("warning", "task_category_code is not T1..T5 or a sub-code (T1-1, T1.2), or is another dimension's than its file's"),
})


def check_structure(a: Analysis):
    """``structure.question``, ``structure.trajectory``, ``structure.input_data`` of the content."""
    c = a.content
    if not str(c.get("question", "") or "").strip():
        a.add("structure.question", "The query is empty: write the question.", "question")
    if not isinstance(a.steps, list) or not a.steps:
        a.add("structure.trajectory", "The trajectory has no step: add at least one tool call.", "trajectory")
        a.steps = a.steps if isinstance(a.steps, list) else []
    input_data = c.get("input_data")
    if input_data not in (None, {}) and not isinstance(input_data, dict):
        a.add("structure.input_data", "input_data must be an object mapping a key to a layer entry.", "input_data")
    elif isinstance(input_data, dict):
        for key, entry in input_data.items():
            if isinstance(entry, str):
                continue
            if not isinstance(entry, dict):
                a.add("structure.input_data", f"input_data.{key} must be a layer entry {{image_path|path, ...}}.",
                      f"input_data.{key}")
                continue
            if not (entry.get("image_path") or entry.get("path")) and not any(isinstance(v, dict) for v in entry.values()):
                a.add("structure.input_data",
                      f"input_data.{key} has no image_path (rasters) or path (vectors): name the layer's file.",
                      f"input_data.{key}")


TASK_FIELDS = {"question": str, "task_category": str, "task_category_code": (str, int), "trajectory": list,
               "final_answer": dict, "eval_spec": dict}


def check_task_file(samples: Any, file_name: str = "") -> list[Finding]:
    """The layout of one benchmark task file: a list of samples ``{sample_id, input_data,
    classes?, tasks: [{question, task_category, task_category_code, tools?, trajectory,
    final_answer, eval_spec, answer_format?}]}``; sample ids unique."""
    out: list[Finding] = []
    prefix = f"{file_name}:" if file_name else ""
    file_dim = dimension_of_file(file_name) if file_name else None
    if not isinstance(samples, list):
        return [finding("structure.field", f"{prefix} a task file is a JSON list of samples.", prefix or "file")]
    seen: dict[str, int] = {}
    for s, sample in enumerate(samples):
        sloc = f"{prefix}[{s}]"
        if not isinstance(sample, dict):
            out.append(finding("structure.field", f"Sample {s} is not an object.", sloc))
            continue
        sid = sample.get("sample_id")
        if not isinstance(sid, str) or not sid.strip():
            out.append(finding("structure.field", f"Sample {s} has no sample_id (required).", f"{sloc}.sample_id"))
        elif sid in seen:
            out.append(finding("structure.duplicate_id", f"Sample id '{sid}' is used by samples {seen[sid]} and {s}: question ids ({sid}_task<i>) collide; rename one.", f"{sloc}.sample_id"))
        else:
            seen[sid] = s
        if "input_data" in sample and not isinstance(sample["input_data"], dict):
            out.append(finding("structure.field", f"Sample {s}: input_data must be an object.", f"{sloc}.input_data"))
        if "classes" in sample and sample["classes"] is not None and not isinstance(sample["classes"], dict):
            out.append(finding("structure.field", f"Sample {s}: classes must be an object (layer → {{value: label}}).", f"{sloc}.classes"))
        tasks = sample.get("tasks")
        if not isinstance(tasks, list) or not tasks:
            out.append(finding("structure.field", f"Sample {s} has no tasks list (required).", f"{sloc}.tasks"))
            continue
        for t, task in enumerate(tasks):
            tloc = f"{sloc}.tasks[{t}]"
            if not isinstance(task, dict):
                out.append(finding("structure.field", f"Sample {s}, task {t} is not an object.", tloc))
                continue
            for key, typ in TASK_FIELDS.items():
                if key == "trajectory" and key not in task and "tools" in task:
                    continue
                if key not in task or not isinstance(task[key], typ):
                    want = typ.__name__ if isinstance(typ, type) else "str"
                    out.append(finding("structure.field", f"Task {sid}_task{t}: '{key}' is {'missing' if key not in task else 'not a ' + want} (the benchmark's loader and evaluator need it).", f"{tloc}.{key}"))
            code = task.get("task_category_code", "")
            code_dim = dimension_of_code(code)
            if str(code).strip() and code_dim is None:
                out.append(finding("structure.category", f"Task {sid}_task{t}: task_category_code '{code}' is neither T1..T5 nor a sub-code of one (T1-1, T1.2); the benchmark passes it through, but it names no dimension.", f"{tloc}.task_category_code"))
            elif file_dim and code_dim and code_dim != file_dim:
                out.append(finding("structure.category", f"Task {sid}_task{t}: task_category_code '{code}' is dimension {BY_KEY[code_dim].code}, but {file_name} holds {BY_KEY[file_dim].code} tasks; move the task or correct the code.", f"{tloc}.task_category_code"))
    return out


def content_from_dora_task(sample: dict, task: dict) -> dict:
    """Map a task of a benchmark task file onto QC content: eval_spec (dict) and final_answer
    (dict) become ``answer_spec`` fields whose ``source`` is the gold value."""
    eval_spec = task.get("eval_spec") if isinstance(task.get("eval_spec"), dict) else {}
    final = task.get("final_answer") if isinstance(task.get("final_answer"), dict) else {}
    fmt = task.get("answer_format") if isinstance(task.get("answer_format"), dict) else {}
    answer_spec = [{"name": k, "eval_type": v, "source": final.get(k), "answer_format": fmt.get(k, "")}
                   for k, v in eval_spec.items()]
    trajectory = task.get("trajectory")
    if trajectory is None:
        trajectory = task.get("tools") if isinstance(task.get("tools"), list) and all(isinstance(x, dict) for x in task.get("tools")) else []
    return {
        "question": task.get("question", ""),
        "task_category": task.get("task_category", ""),
        "task_category_code": task.get("task_category_code", ""),
        "disaster_type": sample.get("disaster_type", task.get("disaster_type", "")),
        "input_data": sample.get("input_data") or {},
        "classes": sample.get("classes") or {},
        "tools": task.get("tools") or [],
        "trajectory": trajectory if isinstance(trajectory, list) else [],
        "answer_spec": answer_spec,
        "final_answer": final if "final_answer" in task else None,
    }
