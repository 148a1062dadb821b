#!/usr/bin/env python3
"""Multi-step arithmetic with a calculator tool: Stoa's reference environment server.

It speaks the environment protocol of docs/environment-protocol.md, so a run selects it with
`[run] task = "http"` and `[task] url = "http://127.0.0.1:PORT"`; the hub calls it, workers never
do. Python standard library only: an operator copies this one file beside the hub.

    arithmetic_env.py data  --out DIR [--train N] [--val N] [--seed S]   # train.jsonl, val.jsonl
    arithmetic_env.py serve [--host H] [--port P] [--port-file F]        # the environment server

The episode: the model may call the calculator as <calc> expression </calc> and reads the value
between <result> and </result>; it ends with <answer> number </answer>. Reward 1 when the last
answer equals the golden value as a number, else 0. Every answer is a pure function of
(problem, action): replay verification re-runs the same calls and must get the same bytes.
"""
import argparse
import ast
import json
import random
import re
import sys
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROTOCOL = 1
NAME = "arithmetic"
STOP_STRINGS = ["</calc>", "</answer>"]
# The rules' version: change it with the prompt, the steps or the reward, and a hub whose run
# started on another version says so loudly instead of mixing incomparable rewards.
VERSION = "1"
ACTION = re.compile(r"<(calc|answer)>(.*?)</\1>", re.DOTALL)
MAX_BODY = 1 << 20
MAX_EXPRESSION = 200
INVALID = ("\nMy previous action is invalid. To calculate, I should put an expression between "
           "<calc> and </calc>; to give the final answer, between <answer> and </answer>.\n")
PROMPT = ("Solve the arithmetic problem. You can use a calculator: write an expression between "
          "<calc> and </calc> and its value appears between <result> and </result>. Give the "
          "final answer as a number between <answer> and </answer>. Problem: {question}\n")


# ---- the calculator: + - * / and parentheses over integers and decimals, exact (Fractions) ----
class CalcError(ValueError):
    pass


def evaluate(expression):
    if len(expression) > MAX_EXPRESSION:
        raise CalcError("expression too long")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise CalcError("not an expression")
    return _eval(tree.body, depth=0)


def _eval(node, depth):
    if depth > 32:
        raise CalcError("expression nested too deeply")
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        try:
            return Fraction(str(node.value))
        except (ValueError, OverflowError):  # inf, nan
            raise CalcError("not a finite number")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _eval(node.operand, depth + 1)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left, right = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            raise CalcError("division by zero")
        return left / right
    raise CalcError("only numbers, + - * / and parentheses are allowed")


def render(value):
    """A Fraction as the shortest exact decimal, or p/q when it has none."""
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d != 1:
        return f"{value.numerator}/{value.denominator}"
    text = f"{float(value):.12f}".rstrip("0")
    return text


def as_number(text):
    text = text.strip().replace(",", "")
    try:
        return evaluate(text) if text else None
    except CalcError:
        return None


# ---- the task ----
def step(problem, action, tools_allowed):
    match = ACTION.search(action)
    if match is None:
        return {"kind": "invalid", "done": False,
                "observation": {"head": INVALID if tools_allowed else ""}}
    kind, content = match.group(1), match.group(2).strip()
    if kind == "answer":
        return {"kind": "answer", "content": content, "done": True}
    if not tools_allowed:
        return {"kind": "tool", "tool": "calc", "content": content, "done": False}
    try:
        value = render(evaluate(content))
    except CalcError as e:
        value = f"error: {e}"
    return {"kind": "tool", "tool": "calc", "content": content, "done": False,
            "observation": {"head": "\n<result>", "body": value, "tail": "</result>\n"}}


def reward(response, golden_answers):
    answers = re.findall(r"<answer>(.*?)</answer>", response, re.DOTALL)
    if not answers:
        return 0.0
    given = as_number(answers[-1])
    return 1.0 if given is not None and any(as_number(g) == given for g in golden_answers) else 0.0


def make_problem(rng, index, split):
    a, b, c, d = (rng.randint(2, 99) for _ in range(4))
    op1, op2 = rng.choice(["+", "-", "*"]), rng.choice(["+", "-", "*"])
    question = f"({a} {op1} {b}) {op2} {c} * {d}"
    value = render(evaluate(question))
    return {"id": f"{split}-{index}", "question": f"What is {question}?",
            "golden_answers": [value], "split": split, "category": "arithmetic"}


# ---- HTTP ----
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the hub logs what matters
        pass

    def reply(self, status, payload):
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/info":
            return self.reply(200, {"protocol": PROTOCOL, "name": NAME,
                                    "stop_strings": STOP_STRINGS, "version": VERSION})
        self.reply(404, {"error": "unknown route"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            return self.reply(400, {"error": "a JSON body of at most 1 MiB is required"})
        try:
            request = json.loads(self.rfile.read(length))
            if self.path == "/v1/prompt":
                question = request["problem"]["question"].strip()
                return self.reply(200, {"prompt": PROMPT.format(question=question)})
            if self.path == "/v1/step":
                return self.reply(200, step(request["problem"], str(request["action"]),
                                            bool(request["tools_allowed"])))
            if self.path == "/v1/reward":
                return self.reply(200, {"reward": reward(str(request["response"]),
                                                         list(request["golden_answers"]))})
        except (ValueError, KeyError, TypeError) as e:
            return self.reply(400, {"error": f"bad request: {e}"})
        self.reply(404, {"error": "unknown route"})


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("data", help="write train.jsonl and val.jsonl")
    data.add_argument("--out", required=True)
    data.add_argument("--train", type=int, default=512)
    data.add_argument("--val", type=int, default=64)
    data.add_argument("--seed", type=int, default=1)
    serve = sub.add_parser("serve", help="run the environment server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--port-file", help="write the port here once listening")
    args = parser.parse_args(argv)
    if args.command == "data":
        import os
        os.makedirs(args.out, exist_ok=True)
        rng = random.Random(args.seed)
        for split, count in (("train", args.train), ("val", args.val)):
            with open(os.path.join(args.out, f"{split}.jsonl"), "w") as f:
                for i in range(count):
                    f.write(json.dumps(make_problem(rng, i, split)) + "\n")
        return 0
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        import os
        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"arithmetic environment on http://{args.host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
