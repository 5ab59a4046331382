"""The benchmark's agent harness, as facts the studio's experiments reproduce (no Django, no I/O).

Sources (Junjue-Wang/DORA, read for the facts; the code here is the studio's own):

* ``dora/benchmark.py`` — a question per (sample, task): ``question_id = <sample_id>_task<i>``,
  ``task_scoped_question_id = <task_category>::<question_id>``; the *context* shown to the agent is
  the sample's metadata (every key but ``tasks``, input paths made absolute under the images
  folder, road classes 10/11/12 shown as the road tool's 1/2/3) as indented JSON in a fixed frame.
* ``dora/agent/prompts.py`` — the prompt (one user message): header, for IF the gold tool names in
  order, guidelines and answer format, then ``Question: `` + question, context and the answer
  fields. The text is the benchmark's protocol ("keep it byte-identical"), so it is carried over
  below as data (:data:`PROMPT_HEADER`, :data:`PROMPT_GUIDELINES`, ...).
* ``dora/agent/mcp_tools.py`` — model-safe tool names (``seg.flood`` → ``seg_flood``), arguments
  sent as JSON text turned back into lists/objects before the call, and IF's tool filter: only the
  gold tools (names in the gold trajectory/plan, calls nested in ``tool.loop``/``tool.reduce``
  included), all tools when none matches.
* ``dora/agent/runner.py`` — the answer (``<Answer>`` JSON of the latest AI message that has one,
  else the latest non-empty AI message, parsed as JSON when possible, else ``"No answer found"``),
  the trajectory (``{call: "name(arg, ...)", args, obs}`` per tool call, observations matched by
  call id, JSON text parsed, else ``{"raw_output": text}``), the record's fields, the run folder
  (``<task file stem>/benchmark.jsonl``, ``trajectories/<scoped id with :: as __>_trajectory.json``,
  ``run_stats.json``), a recursion limit of 50 and 900 s per question.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

__all__ = ["PROMPT_HEADER", "PROMPT_GUIDELINES", "IF_SEQUENCE_TITLE", "ANSWER_FIELDS_TITLE", "TYPE_DISPLAY",
           "RECURSION_LIMIT", "QUESTION_TIMEOUT_S", "OUT_OF_STEPS", "NO_ANSWER", "model_tool_name",
           "sample_context", "questions_from_samples", "build_prompt", "required_tool_names", "normalize_arguments",
           "message_text", "extract_answer", "normalize_observation", "call_text", "record_of", "trajectory_file_name", "trajectory_document",
           "run_stats", "steps_left"]

#: LangGraph super-steps per question (``AgentConfig.recursion_limit``, dora/agent/runner.py)
RECURSION_LIMIT = 50
#: wall-clock seconds per question (``AgentConfig.question_timeout_s``, dora/agent/runner.py)
QUESTION_TIMEOUT_S = 900.0
#: the AI message LangGraph's prebuilt ReAct agent answers with when the steps run out while the
#: model still asks for tools (langgraph.prebuilt.chat_agent_executor, ``remaining_steps < 2``)
OUT_OF_STEPS = "Sorry, need more steps to process this request."
#: the harness's answer when no AI message has text (dora/agent/runner.py, ``extract_answer``)
NO_ANSWER = "No answer found"

# ---- the prompt: data of the benchmark's protocol (dora/agent/prompts.py, byte for byte) ----

PROMPT_HEADER = (
    "You are a disaster-response geospatial analyst. You orchestrate MCP tools to answer quantitative questions "
    "about disaster imagery.\n\nTASK: Answer the question about disaster imagery analysis by composing tools into "
    "a pipeline.\n"
)
PROMPT_GUIDELINES = (
    "\nGUIDELINES:\n\n"
    "1. **Think in three stages**: Perceive \u2192 Analyze \u2192 Answer.\n"
    "   - **Perceive**: Run the appropriate perception tools to extract information from imagery.\n"
    "   - **Analyze**: Compose analysis tools to answer the question (spatial operations, arithmetic, routing, "
    "aggregation, etc.).\n"
    "   - **Answer**: Extract the numeric/structured result and format it as JSON.\n\n"
    "2. **Tool output chaining**: When a tool returns a file path (e.g., `mask_path`, `vector_path`, `buffer_path`), "
    "use that EXACT path as input to the next tool. Never fabricate or guess file paths.\n\n"
    "3. **Error recovery**: If a tool returns an error, check file paths and parameters. Retry ONCE with corrected "
    "inputs. If it still fails, proceed with available intermediate results.\n\n"
    "ANSWER FORMAT:\n"
    "Your final answer MUST be a JSON object with the exact field names from ANSWER_FIELDS.\n"
    'Format: <Answer>{"field_name_1": value1, "field_name_2": value2}</Answer>\n\n'
    "Rules:\n"
    "- Use the EXACT field names listed in ANSWER_FIELDS\n"
    "- Numeric values should be numbers (integers for counts, floats for measurements)\n"
    "- String values should be quoted\n"
    "- If a field expects a collection, use a JSON array or object as appropriate\n"
    "- File path values should be the actual output file path as a string\n"
    "- If you cannot compute a field, use null\n"
    "- ALWAYS provide the <Answer> tag even if some fields are null\n"
)
IF_SEQUENCE_TITLE = ("RECOMMENDED TOOL SEQUENCE (a plan to guide you; you may expand, split, or adapt steps as "
                     "needed \u2014 bind arguments yourself):")
ANSWER_FIELDS_TITLE = "ANSWER_FIELDS (your <Answer> must be a JSON object with exactly these keys):"
#: eval_spec type → the data type the agent is shown (metric names are never shown)
TYPE_DISPLAY = {
    "scalar_count": "integer", "scalar_continuous": "float", "scalar_numeric": "float", "exact_match": "string",
    "scalar_dict": "dict {string: number}", "set_f1": "list of strings", "ranking_kendall": "list of strings (ranked)",
    "polygon_iou": "file path (GeoJSON)", "point_pixel": "integer (pixel coordinate)",
    "point_haversine": "float (decimal degrees)", "text_bleu": "string",
}
_PATH_SUFFIXES = (".png", ".tif", ".tiff", ".jpg", ".jpeg", ".geojson", ".json", ".shp")  # dora/benchmark.py
_ROADS_DATASET, _ROADS_TOOL = {"10", "11", "12"}, {"1": "intact", "2": "flooded", "3": "blocked"}
_ROAD_NOTE = "Road segmentation tool outputs classes 1/2/3 (intact/flooded/blocked)."


def model_tool_name(name: str) -> str:
    """The model-safe name of a dotted tool id: ``seg.flood`` → ``seg_flood``."""
    return name.replace(".", "_") if isinstance(name, str) else name


def _absolute(value: Any, images_dir: str) -> Any:
    if isinstance(value, dict):
        return {k: _absolute(v, images_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [_absolute(v, images_dir) for v in value]
    if isinstance(value, str) and value.lower().endswith(_PATH_SUFFIXES):
        return f"{images_dir.rstrip('/')}/{value}"
    return value


def sample_context(sample: dict, images_dir: str) -> str:
    """The context block of every question of ``sample`` (a benchmark task-file sample): its
    metadata but ``tasks`` as JSON indented by 2, input paths under ``images_dir``, road classes
    10/11/12 shown as 1/2/3 with the harness's note, in the harness's indented frame."""
    meta = {k: copy.deepcopy(v) for k, v in sample.items() if k != "tasks"}
    if meta.get("input_data"):
        meta["input_data"] = _absolute(meta["input_data"], images_dir)
    note = ""
    classes = copy.deepcopy(sample.get("classes") or {})
    roads = classes.get("roads") if isinstance(classes, dict) else None
    if isinstance(roads, dict) and {str(k) for k in roads} == _ROADS_DATASET:
        classes["roads"], note = dict(_ROADS_TOOL), _ROAD_NOTE
    if classes:
        meta["classes"] = classes
    text = json.dumps(meta, indent=2, ensure_ascii=False)
    pad = " " * 12
    return f"\n{pad}Sample Metadata:\n{pad}{text}\n{pad}{note}\n{pad}"


def questions_from_samples(samples: Iterable[dict], images_dir: str) -> list[dict]:
    """One question dict per (sample, task) in file order: ``question_id``, ``task_scoped_question_id``,
    ``task_category``, ``task_category_code``, ``sample_id``, ``question``, ``context``,
    ``input_data``, ``eval_spec``, ``answer_format``, ``tools``, ``expected_trajectory``."""
    out = []
    for sample in samples:
        context = sample_context(sample, images_dir)
        for i, task in enumerate(sample.get("tasks") or []):
            qid = f"{sample['sample_id']}_task{i}"
            out.append({
                "question_id": qid, "task_scoped_question_id": f"{task.get('task_category')}::{qid}",
                "task_category": task.get("task_category"), "task_category_code": task.get("task_category_code"),
                "sample_id": sample["sample_id"], "question": task.get("question", ""), "context": context,
                "input_data": _absolute(sample.get("input_data") or {}, images_dir),
                "eval_spec": task.get("eval_spec") or {}, "answer_format": task.get("answer_format") or {},
                "tools": task.get("tools") or [], "expected_trajectory": task.get("trajectory") or [],
            })
    return out


def _fields_hint(eval_spec: dict, answer_format: dict) -> str:
    lines = []
    for field, kind in (eval_spec or {}).items():
        if kind == "ignore":
            continue
        if kind == "ratio_pct":
            low = field.lower()
            if low.endswith(("_pct", "_percent", "_percentage")):
                shown = "float in [0, 100] (e.g., 55.0 means 55%)"
            elif low.endswith(("_ratio", "_share", "_fraction")):
                shown = "float in [0, 1] (e.g., 0.55 means 55%)"
            else:
                shown = "float (match the field-name suffix: _ratio=[0,1], _pct=[0,100])"
        else:
            shown = TYPE_DISPLAY.get(kind, kind)
        keys = (answer_format or {}).get(field)
        lines.append(f'  - "{field}": {shown}' + (f"; {keys}" if keys else ""))
    return ANSWER_FIELDS_TITLE + "\n" + "\n".join(lines) if lines else ""


def _sequence_hint(steps: list) -> str:
    names = []
    for step in steps or []:
        call = step.get("call", "") if isinstance(step, dict) else ""
        name = call.split("(", 1)[0].strip() if isinstance(call, str) else ""
        if name:
            names.append(model_tool_name(name))
    if not names:
        return ""
    return "\n".join([IF_SEQUENCE_TITLE] + [f"  Step {i}: {n}" for i, n in enumerate(names, 1)])


def build_prompt(question: dict, protocol: str) -> str:
    """The one user message of ``question`` under ``protocol`` (``"AP"`` or ``"IF"``: IF adds the
    gold tool names in order, from ``expected_trajectory``, else ``tools``)."""
    parts = [question["question"], "", question["context"]]
    hint = _fields_hint(question.get("eval_spec") or {}, question.get("answer_format") or {})
    if hint:
        parts += ["", hint]
    sequence = ""
    if protocol == "IF":
        sequence = _sequence_hint(question.get("expected_trajectory") or question.get("tools") or [])
    system = PROMPT_HEADER + (f"\n{sequence}\n" if sequence else "") + PROMPT_GUIDELINES
    return f"{system}\n\nQuestion: " + "\n".join(parts)


def required_tool_names(question: dict) -> set[str]:
    """Dotted names of the gold tools of ``question`` (trajectory and plan; calls nested in the
    ``calls`` argument of ``tool.loop``/``tool.reduce`` included)."""
    names: set[str] = set()

    def walk(step):
        if not isinstance(step, dict):
            return
        call = step.get("call") or step.get("name") or ""
        if isinstance(call, str) and call.split("(", 1)[0].strip():
            names.add(call.split("(", 1)[0].strip())
        params = step.get("args") if isinstance(step.get("args"), dict) else step.get("inputs")
        if isinstance(params, dict):
            for nested in params.get("calls") or []:
                walk(nested)

    for step in list(question.get("expected_trajectory") or []) + list(question.get("tools") or []):
        walk(step)
    return names


def normalize_arguments(value: Any) -> Any:
    """Arguments as a tool receives them: a string that is a JSON list or object (after trimming)
    becomes that value, recursively; anything else is kept."""
    if isinstance(value, str):
        text = value.strip()
        if (text[:1], text[-1:]) in (("[", "]"), ("{", "}")):
            try:
                return normalize_arguments(json.loads(text))
            except ValueError:
                return value
        return value
    if isinstance(value, list):
        return [normalize_arguments(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize_arguments(v) for k, v in value.items()}
    return value


def message_text(content: Any) -> str:
    """An AI message's content as text (a list of parts: their ``text``/``content``/``value`` joined by lines)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, dict):
                key = next((k for k in ("text", "content", "value") if k in item), None)
                parts.append(str(item[key]) if key else json.dumps(item, ensure_ascii=False))
            else:
                parts.append(str(item))
        return "\n".join(p for p in parts if p)
    return str(content)


def _json_object(text: str):
    candidates = [text]
    if "{" in text and "}" in text:
        candidates.append(text[text.find("{"): text.rfind("}") + 1])
    for c in candidates:
        try:
            value = json.loads(c)
        except (TypeError, ValueError):
            continue
        if isinstance(value, dict):
            return value
    return None


def extract_answer(ai_texts: list[str]) -> Any:
    """The predicted answer from the AI messages' texts, oldest first: the JSON object inside
    ``<Answer>…</Answer>`` of the newest message that has both tags (the text between them when it
    is no object); else the newest non-empty message, as a JSON object when its outermost braces
    hold one, else its text; else :data:`NO_ANSWER`."""
    fallback = None
    for text in reversed(ai_texts):
        if "<Answer>" in text and "</Answer>" in text:
            inner = text[text.find("<Answer>") + len("<Answer>"): text.find("</Answer>")].strip()
            parsed = _json_object(inner)
            return parsed if parsed is not None else inner
        if text.strip() and fallback is None:
            fallback = text
    if fallback is None:
        return NO_ANSWER
    if "{" in fallback and "}" in fallback:
        parsed = _json_object(fallback[fallback.find("{"): fallback.rfind("}") + 1])
        if parsed is not None:
            return parsed
    return fallback


def normalize_observation(text: str) -> Any:
    """A tool message's text as the trajectory's ``obs``: its JSON value, else ``{"raw_output": text}``."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return {"raw_output": text}


def call_text(name: str, args: Any) -> str:
    """``"name(arg1, arg2)"``: the step's call as the harness writes it (argument names only)."""
    return f"{name}({', '.join(args.keys()) if isinstance(args, dict) and args else ''})"


def steps_left(model_calls_done: int, limit: int) -> int:
    """LangGraph's ``remaining_steps`` when the agent node runs for model call number
    ``model_calls_done + 1``: the agent and tools nodes alternate from super-step 0, so that call
    runs at step ``2 * model_calls_done`` and ``limit - step`` steps remain."""
    return limit - 2 * model_calls_done


_RECORD_KEYS = ("question_id", "task_scoped_question_id", "task_category", "task_category_code", "sample_id",
                "worker_id", "question", "predicted_answer", "error", "trajectory", "elapsed_time")


def record_of(question: dict, *, predicted_answer: Any, error: str | None, trajectory: list, elapsed_time: float,
              timestamp: str, worker_id: int = 0) -> dict:
    """The ``benchmark.jsonl`` record of one question (the harness's keys and order, then ``timestamp``)."""
    values = dict(question, worker_id=worker_id, predicted_answer=predicted_answer, error=error,
                  trajectory=trajectory, elapsed_time=elapsed_time)
    record = {k: values.get(k) for k in _RECORD_KEYS}
    record["timestamp"] = timestamp
    return record


def trajectory_file_name(record: dict) -> str:
    """``trajectories/<task-scoped id, '::' as '__'>_trajectory.json`` of a record."""
    return str(record["task_scoped_question_id"]).replace("::", "__") + "_trajectory.json"


def trajectory_document(record: dict) -> dict:
    """The trajectory file's JSON: the record without ``predicted_answer``, plus ``final_answer``."""
    doc = {k: v for k, v in record.items() if k != "predicted_answer"}
    doc["final_answer"] = record.get("predicted_answer")
    return doc


def run_stats(records: list[dict], timestamp: str) -> dict:
    """``run_stats.json`` of one task folder: total, success (an answer and no error), failed (an
    error), avg_time (mean ``elapsed_time``), timestamp."""
    n = len(records)
    return {
        "total": n,
        "success": sum(1 for r in records if r.get("predicted_answer") and not r.get("error")),
        "failed": sum(1 for r in records if r.get("error") is not None),
        "avg_time": sum(r.get("elapsed_time", 0) for r in records) / n if n else 0,
        "timestamp": timestamp,
    }
