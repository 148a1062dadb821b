#!/usr/bin/env python3
"""A newcomer's own task for `test_integration_newcomer`, written from docs/environment-protocol.md
alone (Python standard library only): repeat a word. The model must answer <answer>WORD</answer>;
the reward is 1.0 for the word, 0.0 otherwise. One turn; a turn without an answer gets a hint.

    newcomer_env.py data --out DIR                       # DIR/train.jsonl and DIR/val.jsonl
    newcomer_env.py serve --port P --port-file F         # the environment server (P = 0: any port)
"""
import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORDS = ["apple", "river", "stone", "cloud", "maple", "tiger", "amber", "delta",
         "flint", "grove", "heron", "ivory", "jade", "koala", "lemon", "mango"]
VERSION = "1"


def answer_of(text):
    start = text.find("<answer>")
    if start < 0:
        return None
    end = text.find("</answer>", start)
    return text[start + len("<answer>"):end if end >= 0 else len(text)].strip()


def step(action, tools_allowed):
    # A function of (action, tools_allowed) only: replays get the same bytes.
    if answer_of(action) is not None:
        return {"kind": "answer", "done": True, "observation": {"head": "", "body": "", "tail": ""}}
    hint = "Answer with <answer>the word</answer>." if tools_allowed else ""
    return {"kind": "invalid", "done": False, "observation": {"head": "", "body": hint, "tail": ""}}


def reward(response, golden_answers):
    got = answer_of(response)
    return 1.0 if got is not None and got in golden_answers else 0.0


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def reply(self, payload):
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/v1/info":
            self.send_error(404)
            return
        self.reply({"protocol": 1, "name": "echo", "stop_strings": ["</answer>"],
                    "version": VERSION})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/v1/prompt":
            self.reply({"prompt": request["problem"]["question"]})
        elif self.path == "/v1/step":
            self.reply(step(request["action"], request.get("tools_allowed", True)))
        elif self.path == "/v1/reward":
            self.reply({"reward": reward(request["response"], request["golden_answers"])})
        else:
            self.send_error(404)


def write_data(out):
    import os
    os.makedirs(out, exist_ok=True)
    for split, words in (("train", WORDS * 2), ("val", WORDS[:6])):
        with open(os.path.join(out, split + ".jsonl"), "w") as f:
            for i, word in enumerate(words):
                problem = {"id": "%s-%d" % (split, i), "question": "Repeat this word: " + word,
                           "golden_answers": [word]}
                f.write(json.dumps(problem) + "\n")


def main(argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    data = sub.add_parser("data")
    data.add_argument("--out", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--port-file")
    args = parser.parse_args(argv)
    if args.command == "data":
        write_data(args.out)
        return 0
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        import os
        os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
