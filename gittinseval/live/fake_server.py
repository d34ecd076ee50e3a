"""A fake OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1, with its own bill.

For trying a live task without an API key or a model, and for the tests: one model
answers each example correctly, every other model answers ``"0"``.  Serve one for a
``.jsonl`` of examples until interrupted::

    python -m gittinseval.live.fake_server --examples my_task/questions.jsonl --good-model big-model

``--reasoning-tokens 50`` (or ``--reasoning-tokens big-model=50``) makes the replies bill hidden
reasoning tokens as a reasoning model's do.  Its bill (calls, tokens and dollars per model, at
``--prices``) is served at ``GET /bill`` (JSON) and printed when it stops (Ctrl-C, or ``kill``),
so that a run's spend can be checked against it.  It serves the Batch API too
(:mod:`gittinseval.live.fake_batches`): a batch completes ``--batch-delay`` seconds after
its creation, and its lines are billed at the models' batch prices (``batch_input``,
``batch_output`` of ``--prices``), in the bill as ``<model> (batch)``.
"""

import json
import math
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gittinseval.live.fake_batches import FakeBatches
from gittinseval.live.rate_limits import BURST_SECONDS
from gittinseval.live.tasks.prices import load_prices

PRICES = {"good-model": {"input": 2.0, "output": 8.0}, "bad-model": {"input": 0.5, "output": 1.0}}
COMPLETION_TOKENS = 3
DEFAULT_PORT = 8791
"""The port of ``python -m gittinseval.live.fake_server`` without ``--port``."""


class FakeChatServer:
    """Answers chat completions from a key: ``good_model`` correctly (``reply`` formatted with the
    answer), any other model ``"0"``.

    Usage: ``prompt_tokens`` per call if given, else one token per word of the
    messages; ``completion_tokens[model]`` completion tokens (``COMPLETION_TOKENS`` for a
    model not in it): the length of a model's visible replies.  ``reasoning_tokens``: hidden
    reasoning tokens of each reply, a count for every model or ``{model: count}`` (0 for a
    model not in it), reported in ``usage.completion_tokens_details.reasoning_tokens`` and,
    as OpenAI counts them, a part of ``usage.completion_tokens``: a reply is billed its
    completion tokens, reasoning included once, at the output price.  Every call answered with a
    usage is billed (``billed``), even when the client is gone by then, as a provider
    would.  ``plan`` is a list of what to do with the next calls, in arrival order:
    ``"ok"``, an HTTP status (an ``int``, unbilled), ``"malformed"`` (a body that is
    not JSON), ``"no_usage"``, ``"negative_usage"`` or ``"excess_reasoning"`` (more reasoning
    than completion tokens; all four billed, reported wrongly).
    ``latency`` seconds pass before each answer.  The calls after the first
    ``block_after`` wait for ``release`` before they are answered (they still arrive
    and are counted in ``received``).  ``rpm``: a cap of requests per minute, kept as a provider may keep
    it, a leaky bucket that holds ``BURST_SECONDS`` of the rate (at least one request) and drains at
    ``rpm / 60`` per second, with ``jitter`` seconds of the rate more (a client's evenly spaced requests
    arrive a little unevenly); a request above it is answered at once with a 429 (unbilled, not counted in
    the bucket, counted in ``rate_limited``) whose ``Retry-After`` and ``retry-after-ms`` say when it
    would fit.  ``GET /bill`` (or ``/v1/bill``) answers :meth:`bill`.  ``batches``: its Batch API
    (:class:`~gittinseval.live.fake_batches.FakeBatches`), whose batches complete ``batch_delay`` seconds after
    their creation; their lines are billed in ``batch_billed``, at the batch prices.
    ``prices``: USD per 1M tokens by model, a mapping or :class:`~gittinseval.live.tasks.prices.Prices`
    (a model is found by its name after a provider, as the chat scorer finds it).
    """

    def __init__(
        self, answers, good_model="good-model", prices=PRICES, prompt_tokens=None, latency=0.0, reply="{answer}.",
        port=0, completion_tokens=None, reasoning_tokens=None, rpm=None, jitter=1.0, batch_delay=0.1,
    ):
        if rpm is not None and not (math.isfinite(rpm) and rpm > 0):
            raise ValueError(f"rpm must be a positive number of requests per minute, or None, got {rpm!r}")
        self.rpm = rpm
        self.jitter = jitter
        self.rate_limited = 0
        self._level = 0.0  # the bucket of the rpm cap: its requests, and when it last drained
        self._drained_at = time.monotonic()
        self.answers = answers
        self.reply = reply
        self.good_model = good_model
        self.prices = prices
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens or {}
        self.reasoning_tokens = reasoning_tokens or 0
        self.latency = latency
        self.plan = []
        self.calls = []  # (body, Authorization header, prompt tokens) of each call answered "ok"
        self.billed = []  # (model, prompt tokens, completion tokens with the reasoning ones) of each billed call
        self.batch_billed = []  # the same, of each batch line answered
        self.batches = FakeBatches(self.answer, batch_delay)
        self.received = 0
        self.block_after = None
        self.release = threading.Event()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True
            protocol_version = "HTTP/1.1"  # keep-alive, as a real endpoint: the client reuses its connections

            def log_message(self, *args):
                pass

            def send(self, status, answer):
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream" if isinstance(answer, bytes) else
                                 "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.startswith(("/v1/files", "/v1/batches")):
                    return self.send(*server.batches.get(self.path))
                found = self.path in ("/bill", "/v1/bill")
                self.send(200 if found else 404, server.bill() if found else {"error": {"message": "no GET here"}})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path in ("/v1/files", "/v1/batches"):
                    return self.send(*server.batches.post(self.path, self.headers["Content-Type"], raw))
                body = json.loads(raw)
                with server.lock:
                    server.received += 1
                    wait = server.admit()
                    blocked = server.block_after is not None and server.received > server.block_after
                    action = server.plan.pop(0) if server.plan and wait is None else "ok"
                if wait is not None:  # above the rpm cap: answered at once
                    action, message = 429, f"rate limit of {server.rpm:g} requests per minute reached"
                    limit = {"retry-after": str(math.ceil(wait)), "retry-after-ms": str(math.ceil(wait * 1000)),
                             "x-ratelimit-limit-requests": f"{server.rpm:g}", "x-ratelimit-remaining-requests": "0",
                             "x-ratelimit-reset-requests": f"{math.ceil(wait * 1000)}ms"}
                else:
                    message, limit = f"planned failure {action}", {}
                if server.latency and wait is None:
                    time.sleep(server.latency)
                if blocked and wait is None:
                    server.release.wait(timeout=60)
                if self.path != "/v1/chat/completions" or isinstance(action, int):
                    self.send_response(action if isinstance(action, int) else 404)
                    self.send_header("Content-Type", "application/json")
                    for name, value in limit.items():
                        self.send_header(name, value)
                    data = json.dumps({"error": {"message": message}}).encode()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                payload = server.answer(body, action, self.headers.get("Authorization"))
                data = b"{not json" if action == "malformed" else json.dumps(payload).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client is gone; the call is billed all the same

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # a batch's calls connect at once; the default backlog of 5 resets some

        self.httpd = Server(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, body, action="ok", authorization=None, batch=False):
        """The payload answering a chat ``body``, billed (in ``batch_billed`` for a ``batch`` line); ``action``
        ``"ok"`` keeps it in ``calls`` with its ``authorization``."""
        prompt = body["messages"][-1]["content"]
        tokens = self.prompt_tokens or sum(len(m["content"].split()) for m in body["messages"])
        good = body["model"] == self.good_model
        reply = self.reply.format(answer=self.answers[prompt]) if good else "0"
        message = {"role": "assistant", "content": reply}
        payload = {"id": f"chatcmpl-{len(self.billed) + len(self.batch_billed)}", "object": "chat.completion",
                   "created": int(time.time()), "model": body["model"],
                   "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
        reasoning = self.reasoning_of(body["model"])
        completion = self.completion_tokens.get(body["model"], COMPLETION_TOKENS) + reasoning
        if action != "no_usage":
            sign = -1 if action == "negative_usage" else 1
            payload["usage"] = {"prompt_tokens": sign * tokens, "completion_tokens": completion}
            if action == "excess_reasoning":
                payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": completion + 1}
            elif reasoning:  # as a model that does not reason, no details otherwise
                payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        with self.lock:
            (self.batch_billed if batch else self.billed).append((body["model"], tokens, completion))
            if action == "ok" and not batch:
                self.calls.append((body, authorization, tokens))
        return payload

    def admit(self):
        """Count a request arriving now against the ``rpm`` cap (under ``lock``): ``None`` when it fits (or there
        is no cap), else the seconds until it would fit, and it is not counted."""
        if self.rpm is None:
            return None
        now, rate = time.monotonic(), self.rpm / 60
        self._level = max(0.0, self._level - (now - self._drained_at) * rate)
        self._drained_at = now
        excess = self._level + 1 - max(1.0, rate * BURST_SECONDS) - rate * self.jitter
        if excess > 0:
            self.rate_limited += 1
            return excess / rate
        self._level += 1
        return None

    def reasoning_of(self, model):
        """The reasoning tokens of each reply of ``model``."""
        if isinstance(self.reasoning_tokens, int):
            return self.reasoning_tokens
        return self.reasoning_tokens.get(model, 0)

    def bill(self):
        """The bill per model: ``{model: {"calls", "tokens_in", "tokens_out", "tokens_reasoning", "dollars"}}``,
        ``tokens_out`` with the reasoning tokens, which are billed once, in it, at the output price; ``dollars``
        ``None`` for a model that ``prices`` does not price.  Batch lines are billed apart, as ``<model> (batch)``,
        at the model's batch price (``None`` without one)."""
        prices = load_prices(self.prices)
        bill = {}
        with self.lock:
            calls = [(model, False, *counts) for model, *counts in self.billed]
            calls += [(model, True, *counts) for model, *counts in self.batch_billed]
            for model, batch, tokens, completion in calls:
                line = bill.setdefault(
                    f"{model} (batch)" if batch else model,
                    {"calls": 0, "tokens_in": 0, "tokens_out": 0, "tokens_reasoning": 0, "dollars": 0.0},
                )
                line["calls"] += 1
                line["tokens_in"] += tokens
                line["tokens_out"] += completion
                line["tokens_reasoning"] += self.reasoning_of(model)
                price = _price(prices, model, batch)  # None for every call of an unpriced model
                line["dollars"] = None if price is None else line["dollars"] + price.dollars(tokens, completion)
        return bill

    def cost_of_calls(self):
        """Dollars of every billed call at ``prices`` (USD per 1M tokens): the sum of the :meth:`bill`."""
        return sum(line["dollars"] for line in self.bill().values())

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _price(prices, model, batch=False):
    """The price of ``model`` in ``prices`` (:class:`~gittinseval.live.tasks.prices.Prices`), its batch price for a
    ``batch`` line; ``None`` without one."""
    try:
        return prices.batch_price(model) if batch else prices.price(model)
    except ValueError:
        return None


def bill_lines(bill):
    """:meth:`FakeChatServer.bill` as text: a line per model, then the total, dollars as the run's ledger line
    shows them (``.6g``)."""
    def calls(count):
        return f"{count} call{'' if count == 1 else 's'}"

    lines = ["bill:"]
    for model, line in bill.items():
        dollars = "no price" if line["dollars"] is None else f"${line['dollars']:.6g}"
        lines.append(
            f"  {model}: {calls(line['calls'])}, {line['tokens_in']} tokens in, {line['tokens_out']} tokens out "
            f"({line['tokens_reasoning']} of them reasoning), {dollars}"
        )
    priced = [line["dollars"] for line in bill.values() if line["dollars"] is not None]
    unpriced = len(bill) - len(priced)
    lines.append(
        f"  total: {calls(sum(line['calls'] for line in bill.values()))}, ${sum(priced):.6g}"
        + (f" (and {unpriced} unpriced model{'' if unpriced == 1 else 's'})" if unpriced else "")
    )
    return "\n".join(lines)


def main():
    """Serve a fake endpoint for a .jsonl of examples until interrupted (the tutorial's own-task example):
    ``--good-model`` replies ``--reply`` with each example's answer, any other model "0"."""
    import argparse

    from gittinseval.live.tasks.prompts import PromptTemplate
    from gittinseval.live.tasks.scoring import bundled_prices, read_jsonl

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--examples", required=True, help="the .jsonl of examples")
    parser.add_argument("--prompt", default="{prompt}", help="the task's prompt template")
    parser.add_argument("--good-model", required=True)
    parser.add_argument("--reply", default="The answer is {answer}.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--reasoning-tokens", action="append", default=[], metavar="[MODEL=]N",
        help="hidden reasoning tokens of each reply (of MODEL's replies, repeatable), billed once as output tokens",
    )
    parser.add_argument(
        "--rpm", type=float, help="a cap of requests per minute: a request above it is answered 429 with Retry-After",
    )
    parser.add_argument(
        "--batch-delay", type=float, default=1.0, metavar="SECONDS",
        help="seconds from a batch's creation to its completion (its Batch API; default: 1)",
    )
    parser.add_argument(
        "--prices", help="USD per 1M tokens of each model, for the bill: a prices file, as a chat task's "
        "score_fn.prices (default: gittinseval/live/examples/prices.yaml)",
    )
    args = parser.parse_args()
    try:
        prices = load_prices(args.prices or bundled_prices())
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    if not (math.isfinite(args.batch_delay) and args.batch_delay >= 0):
        parser.error(f"--batch-delay takes a number of seconds, 0 or more, got {args.batch_delay:g}")
    if args.rpm is not None and not (math.isfinite(args.rpm) and args.rpm > 0):
        parser.error(f"--rpm takes a positive number of requests per minute, got {args.rpm:g}")
    reasoning = {}
    for setting in args.reasoning_tokens:
        model, _, count = setting.rpartition("=")
        if not count.isdigit():
            parser.error(f"--reasoning-tokens takes N or MODEL=N, a count of tokens, got {setting!r}")
        reasoning[model] = int(count)
    if "" in reasoning and len(reasoning) > 1:
        parser.error("--reasoning-tokens takes one N for every model, or MODEL=N for each model that reasons")
    template = PromptTemplate(args.prompt)
    answers = {template.render(example): example["answer"] for example in read_jsonl(args.examples)}
    server = FakeChatServer(
        answers, good_model=args.good_model, reply=args.reply, port=args.port,
        reasoning_tokens=reasoning.get("", reasoning), prices=prices, rpm=args.rpm, batch_delay=args.batch_delay,
    )
    if threading.current_thread() is threading.main_thread():  # signals can be handled there only
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` stops it as Ctrl-C does, with its bill
    print(f"fake chat endpoint at {server.base_url}", flush=True)
    print(f"its bill: GET {server.base_url}/bill, and printed here when it stops", flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        print(bill_lines(server.bill()), flush=True)


if __name__ == "__main__":
    main()
