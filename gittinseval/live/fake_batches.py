"""The fake server's OpenAI-compatible Batch API: files and batches of ``/v1/chat/completions`` lines.

:class:`~gittinseval.live.fake_server.FakeChatServer` serves, through a :class:`FakeBatches`:

- ``POST /v1/files`` (multipart, ``purpose=batch``): keeps the uploaded JSONL, answers its file object;
- ``POST /v1/batches``: a batch of an uploaded file, ``in_progress`` for ``delay`` seconds;
- ``GET /v1/batches/{id}``: the batch; the first retrieval after its delay completes it: each line is answered as
  the chat endpoint would answer it, its reply in the output file, and billed at the model's batch price;
- ``GET /v1/batches``: every batch (one page), as ``client.batches.list`` reads it;
- ``GET /v1/files/{id}/content``: a file's JSONL (an input, output or error file).

``line_plan`` says what becomes of the next lines completed, in order: ``"ok"`` (the default), ``"expired"``
(the line did not run in the completion window: the batch ends ``expired``, the line is in the error file with
code ``batch_expired``, unbilled), ``"cancelled"`` (the same, the batch cancelled before the line ran: it ends
``cancelled``, the line's code ``batch_cancelled``) or an HTTP status (an ``int``: the line's response has that
status and an error body, unbilled).  ``fail_batches`` batches created from now on fail (status ``failed``) with
the error code ``fail_code``.
``created`` counts the batches created, ``retrieved`` the retrievals of each batch, and ``lines`` keeps every
line submitted (its ``custom_id`` and body), so that a test sees what was submitted and how often.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import urlsplit

__all__ = ["FakeBatches"]

EXPIRED = {"code": "batch_expired",
           "message": "This request could not be executed before the completion window expired."}
"""The error of a line that did not run in the window, as OpenAI writes it in the error file."""
CANCELLED = {"code": "batch_cancelled", "message": "This request was cancelled before it was executed."}
"""The error of a line that did not run before its batch was cancelled."""


class FakeBatches:
    """The files and batches of a fake server; ``answer(body)`` answers a chat body with its payload and bills it
    at the batch price (:meth:`~gittinseval.live.fake_server.FakeChatServer.answer`).

    Args:
        answer: ``answer(body, batch=True) -> payload`` of the chat endpoint.
        delay: seconds from a batch's creation to its completion.
    """

    def __init__(self, answer, delay: float = 0.1) -> None:
        self.answer = answer
        self.delay = float(delay)
        self.line_plan: list[Any] = []
        self.fail_batches = 0
        self.fail_code = "invalid_request"
        self.creation_seconds = 0.0  # how long a POST /v1/batches takes to answer (a slow provider)
        self.created = 0
        self.retrieved: Counter[str] = Counter()
        self.lines: list[tuple[str, dict[str, Any]]] = []
        self.files: dict[str, tuple[dict[str, Any], bytes]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def _file(self, content: bytes, purpose: str, filename: str) -> dict[str, Any]:
        """Keep ``content`` as a new file; its file object."""
        info = {"id": f"file-{next(self._ids)}", "object": "file", "bytes": len(content),
                "created_at": int(time.time()), "filename": filename, "purpose": purpose, "status": "processed"}
        self.files[info["id"]] = (info, content)
        return info

    def post(self, path: str, content_type: str, raw: bytes) -> tuple[int, Any]:
        """``(status, JSON answer)`` of a POST to ``/v1/files`` or ``/v1/batches``."""
        if path == "/v1/batches":
            time.sleep(self.creation_seconds)  # outside the lock: the server answers other requests meanwhile
        with self._lock:
            if path == "/v1/files":
                # The multipart body as an email message: the standard library's parser of MIME parts.
                head = b"Content-Type: " + content_type.encode() + b"\r\n\r\n"
                parts = BytesParser(policy=HTTP).parsebytes(head + raw)
                fields = {part.get_param("name", header="content-disposition"): part for part in parts.iter_parts()}
                if "file" not in fields:
                    return 400, {"error": {"message": "no file in the upload"}}
                upload = fields["file"]
                purpose = fields["purpose"].get_content().strip() if "purpose" in fields else "batch"
                return 200, self._file(upload.get_payload(decode=True), purpose, upload.get_filename() or "upload")
            if path == "/v1/batches":
                body = json.loads(raw)
                if body.get("input_file_id") not in self.files:
                    return 404, {"error": {"message": f"no file {body.get('input_file_id')!r}"}}
                self.created += 1
                batch = {"id": f"batch_{next(self._ids)}", "object": "batch", "endpoint": body["endpoint"],
                         "input_file_id": body["input_file_id"], "completion_window": body["completion_window"],
                         "status": "in_progress", "created_at": int(time.time()), "due": time.monotonic() + self.delay,
                         "output_file_id": None, "error_file_id": None,
                         "request_counts": {"total": 0, "completed": 0, "failed": 0}}
                if self.fail_batches:
                    self.fail_batches -= 1
                    batch.update(status="failed", errors={"object": "list", "data": [
                        {"code": self.fail_code, "message": "planned failure of the batch"}]})
                else:
                    lines = [json.loads(line) for line in self.files[body["input_file_id"]][1].splitlines() if line]
                    self.lines += [(line["custom_id"], line["body"]) for line in lines]
                    batch["request_counts"]["total"] = len(lines)
                self.batches[batch["id"]] = batch
                return 200, _shown(batch)
            return 404, {"error": {"message": f"no POST {path}"}}

    def get(self, path: str) -> tuple[int, Any]:
        """``(status, answer)`` of a GET under ``/v1/files`` or ``/v1/batches``: JSON, or a file's bytes."""
        with self._lock:
            parts = urlsplit(path).path.strip("/").split("/")
            if parts == ["v1", "batches"]:
                data = [_shown(self._completed(batch)) for batch in reversed(self.batches.values())]
                return 200, {"object": "list", "data": data, "has_more": False,
                             "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None}
            if parts[:2] == ["v1", "batches"] and len(parts) == 3 and parts[2] in self.batches:
                self.retrieved[parts[2]] += 1
                return 200, _shown(self._completed(self.batches[parts[2]]))
            if parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content" and parts[2] in self.files:
                return 200, self.files[parts[2]][1]
            return 404, {"error": {"message": f"no GET {path}"}}

    def _completed(self, batch: dict[str, Any]) -> dict[str, Any]:
        """The batch, completed (its lines answered, billed and written to its files) once its delay has passed."""
        if batch["status"] != "in_progress" or time.monotonic() < batch["due"]:
            return batch
        output, errors, ended = [], [], "completed"
        for line in self.files[batch["input_file_id"]][1].splitlines():
            line = json.loads(line)
            action = self.line_plan.pop(0) if self.line_plan else "ok"
            result = {"id": f"batch_req_{next(self._ids)}", "custom_id": line["custom_id"], "response": None,
                      "error": None}
            if action in ("expired", "cancelled"):
                ended = action
                errors.append({**result, "error": EXPIRED if action == "expired" else CANCELLED})
            elif isinstance(action, int):
                body = {"error": {"message": f"planned failure {action}", "type": "invalid_request_error"}}
                errors.append({**result, "response": {"status_code": action, "request_id": result["id"], "body": body}})
            else:
                payload = self.answer(line["body"], batch=True)
                output.append({**result, "response": {"status_code": 200, "request_id": result["id"], "body": payload}})
        for name, lines in (("output_file_id", output), ("error_file_id", errors)):
            if lines:
                content = "".join(json.dumps(line) + "\n" for line in lines).encode()
                batch[name] = self._file(content, "batch_output", f"{batch['id']}_{name}.jsonl")["id"]
        batch["request_counts"].update(completed=len(output), failed=len(errors))
        batch["status"] = ended
        batch[f"{batch['status']}_at"] = int(time.time())
        return batch


def _shown(batch: dict[str, Any]) -> dict[str, Any]:
    """The batch object as the API answers it (without the server's own ``due``)."""
    return {key: value for key, value in batch.items() if key != "due"}
