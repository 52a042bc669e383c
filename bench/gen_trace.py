#!/usr/bin/env python3
"""gen_trace.py - seeded Mooncake-format traces of prefix traffic, for
`kvfsctl replay` (one JSON object a line: timestamp, input_length,
output_length, hash_ids; one hash id per 512-token block).

    gen_trace.py --kind chat|agent|sysprompt|mixed [--requests N]
                 [--seed S] > trace.jsonl

Kinds (standard library only; the same seed gives the same bytes):

  chat       multi-turn conversations: each opens with a fresh prompt of
             4-60 blocks; each later turn re-sends the whole history plus
             1-4 new blocks (the last answer and the new question). Several
             hundred conversations are live at once; a turn picks one
             (Zipf-weighted, so some are busy and most idle) and a
             conversation ends after a geometric number of turns (mean 4),
             so its last blocks are never reused and reuse distances are
             long (the issue's lesson 1).
  agent      tool-agent loops: a task prompt of 8-40 blocks, then 3-15
             steps in quick succession, each re-sending the context plus
             1-3 blocks of tool output; a few tasks interleave. Short,
             bursty reuse.
  sysprompt  a handful of shared system prompts (2-16 blocks, Zipf
             popularity) followed by a one-off user part of 1-30 blocks:
             most blocks are never reused, a few are reused all the time
             (admission matters most here: lesson 2).
  mixed      a third of each, interleaved.
"""
import argparse
import json
import random
import sys


class Ids:
    def __init__(self):
        self.next = 0

    def fresh(self, n):
        out = list(range(self.next, self.next + n))
        self.next += n
        return out


def zipf_pick(rng, items, s=1.1):
    weights = [1.0 / (i + 1) ** s for i in range(len(items))]
    return rng.choices(items, weights)[0]


def chat(rng, ids, n):
    live = []
    for _ in range(n):
        if not live or rng.random() < 0.25:
            conv = {"ctx": ids.fresh(rng.randint(4, 60))}
            live.insert(0, conv)
            yield list(conv["ctx"])
            continue
        conv = zipf_pick(rng, live, 0.8)
        conv["ctx"] = conv["ctx"] + ids.fresh(rng.randint(1, 4))
        yield list(conv["ctx"])
        if rng.random() < 0.25 or len(conv["ctx"]) > 300:
            live.remove(conv)
        if len(live) > 400:
            live.pop()


def agent(rng, ids, n):
    tasks = []
    for _ in range(n):
        if len(tasks) < 3 or rng.random() < 0.1:
            tasks.append({"ctx": ids.fresh(rng.randint(8, 40)),
                          "left": rng.randint(3, 15)})
            yield list(tasks[-1]["ctx"])
            continue
        t = rng.choice(tasks)
        t["ctx"] = t["ctx"] + ids.fresh(rng.randint(1, 3))
        t["left"] -= 1
        yield list(t["ctx"])
        if t["left"] <= 0:
            tasks.remove(t)


def sysprompt(rng, ids, n):
    prompts = [ids.fresh(rng.randint(2, 16)) for _ in range(12)]
    for _ in range(n):
        yield zipf_pick(rng, prompts) + ids.fresh(rng.randint(1, 30))


def mixed(rng, ids, n):
    gens = [chat(rng, ids, n), agent(rng, ids, n), sysprompt(rng, ids, n)]
    for _ in range(n):
        yield next(rng.choice(gens))


KINDS = {"chat": chat, "agent": agent, "sysprompt": sysprompt,
         "mixed": mixed}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", choices=sorted(KINDS), required=True)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.requests < 1:
        ap.error("--requests must be positive")
    rng = random.Random(a.seed)
    ids = Ids()
    ts = 0
    for req in KINDS[a.kind](rng, ids, a.requests):
        ts += rng.randint(0, 3000)
        sys.stdout.write(json.dumps({
            "timestamp": ts, "input_length": 512 * len(req),
            "output_length": rng.randint(1, 600), "hash_ids": req}) + "\n")


if __name__ == "__main__":
    main()
