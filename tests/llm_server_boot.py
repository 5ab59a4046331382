"""Start llama-cpp-python's server (``python -m llama_cpp.server``) with llama.cpp's *extra buffer
types* switched off (``llama_model_params.use_extra_bufts = False``); run by the model server's own
interpreter (``.venv-llm``), from ``tests/conftest_llm.py``, with the server's command line.

Why: llama.cpp built for this CPU packs the weights for its AMX tile instructions (an extra buffer
type) and the first prompt of more than one token runs ``tileloadd``, which this machine's kernel
does not allow a process: the server died of SIGILL (``trap invalid opcode … in libggml-cpu.so``)
on every chat request. Without extra buffers the weights stay in plain CPU buffers (AVX-512 paths),
the answers are the model's, only the weight repacking is skipped. llama-cpp-python 0.3.36 has no
option for it, hence this start-up shim (no other change to the server).
"""
import runpy

import llama_cpp
import llama_cpp.llama
import llama_cpp.llama_cpp

_defaults = llama_cpp.llama_cpp.llama_model_default_params


def _model_params():
    params = _defaults()
    params.use_extra_bufts = False
    return params


for module in (llama_cpp, llama_cpp.llama_cpp, llama_cpp.llama.llama_cpp):
    module.llama_model_default_params = _model_params

if __name__ == "__main__":
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
