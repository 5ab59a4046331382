"""The pure benchmark kernel: what the studio knows about the benchmark's files, with no Django.

Everything else imports these instead of keeping its own copy (one obvious place per concept):

* :mod:`kernel.vocabulary` — the five dimensions (key, code, task-file name, category, label) and
  the rule that tells a task's dimension from its ``task_category_code``;
* :mod:`kernel.taskfile` — reading a task file into plain data and writing it back byte for byte,
  the storage tagging of NaN/Infinity, and the checks the benchmark's loader itself makes;
* :mod:`kernel.steps` — a step's tool name and arguments (``call``/``name``, ``args``/``inputs``,
  nested ``args.calls``);
* :mod:`kernel.inputs` — input_data rules: which strings are data paths, the phase of a key, the
  modality configuration;
* :mod:`kernel.catalogue` — the benchmark's tool catalogue (``dora-tools.json``) and where it is found;
* :mod:`kernel.taxonomy` — the E1–E6 plan-error taxonomy and "correct iff no flag";
* :mod:`kernel.values` — ``FrozenValue``, the base of immutable value classes on start-up paths
  (instead of frozen dataclasses: ``dataclasses`` imports ``inspect``);
* :mod:`kernel.references` — the reference syntax (``<key> from trajectory[N].obs``);
* :mod:`kernel.tools` — the studio's implementation of the benchmark's tools and their registry;
* :mod:`kernel.engine` — the replay engine (a trajectory run step by step through the registry).

The last three moved here from ``replay`` (issue 19): QC in ``annotation`` needs them, and
annotation sits below replay; the ``replay`` app keeps what binds them to the database.

A test (tests/test_kernel.py) imports the package in a fresh interpreter and asserts that no
Django module was loaded.
"""
