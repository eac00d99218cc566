#!/usr/bin/python3
"""Breaks a valid roam-plan in one way, for the tests of roamc check,
check_plan.py and models/run_plan.py (issue 16).

usage: break_plan.py reorder MODEL PLAN OUT [WRITER READER]
       break_plan.py overlap MODEL PLAN OUT

reorder: a schedule that respects every data edge but runs the in-place
  write WRITER (an optimizer's addcdiv_ on a weight) before READER (the
  backward mm that reads the weight through the view t(weight) made in the
  forward): WRITER's data ancestors in the plan's order, WRITER, then the
  rest.  Without WRITER/READER, the first such pair of the model.  The
  buffers are then made consistent with the new schedule (lifetimes
  recomputed, every buffer at its own offset, peaks recomputed), so the only
  thing wrong with the plan is the mutation order: a runner has to find it
  by the values it computes.
overlap: two buffers that are live together put at the same offset: B
  starts while A is live and A is read after B is written; B's offset
  becomes A's (B no larger than A, so the arena size stays).

Prints what it did on stdout.
"""
import json
import sys

import onnx


def aliases(nodes):
    alias_of = {}
    for n in nodes:
        a = {x.name: x for x in n.attribute}
        if "alias" in a:
            for k, j in enumerate(a["alias"].ints):
                if j >= 0 and k < len(n.output) and n.output[k]:
                    alias_of[n.output[k]] = n.input[j]
    return alias_of


def root(alias_of, t):
    while t in alias_of:
        t = alias_of[t]
    return t


def ancestors(nodes, prod, w):
    seen, todo = set(), [w]
    while todo:
        v = todo.pop()
        for t in nodes[v].input:
            p = prod.get(t)
            if p is not None and p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def relayout(model, plan):
    """Lifetimes from the schedule (DESIGN.md), each buffer at its own offset."""
    g = model.graph
    sched = plan["schedule"]
    steps = len(sched)
    buf_of = {t: bi for bi, b in enumerate(plan["buffers"]) for t in b["tensors"]}
    start = [None] * len(plan["buffers"])
    end = [0] * len(plan["buffers"])
    for x in g.input:
        start[buf_of[x.name]] = 0
    for s, i in enumerate(sched):
        n = g.node[i]
        for t in n.output:
            if t and start[buf_of[t]] is None:
                start[buf_of[t]] = s
        for t in list(n.input) + list(n.output):
            if t:
                end[buf_of[t]] = max(end[buf_of[t]], s)
    for x in g.output:
        end[buf_of[x.name]] = steps - 1
    for bi, b in enumerate(plan["buffers"]):
        if b.get("persistent"):
            end[bi] = steps - 1
    off = 0
    live = [0] * (steps + 1)
    for bi, b in enumerate(plan["buffers"]):
        b["start"], b["end"], b["offset"] = start[bi], max(end[bi], start[bi]), off
        off += b["size"]
        live[b["start"]] += b["size"]
        live[b["end"] + 1] -= b["size"]
    acc = peak = 0
    for s in range(steps):
        acc += live[s]
        peak = max(peak, acc)
    plan["peak"]["theoretical"], plan["peak"]["actual"] = peak, off


def reorder(model, plan, pair):
    nodes = list(model.graph.node)
    prod = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    alias_of = aliases(nodes)
    if pair:
        w, r = pair
    else:
        w = r = None
        for i, n in enumerate(nodes):
            if n.op_type != "addcdiv_":
                continue
            anc = ancestors(nodes, prod, i)
            weight = n.input[0]
            for j in range(i):
                if j not in anc and nodes[j].op_type in ("mm", "addmm", "bmm") and \
                        any(t != weight and root(alias_of, t) == weight for t in nodes[j].input):
                    w, r = i, j
                    break
            if w is not None:
                break
        if w is None:
            sys.exit("break_plan.py: no in-place write of a weight that a view reader could follow")
    anc = ancestors(nodes, prod, w)
    if r in anc:
        sys.exit("break_plan.py: node %d is a data ancestor of node %d" % (r, w))
    sched = plan["schedule"]
    plan["schedule"] = [v for v in sched if v in anc] + [w] + [v for v in sched if v not in anc and v != w]
    relayout(model, plan)
    view = [t for t in nodes[r].input if root(alias_of, t) == nodes[w].input[0]]
    print("reorder: node %d (%s) now runs before node %d (%s), which reads '%s' through '%s'"
          % (w, nodes[w].op_type, r, nodes[r].op_type, nodes[w].input[0], view[0] if view else "?"))


def overlap(model, plan):
    sched = plan["schedule"]
    step_of = {n: s for s, n in enumerate(sched)}
    g = model.graph
    readers = {}
    for i, n in enumerate(g.node):
        for t in n.input:
            if t:
                readers.setdefault(t, []).append(step_of[i])
    bufs = plan["buffers"]
    last_read = [max([s for t in b["tensors"] for s in readers.get(t, [])] + [-1]) for b in bufs]
    cands = []
    for a, A in enumerate(bufs):
        if A.get("persistent") or A["size"] == 0:
            continue
        for b, B in enumerate(bufs):
            if b == a or B.get("persistent") or not (0 < B["size"] <= A["size"]):
                continue
            if A["start"] < B["start"] <= A["end"] and last_read[a] > B["start"]:
                cands.append((-A["size"], a, b))
    if not cands:
        sys.exit("break_plan.py: no pair of buffers to overlap")
    _, a, b = min(cands)
    bufs[b]["offset"] = bufs[a]["offset"]
    print("overlap: buffer %d ('%s', steps %d-%d) moved onto buffer %d ('%s', steps %d-%d, last read at %d)"
          % (b, bufs[b]["tensors"][0], bufs[b]["start"], bufs[b]["end"], a, bufs[a]["tensors"][0],
             bufs[a]["start"], bufs[a]["end"], last_read[a]))


def main(argv):
    if len(argv) < 5 or argv[1] not in ("reorder", "overlap"):
        sys.exit(__doc__)
    model = onnx.load(argv[2], load_external_data=False)
    with open(argv[3]) as f:
        plan = json.load(f)
    if argv[1] == "reorder":
        reorder(model, plan, (int(argv[5]), int(argv[6])) if len(argv) > 6 else None)
    else:
        overlap(model, plan)
    with open(argv[4], "w") as f:
        json.dump(plan, f)


if __name__ == "__main__":
    main(sys.argv)
