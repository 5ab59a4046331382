"""Quality control of benchmark tasks, over plain data (no database, no HTTP; the database glue is
``annotation.services.qc``).

The paper's QC (seed 000, §3.4 "Quality control": question–answer alignment, eval-spec
completeness with zero unknown-type fields, numerical sanity) plus the structural, reference,
manifest, class-index, determinism and hygiene checks the studio needs. Every finding has a
stable ``check`` id (listed in ``CHECKS``), a severity (``error`` blocks submission, ``warning``
informs), a message that names the problem and the fix, and a location (``trajectory[2].args.
classes``, ``answer_spec[0]``, ``input_data.post_image`` ...).

Entry points
------------
``check_task(content, *, layers=None)``
    The fast checks, run on every save: structure, tools, references, classes, eval-spec,
    alignment, hygiene. ``content`` is the studio's task content: ``question``, ``trajectory``
    (``[{call, args}]``, ``obs`` optional), ``answer_spec`` (``[{name, eval_type, source,
    answer_format}]``), ``input_data``, ``classes`` and optionally ``final_answer`` (task files).
``full_qc(content, *, layers=None, replay=None, data_root=None, replay_hashes=None, polygons=None)``
    The fast checks plus manifest, numerical sanity (on the replayed gold), polygon golds and
    determinism. ``replay`` is ``{"trajectory": [{call, args, obs}], "final_answer": {...}}``.
``check_task_file(samples)``
    The layout of a benchmark task file (a list of samples with tasks): required fields, unique
    ids. ``content_from_dora_task(sample, task)`` maps one task onto the content shape.
``check_derived(content, derived)``
    Derived values against their sources (a manifest's GSD/CRS against its layers now, the gold
    replay's input fingerprint then and now); ``full_qc(..., derived=)`` runs it.
``check_determinism(hash_a, hash_b)``, ``release_findings(items)``, ``release_report(items)``.

Modules (one concern each; each declares its checks, id → (severity, meaning), in its ``CHECKS``)
-------------------------------------------------------------------------------------------------
``registry``      the checks' registry (``Check``), ``Finding``, ordering of findings
``tool_info``     what QC knows of a tool (registry + catalogue), value kinds of references
``layers``        the task's layers and the documented tool tables (modality, classes, GSD/CRS)
``plan``          the analysis the checks share: what each step reads and produces
``structure``     ``structure.*``: the content is a task; task-file layout
``steps``         ``tools.*``: the walk of the trajectory, tool names and arguments
``references``    ``references.*``: references point back, name returned keys, fit their types
``manifest``      ``manifest.*``, ``classes.*``: inputs, files, modality, dates, GSD/CRS, classes
``answers``       ``eval_spec.*``, ``alignment.*``: the answer is scorable and fits the query
``gold``          ``sanity.*``, ``determinism.hash``: the replayed gold's values and replays
``hygiene``       ``hygiene.*``: unused steps and layers
``derived``       ``derived.*``: copied values against their sources now
``release``       ``release.*``: near-duplicate questions; the release report
``tool_parity``   ``tool.*``, ``vec.*``, ``poi.*``, ``vis.*``: former tool refusals
``variants``      ``variant.*``: robustness variants
``suite``         the order the passes run in (the order of the findings), ``CHECKS``, ``checks()``
"""
from __future__ import annotations

from .answers import EVAL_TYPES
from .derived import DERIVED_MANIFEST_FIELDS, answer_in_metres, check_derived, stale_manifest_values
from .gold import check_determinism
from .layers import MODALITY_RULES, layers_from_input_data, mask_classes_of
from .references import BROKEN_REFERENCE_CHECKS, reference_accepts
from .registry import Check, Finding, has_errors
from .release import release_findings, release_report
from .structure import check_task_file, content_from_dora_task
from .suite import CHECKS, check_task, checks, full_qc, used_layer_files

__all__ = [
    "EVAL_TYPES", "CHECKS", "Check", "checks", "Finding", "check_task", "full_qc", "check_task_file",
    "content_from_dora_task", "layers_from_input_data", "check_determinism",
    "release_findings", "release_report", "has_errors", "MODALITY_RULES", "mask_classes_of",
    "used_layer_files", "DERIVED_MANIFEST_FIELDS", "stale_manifest_values", "answer_in_metres",
    "check_derived", "BROKEN_REFERENCE_CHECKS", "reference_accepts",
]
