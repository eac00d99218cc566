#!/usr/bin/python3
"""Version 2 plans (DESIGN.md, "Several streams") made from valid version 1
plans, for tests/test_run_plan_streams.sh, until roamc --streams writes them.

usage:
  make_streams_plan.py convert MODEL.onnx PLAN_V1.json OUT.json [--update-stream]
  make_streams_plan.py drop-wait MODEL.onnx PLAN_V2.json OUT.json [memory|data]

convert: the same schedule, buffers and offsets; each node on a stream by
  what it is: ai.roamc Offload on a device-to-host stream (2), Reload on a
  host-to-device stream (1), collectives and Send/Recv on a communication
  stream (3), everything else on the compute stream (0); with
  --update-stream the optimizer's nodes (writing a parameter or optimizer
  state in place, or reading an optimizer state) on a second compute stream
  (4), so that updates overlap the backward pass.  Then the least
  waits (found in schedule order with vector clocks, as check_plan.py
  orders nodes) for what the streams need to be correct:
    data     a node after the maker of every value it reads;
    order    DESIGN.md's mutation order: a node touching a storage after the
             in-place write before it (file order) and before the next one;
    memory   two buffers sharing an address: every node touching the
             earlier one before the first node touching the later one (the
             layout is kept, so its reuse of addresses is what the waits
             must make safe).
  A wait is added only where the order is not already implied (same stream,
  or a chain of waits), so removing any one breaks a rule.  The plan records
  why each wait is there in "waits_why" (a free field).

drop-wait: the plan with one wait removed, the first whose reasons are only
  the kind given (default memory), else the first with that reason among
  others: a plan that check_plan.py must reject and that models/run_plan.py
  must catch in some interleaving.
Exit 0 done, 2 bad usage or input.
"""
import json
import sys

import onnx

ROAMC = "ai.roamc"
STREAMS = [{"id": 0, "kind": "compute"}, {"id": 1, "kind": "h2d"},
           {"id": 2, "kind": "d2h"}, {"id": 3, "kind": "comm"}, {"id": 4, "kind": "compute"}]
COMM = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Send", "Recv"}


def die(msg):
    sys.stderr.write("make_streams_plan.py: %s\n" % msg)
    sys.exit(2)


def load(model_path, plan_path):
    try:
        model = onnx.load(model_path, load_external_data=False)
        with open(plan_path) as f:
            plan = json.load(f)
    except Exception as e:  # onnx raises protobuf's DecodeError, json ValueError, open OSError
        die("cannot read %s / %s: %s" % (model_path, plan_path, e))
    if plan.get("format") != "roam-plan" or not isinstance(plan.get("schedule"), list):
        die("%s is not a roam-plan" % plan_path)
    nodes = list(model.graph.node)
    if sorted(plan["schedule"]) != list(range(len(nodes))):
        die("%s: the schedule does not list the %d nodes of %s" % (plan_path, len(nodes), model_path))
    return nodes, plan


def stream_of_node(nd):
    if nd.domain == ROAMC and nd.op_type == "Offload":
        return 2
    if nd.domain == ROAMC and nd.op_type == "Reload":
        return 1
    if nd.domain == ROAMC and nd.op_type in COMM:
        return 3
    return 0


def aliases(nd):
    """{output index: (input index, writes in place)} from the alias/inplace
    attributes every exporter and roamc node that shares storage carries."""
    attrs = {a.name: a for a in nd.attribute}
    if "alias" not in attrs:
        return {}
    inplace = bool(attrs["inplace"].i) if "inplace" in attrs else False
    return {k: (j, inplace) for k, j in enumerate(attrs["alias"].ints) if j >= 0}


def requirements(nodes, step_of):
    """{b: {a: set of reasons}}: a must happen before b (a before b in the schedule)."""
    need = {}

    def add(a, b, why):
        if a == b:
            return
        if step_of[a] > step_of[b]:
            die("node %d must run before node %d (%s), but the schedule has it after: not a valid plan"
                % (a, b, why))
        need.setdefault(b, {}).setdefault(a, set()).add(why)

    producer = {o: i for i, nd in enumerate(nodes) for o in nd.output if o}
    for i, nd in enumerate(nodes):
        for t in nd.input:
            if t in producer:
                add(producer[t], i, "data")
    # mutation order, as check_plan.py and DESIGN.md's "Ordering edges" say (file order)
    parent = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x
    for nd in nodes:
        for k, (j, _) in aliases(nd).items():
            if k < len(nd.output) and j < len(nd.input) and nd.output[k] and nd.input[j]:
                parent[find(nd.output[k])] = find(nd.input[j])
    last_write, readers = {}, {}
    for i, nd in enumerate(nodes):
        writes = {find(nd.input[j]) for k, (j, w) in aliases(nd).items() if w and j < len(nd.input) and nd.input[j]}
        touched = {find(t) for t in nd.input if t}
        for r in touched | writes:
            if r in last_write:
                add(last_write[r], i, "order")
        for r in writes:
            for q in readers.get(r, ()):
                add(q, i, "order")
            last_write[r] = i
            readers[r] = []
        for r in touched - writes:
            readers.setdefault(r, []).append(i)
    return need


def memory_requirements(nodes, plan, step_of, need):
    """Buffers sharing an address: every node touching the earlier one before
    the first node touching the later one."""
    buf_of = {t: bi for bi, b in enumerate(plan["buffers"]) for t in b["tensors"]}
    touches = {}
    for i, nd in enumerate(nodes):
        for t in list(nd.input) + list(nd.output):
            if t in buf_of:
                touches.setdefault(buf_of[t], set()).add(i)
    bufs = [(b["offset"], b["offset"] + b["size"], bi) for bi, b in enumerate(plan["buffers"])
            if b["size"] > 0 and bi in touches]
    bufs.sort()
    for x in range(len(bufs)):
        lo, hi, a = bufs[x]
        for y in range(x + 1, len(bufs)):
            lo2, hi2, b = bufs[y]
            if lo2 >= hi:
                break
            first, second = (a, b) if plan["buffers"][a]["start"] < plan["buffers"][b]["start"] else (b, a)
            f = min(touches[second], key=lambda n: step_of[n])
            for n in touches[first]:
                if n != f:
                    if step_of[n] > step_of[f]:
                        die("buffers %d and %d share addresses and their uses interleave: not a valid plan"
                            % (first, second))
                    need.setdefault(f, {}).setdefault(n, set()).add("memory")


def update_nodes(model, nodes):
    """The optimizer's nodes: those that write a parameter or an optimizer
    state in place, or read an optimizer state (through any alias)."""
    meta = {p.key: p.value for p in model.metadata_props}
    params = {x for x in meta.get("roamc.parameters", "").split(",") if x}
    states = {x for x in meta.get("roamc.optimizer_state", "").split(",") if x}
    root = {}

    def find(x):
        while root.get(x, x) != x:
            x = root[x]
        return x
    for nd in nodes:
        for k, (j, _) in aliases(nd).items():
            if k < len(nd.output) and j < len(nd.input) and nd.output[k] and nd.input[j]:
                root[find(nd.output[k])] = find(nd.input[j])
    p_roots, s_roots = {find(x) for x in params}, {find(x) for x in states}
    out = set()
    for i, nd in enumerate(nodes):
        writes = {find(nd.input[j]) for k, (j, w) in aliases(nd).items() if w and j < len(nd.input)}
        if writes & (p_roots | s_roots) or any(find(t) in s_roots for t in nd.input if t):
            out.add(i)
    return out


def convert(model_path, plan_path, out_path, update_stream=False):
    nodes, plan = load(model_path, plan_path)
    sched = plan["schedule"]
    step_of = {n: s for s, n in enumerate(sched)}
    need = requirements(nodes, step_of)
    memory_requirements(nodes, plan, step_of, need)
    stream = {n: stream_of_node(nodes[n]) for n in sched}
    if update_stream:
        for n in update_nodes(onnx.load(model_path, load_external_data=False), nodes):
            if stream[n] == 0:
                stream[n] = 4
    used = sorted(set(stream.values()))
    # vector clocks (check_plan.py's): clock[b][s] = nodes of stream s that happen before b, or b
    S = len(STREAMS)
    clock, pos, last_on, count = {}, {}, [None] * S, [0] * S
    waits, why = [], []
    for b in sched:
        st = stream[b]
        c = list(clock[last_on[st]]) if last_on[st] is not None else [0] * S
        cands = {}
        for a, reasons in need.get(b, {}).items():
            sa = stream[a]
            if sa != st and c[sa] < pos[a] and (sa not in cands or pos[a] > pos[cands[sa][0]]):
                cands[sa] = (a, reasons)
        # a wait another wait of b implies is left out
        keep = [(a, r) for sa, (a, r) in cands.items()
                if not any(o != a and clock[o][sa] >= pos[a] for o, _ in cands.values())]
        for a, reasons in sorted(keep, key=lambda x: step_of[x[0]]):
            waits.append([a, b])
            why.append(sorted(reasons))
            for k in range(S):
                c[k] = max(c[k], clock[a][k])
        count[st] += 1
        pos[b] = c[st] = count[st]
        clock[b] = c
        last_on[st] = b
    out = dict(plan)
    out["version"] = 2
    out["streams"] = [s for s in STREAMS if s["id"] in used]
    out["stream"] = [stream[n] for n in sched]
    out["waits"] = waits
    out["waits_why"] = why
    write(out, out_path)
    kinds = {}
    for r in why:
        for x in r:
            kinds[x] = kinds.get(x, 0) + 1
    per = ", ".join("%d %s (%d)" % (s["id"], s["kind"], sum(1 for n in sched if stream[n] == s["id"]))
                    for s in out["streams"])
    print("%s: %d nodes on streams %s, %d waits (%s)"
          % (out_path, len(sched), per, len(waits), ", ".join("%s %d" % kv for kv in sorted(kinds.items()))))


def drop_wait(model_path, plan_path, out_path, kind):
    nodes, plan = load(model_path, plan_path)
    why = plan.get("waits_why")
    if plan.get("version") != 2 or not isinstance(why, list) or len(why) != len(plan.get("waits", [])):
        die("%s: not a plan this script converted (no waits_why)" % plan_path)
    # a wait there for that reason alone first, else one that it is among the reasons of
    for w, r in sorted(enumerate(why), key=lambda x: (x[1] != [kind], x[0])):
        if kind in r:
            out = dict(plan)
            a, b = plan["waits"][w]
            out["waits"] = plan["waits"][:w] + plan["waits"][w + 1:]
            out["waits_why"] = why[:w] + why[w + 1:]
            write(out, out_path)
            sched = plan["schedule"]
            st = dict(zip(sched, plan["stream"]))
            print("%s: wait [%d, %d] removed (%s: node %d %s on stream %d before node %d %s on stream %d)"
                  % (out_path, a, b, "+".join(r), a, nodes[a].op_type, st[a], b, nodes[b].op_type, st[b]))
            return
    die("%s: no wait is there for %s" % (plan_path, kind))


def write(plan, path):
    with open(path, "w") as f:
        json.dump(plan, f, indent=1)
        f.write("\n")


def main(argv):
    if len(argv) in (5, 6) and argv[1] == "convert" and argv[5:] in ([], ["--update-stream"]):
        convert(argv[2], argv[3], argv[4], argv[5:] == ["--update-stream"])
    elif len(argv) in (5, 6) and argv[1] == "drop-wait":
        kind = argv[5] if len(argv) == 6 else "memory"
        if kind not in ("memory", "data", "order"):
            die("drop-wait: kind is memory, data or order, not %r" % kind)
        drop_wait(argv[2], argv[3], argv[4], kind)
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
