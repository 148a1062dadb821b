"""The arithmetic reference environment with a graded reward, for tests that need a learning signal.

An untrained tiny model never writes an exact answer, so every group of envs/arithmetic earns the
same reward (0) and its gradient is exactly zero. Here a response earns the share of its characters
that are digits: deterministic (a replay recomputes the same reward), different across a group's
samples, so every step moves the weights. Everything else (problems, tools, protocol) is the
reference environment's, unchanged.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "envs",
                                "arithmetic"))
import arithmetic_env  # noqa: E402


def digit_share(response, golden_answers):
    return sum(ch.isdigit() for ch in response) / max(1, len(response))


arithmetic_env.reward = digit_share

if __name__ == "__main__":
    sys.exit(arithmetic_env.main(sys.argv[1:]))
