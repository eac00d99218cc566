#!/usr/bin/python3
"""Changed training steps by hand, for tests/test_run_plan_fit.sh, in the
form DESIGN.md ("A step that fits") gives roamc's emitter (issue 27), until
that emitter exists.

usage:
  make_fit_step.py step IN.onnx OUT.onnx [--recompute V[,V...]] [--offload V[,V...]]
                        [--no-attr | --attr-names NAME] [--host-read V]
  make_fit_step.py plan KIND OUT.onnx PLAN.json OUT_PLAN.json [VALUE]

step: IN.onnx is a models/export.py training step.
  --recompute V,...  each V is a forward value the backward reads; its
      producer is cloned (outputs renamed NAME_rc, a STRING attribute
      roamc_recompute = V), the clones placed together in forward order right
      before the first backward reader of any of them, and every backward
      reader of the producers' outputs rewired to the clones.  A clone reads
      the clone of an input that is itself recomputed (a chain).
  --offload V,...    Offload(V) -> V_host (domain ai.roamc) right after V's
      last forward reader, Reload(V_host) -> V_rl right before its first
      backward reader; backward readers rewired to V_rl.
  --no-attr          broken on purpose: the clones carry no roamc_recompute
      (a recomputed dropout then draws a new mask).
  --attr-names NAME  broken on purpose: every roamc_recompute names NAME.
  --host-read V      broken on purpose: the first backward reader of V reads
      V_host (a host value) in place of V_rl.
"Backward" is every node after the one that makes the loss (file order).

plan: breaks a plan of a changed step on purpose (the schedule and the
  buffers are written as they were, except as KIND says):
  reload-before-offload  the Reload of VALUE (default: the first) moved in
      the schedule to just before its Offload;
  reload-after-reader    that Reload moved to just after its first reader;
  free-after-offload     the device buffer of the offloaded value ends at
      its Offload's step, and that reader reads it later.
  (free-after-offload wants a reader of the offloaded value after its
  Offload: make the step with `--keep-reader V`, which leaves V's last
  backward reader reading V itself);
  fix-host               the plan as DESIGN.md wants it where roamc does not
      yet write it: every value an Offload makes moved from `buffers` to
      `host_buffers` (offset dropped), the device peaks (theoretical,
      actual) recomputed from the buffers left; a plan that already has
      them there is written unchanged.
Exit 0 done, 2 bad usage or input.
"""
import copy
import json
import sys

import onnx
from onnx import helper

ROAMC = "ai.roamc"


def die(msg):
    sys.stderr.write("make_fit_step.py: %s\n" % msg)
    sys.exit(2)


def value_infos(g):
    return {vi.name: vi for vi in list(g.input) + list(g.output) + list(g.value_info)}


def add_info(g, infos, old, new):
    vi = copy.deepcopy(infos[old])
    vi.name = new
    g.value_info.append(vi)
    infos[new] = vi


def make_step(args):
    if len(args) < 2:
        die("step wants IN.onnx OUT.onnx")
    src, dst = args[0], args[1]
    opts = {"--recompute": "", "--offload": "", "--attr-names": None, "--host-read": None,
            "--keep-reader": None}
    flags = set()
    i = 2
    while i < len(args):
        a = args[i]
        if a == "--no-attr":
            flags.add(a)
            i += 1
        elif a in opts and i + 1 < len(args):
            opts[a] = args[i + 1]
            i += 2
        else:
            die("unknown argument %r" % a)
    m = onnx.load(src)
    g = m.graph
    nodes = list(g.node)
    meta = {p.key: p.value for p in m.metadata_props}
    infos = value_infos(g)
    producer = {}
    for k, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer[o] = k
    loss = meta.get("roamc.loss")
    if loss not in producer:
        die("%s: no roamc.loss, or nothing makes it" % src)
    last_fwd = producer[loss]
    readers = {}
    for k, n in enumerate(nodes):
        for t in n.input:
            if t:
                readers.setdefault(t, []).append(k)

    def backward_readers(v):
        return [k for k in readers.get(v, []) if k > last_fwd]

    before, after = {}, {}  # node index -> nodes inserted before / after it
    rewire = {}  # (reader index, old name) -> new name

    rc_values = [v for v in opts["--recompute"].split(",") if v]
    if rc_values:
        prods = sorted({producer.get(v, -1) for v in rc_values})
        for v in rc_values:
            if v not in producer or producer[v] > last_fwd:
                die("--recompute %s: not a forward value of %s" % (v, src))
        renamed = {}
        clones = []
        first = None
        for p in prods:
            n = nodes[p]
            attrs = {a.name: a for a in n.attribute}
            if "alias" in attrs and any(j >= 0 for j in attrs["alias"].ints):
                die("--recompute: node %d (%s) is a view or an in-place write; clone its source" % (p, n.op_type))
            c = copy.deepcopy(n)
            named = next(v for v in rc_values if producer[v] == p)
            del c.output[:]
            for o in n.output:
                c.output.append(o + "_rc" if o else "")
                if o:
                    renamed[o] = o + "_rc"
                    add_info(g, infos, o, o + "_rc")
            for k, t in enumerate(c.input):
                if t in renamed:
                    c.input[k] = renamed[t]
            c.name = (n.name or n.op_type) + "_rc"
            if "--no-attr" not in flags:
                c.attribute.append(helper.make_attribute("roamc_recompute",
                                                         opts["--attr-names"] or named))
            clones.append(c)
            for o in n.output:
                for k in backward_readers(o):
                    rewire[(k, o)] = o + "_rc"
                    first = k if first is None else min(first, k)
        if first is None:
            die("--recompute %s: the backward reads none of these values" % opts["--recompute"])
        before.setdefault(first, []).extend(clones)

    for v in [v for v in opts["--offload"].split(",") if v]:
        if v not in infos:
            die("--offload %s: no such value in %s" % (v, src))
        bw = backward_readers(v)
        if not bw:
            die("--offload %s: the backward does not read it" % v)
        fw = [k for k in readers.get(v, []) if k <= last_fwd]
        at = max(fw) if fw else producer.get(v, -1)
        host, back = v + "_host", v + "_rl"
        add_info(g, infos, v, host)
        add_info(g, infos, v, back)
        off = helper.make_node("Offload", [v], [host], name="Offload_" + v, domain=ROAMC)
        rel = helper.make_node("Reload", [host], [back], name="Reload_" + v, domain=ROAMC)
        if at < 0:
            before.setdefault(0, []).append(off)  # a graph input: offloaded first thing
        else:
            after.setdefault(at, []).append(off)
        before.setdefault(min(bw), []).append(rel)
        for k in bw:
            rewire[(k, v)] = back
        if opts["--host-read"] == v:
            rewire[(min(bw), v)] = host
        if opts["--keep-reader"] == v:
            del rewire[(max(bw), v)]
        if opts["--host-read"] == v and min(bw) == max(bw) and opts["--keep-reader"] == v:
            die("--host-read and --keep-reader on one reader")

    out = []
    for k, n in enumerate(nodes):
        out.extend(before.get(k, []))
        n2 = copy.deepcopy(n)
        for j, t in enumerate(n2.input):
            if (k, t) in rewire:
                n2.input[j] = rewire[(k, t)]
        out.append(n2)
        out.extend(after.get(k, []))
    del g.node[:]
    g.node.extend(out)
    if opts["--offload"] and not any(o.domain == ROAMC for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid(ROAMC, 1))
    onnx.save(m, dst)
    print("%s: %d nodes (%d added: %d recompute, %d offload/reload)"
          % (dst, len(out), len(out) - len(nodes), sum(len(v) for v in before.values())
             - sum(1 for v in before.values() for n in v if n.domain == ROAMC),
             sum(1 for n in out if n.domain == ROAMC)))


def set_peaks(plan):
    """peak.theoretical and peak.actual as the plan's device buffers give them."""
    delta = [0] * (len(plan["schedule"]) + 1)
    for b in plan["buffers"]:
        delta[b["start"]] += b["size"]
        delta[b["end"] + 1] -= b["size"]
    live = peak = 0
    for s in range(len(plan["schedule"])):
        live += delta[s]
        peak = max(peak, live)
    plan["peak"]["theoretical"] = peak
    plan["peak"]["actual"] = max((b["offset"] + b["size"] for b in plan["buffers"]), default=0)


def fix_host(nodes, plan):
    host = {o for n in nodes if n.domain == ROAMC and n.op_type == "Offload" for o in n.output}
    moved = [b for b in plan["buffers"] if any(t in host for t in b["tensors"])]
    if not moved:
        return
    for b in moved:
        if not all(t in host for t in b["tensors"]):
            die("a device buffer holds a host value and a device value: %s" % b["tensors"])
    plan["buffers"] = [b for b in plan["buffers"] if b not in moved]
    plan.setdefault("host_buffers", []).extend(
        {k: v for k, v in b.items() if k != "offset"} for b in moved)
    set_peaks(plan)
    print("fix-host: %d host values moved from buffers to host_buffers (%d B); device peak now %d B"
          % (len(moved), sum(b["size"] for b in moved), plan["peak"]["actual"]))


def break_plan(args):
    if len(args) < 4:
        die("plan wants KIND MODEL.onnx PLAN.json OUT_PLAN.json [VALUE]")
    kind, model, src, dst = args[:4]
    value = args[4] if len(args) > 4 else None
    nodes = list(onnx.load(model).graph.node)
    with open(src) as f:
        plan = json.load(f)
    sched = plan["schedule"]
    if kind == "fix-host":
        fix_host(nodes, plan)
        with open(dst, "w") as f:
            json.dump(plan, f)
        return
    reloads = [k for k, n in enumerate(nodes) if n.domain == ROAMC and n.op_type == "Reload"
               and (value is None or n.input[0] == value + "_host")]
    if not reloads:
        die("%s: no Reload%s" % (model, "" if value is None else " of " + value))
    r = reloads[0]
    host = nodes[r].input[0]
    off = next(k for k, n in enumerate(nodes) if host in n.output)
    back = nodes[r].output[0]
    step_of = {n: s for s, n in enumerate(sched)}
    old_sched = list(sched)
    if kind == "reload-before-offload":
        sched.remove(r)
        sched.insert(step_of[off], r)
    elif kind == "reload-after-reader":
        first = min((step_of[k] for k, n in enumerate(nodes) if back in n.input), default=None)
        if first is None:
            die("nothing reads %s" % back)
        sched.remove(r)
        sched.insert(first, r)  # after the removal the reader is at first - 1
    if kind in ("reload-before-offload", "reload-after-reader"):
        # the buffers follow their nodes to their new steps, so that only the order is wrong
        new = {n: s for s, n in enumerate(sched)}
        for b in plan["buffers"] + plan.get("host_buffers", []):
            b["start"], b["end"] = new[old_sched[b["start"]]], new[old_sched[b["end"]]]
    elif kind == "free-after-offload":
        x = nodes[off].input[0]
        buf = next(b for b in plan["buffers"] if x in b["tensors"])
        later = [step_of[k] for k, n in enumerate(nodes) if x in n.input and step_of[k] > step_of[off]]
        if not later:
            die("%s: nothing reads %s after its Offload" % (model, x))
        buf["end"] = step_of[off]
        set_peaks(plan)  # the peaks as the buffers give them: only the lifetime is wrong
    else:
        die("unknown kind %r" % kind)
    with open(dst, "w") as f:
        json.dump(plan, f)


def main(argv):
    if len(argv) < 2 or argv[1] not in ("step", "plan"):
        print(__doc__)
        return 2
    if argv[1] == "step":
        make_step(argv[2:])
    else:
        break_plan(argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
