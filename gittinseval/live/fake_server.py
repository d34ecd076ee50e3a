"""A fake OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1, with its own bill.

For trying a live task without an API key or a model, and for the tests: one model
answers each example correctly, every other model answers ``"0"``.  Serve one for a
``.jsonl`` of examples until interrupted::

    python -m gittinseval.live.fake_server --examples my_task/questions.jsonl --good-model big-model
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PRICES = {"good-model": {"input": 2.0, "output": 8.0}, "bad-model": {"input": 0.5, "output": 1.0}}
COMPLETION_TOKENS = 3


class FakeChatServer:
    """Answers chat completions from a key: ``good_model`` correctly (``reply`` formatted with the
    answer), any other model ``"0"``.

    Usage: ``prompt_tokens`` per call if given, else one token per word of the
    messages; ``completion_tokens[model]`` completion tokens (``COMPLETION_TOKENS`` for a
    model not in it): the length a model's replies are billed at.  Every call answered with a
    usage is billed (``billed``), even when the client is gone by then, as a provider
    would.  ``plan`` is a list of what to do with the next calls, in arrival order:
    ``"ok"``, an HTTP status (an ``int``, unbilled), ``"malformed"`` (a body that is
    not JSON), ``"no_usage"`` or ``"negative_usage"`` (all three billed, reported wrongly).
    ``latency`` seconds pass before each answer.  The calls after the first
    ``block_after`` wait for ``release`` before they are answered (they still arrive
    and are counted in ``received``).
    """

    def __init__(
        self, answers, good_model="good-model", prices=PRICES, prompt_tokens=None, latency=0.0, reply="{answer}.",
        port=0, completion_tokens=None,
    ):
        self.answers = answers
        self.reply = reply
        self.good_model = good_model
        self.prices = prices
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens or {}
        self.latency = latency
        self.plan = []
        self.calls = []  # (body, Authorization header, prompt tokens) of each call answered "ok"
        self.billed = []  # (model, prompt tokens, completion tokens) of each billed call
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

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.received += 1
                    blocked = server.block_after is not None and server.received > server.block_after
                    action = server.plan.pop(0) if server.plan else "ok"
                if server.latency:
                    time.sleep(server.latency)
                if blocked:
                    server.release.wait(timeout=60)
                if self.path != "/v1/chat/completions" or isinstance(action, int):
                    self.send_response(action if isinstance(action, int) else 404)
                    self.send_header("Content-Type", "application/json")
                    data = json.dumps({"error": {"message": f"planned failure {action}"}}).encode()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                prompt = body["messages"][-1]["content"]
                tokens = server.prompt_tokens or sum(len(m["content"].split()) for m in body["messages"])
                good = body["model"] == server.good_model
                reply = server.reply.format(answer=server.answers[prompt]) if good else "0"
                payload = {"choices": [{"message": {"role": "assistant", "content": reply}}]}
                completion = server.completion_tokens.get(body["model"], COMPLETION_TOKENS)
                if action != "no_usage":
                    sign = -1 if action == "negative_usage" else 1
                    payload["usage"] = {"prompt_tokens": sign * tokens, "completion_tokens": completion}
                with server.lock:
                    server.billed.append((body["model"], tokens, completion))
                    if action == "ok":
                        server.calls.append((body, self.headers.get("Authorization"), tokens))
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

    def cost_of_calls(self):
        """Dollars of every billed call at ``prices`` (USD per 1M tokens)."""
        with self.lock:
            return sum(
                (tokens * self.prices[model]["input"] + completion * self.prices[model]["output"]) / 1e6
                for model, tokens, completion in self.billed
            )

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def main():
    """Serve a fake endpoint for a .jsonl of examples until interrupted (the tutorial's own-task example):
    ``--good-model`` replies ``--reply`` with each example's answer, any other model "0"."""
    import argparse

    from gittinseval.live.tasks.prompts import PromptTemplate
    from gittinseval.live.tasks.scoring import read_jsonl

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--examples", required=True, help="the .jsonl of examples")
    parser.add_argument("--prompt", default="{prompt}", help="the task's prompt template")
    parser.add_argument("--good-model", required=True)
    parser.add_argument("--reply", default="The answer is {answer}.")
    parser.add_argument("--port", type=int, default=8791)
    args = parser.parse_args()
    template = PromptTemplate(args.prompt)
    answers = {template.render(example): example["answer"] for example in read_jsonl(args.examples)}
    server = FakeChatServer(answers, good_model=args.good_model, reply=args.reply, port=args.port)
    print(f"fake chat endpoint at {server.base_url}", flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
