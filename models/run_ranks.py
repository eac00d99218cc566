#!/usr/bin/python3
"""Run every rank of a sharded or pipelined job in one process, each in its
plan's order, the collectives computed for real across the ranks, and compare
the job's result with the unchanged single-process step.

usage: models/run_ranks.py REFERENCE.onnx --roamc ROAMC [--source STEP.onnx]
                           (--shard KIND --world N [--bucket-mb MB] [--prefetch D] [--wrap P]
                            [--no-sync]
                            | --pipeline-stages P [--microbatches M] [--schedule S])
                           [--workdir DIR] [--order plan|file] [--seed N] [--trust-plan]
                           [--break NODE] [--quiet]
       models/run_ranks.py REFERENCE.onnx --steps RANK0.onnx[:PLAN0.json] RANK1.onnx[:PLAN1.json] ...

The ranks' steps are written by roamc from SOURCE (default REFERENCE):
`roamc SOURCE --shard KIND --world N --rank r --emit-train DIR/rank<r>.onnx -o
DIR/rank<r>.json` for each rank r, or `--pipeline-stages P --microbatches M
--stage s` for each stage s (stage s is rank s); or given with --steps.

The executor is models/run_plan.py's: each rank's step runs in its own arena,
in its plan's schedule, with the plan's guards (--order file: in the file's
order, ordinary allocations).  Each rank is a generator that stops at its
communication nodes (ai.roamc, planner/shard/shard.h, pipeline.h); the ranks run
in lock step:

  AllReduce (in place)       the sum over the ranks, in rank order, written into
                             every rank's buffer (the step's div_ by the world
                             before it makes the average, as DDP does); with an
                             INTS attribute group (a pipeline's tied parameter)
                             over those ranks only, in the group's order, once
                             all of them have reached it;
  ReduceScatter, in place    (zero2's bucket) the sum, but a rank keeps it only on
                             the gradients of the parameters it owns (roamc.owned;
                             their places in the bucket from the step's copy-in
                             views "<grad>.bucket"); the rest of its buffer is
                             NaN, so a rank that reads a gradient it does not own
                             shows in the result;
  ReduceScatter (new output) rank r gets the sum of chunk r of the ranks' inputs
                             (input world * S elements, output S);
  AllGather                  the ranks' inputs concatenated in rank order;
  Broadcast (in place)       the root's input written into every rank's buffer;
  Send / Recv                a Send posts a copy of its input for its peer (and
                             goes on: its output is a view of the input); a Recv
                             waits for the value of its output's name from its
                             peer;
  Depend                     views of its inputs (run by the executor itself).

Collectives must come in the same order on every rank (one communicator): a
rank that reaches a different collective (another name, kind, root or size)
than the others, a Recv that nothing will answer, or a Send never received
stops the run (exit 1), as it would hang or mix buffers on a real job.

The reference is REFERENCE run alone in file order (models/run_plan.py's
reference run).  Every rank starts from the reference's inputs: the same data
on every rank, parameters and optimizer state cut to the rank's (zero3/fsdp:
"roamc.param<u>" is rank r's S elements of its unit's parameters flattened in
roamc.parameters order and zero-padded to world * S, the layout read from the
step's "<P>.gathered" views; a narrowed optimizer state is the rank's range of
its parameter, read from the step's "<P>.mine" view); communication buffers
(roamc.bucket<k>) start as NaN.  After the step the ranks' results are mapped
back to the reference's names and compared bit for bit: the loss (every rank
that has one; a pipeline's last stage has microbatch 0's loss, "mb0.NAME",
compared with the reference's NAME), every copy of every parameter (all ranks
for ddp/zero1/zero2 after the Broadcasts, the stages holding it for a
pipeline, the ranks' shards concatenated for zero3/fsdp), every optimizer-state
tensor (whoever holds it; zero3/fsdp ranges put together, each element exactly
once) and module buffer.  With --order file (or a plan run whose buffers keep
them) the accumulated gradients of a pipeline stage are also compared with the
reference's (roamc.gradients, matched by parameter), and a gradient that is an
exact multiple of the reference's is named as such.

A pipeline (--source given): the stages are cut from SOURCE and REFERENCE is
export.py's --grad-accum M step, which traces SOURCE's step M times, naming
each microbatch's nodes anew; a stage's random node "mb<k>.X" is seeded as
the reference's microbatch k's node at the place of X's maker in SOURCE (the
j-th random node of SOURCE is the (k * n + j)-th of REFERENCE), so dropout
draws the same masks.  A tied parameter (the stages' AllReduce
"<P>.grad.all_reduce") is summed as Megatron sums it: each stage's parts over
the microbatches, then the two sums; the reference adds each microbatch's two
parts, then accumulates, so the gradient may differ in its last bits.  When
the job differs from the reference, the reference is run again with each tied
gradient replaced by its own parts (the inputs of the add at the source's
place, per microbatch) summed in the pipeline's order: when everything then
matches bit for bit, the result is MATCH, naming the tied parameters and the
largest differences against the reference as traced.

--break NAME (a test of the test): rank 0's node making NAME (a collective's
output) is dropped, its readers read its input, and rank 0 is planned again:
the job must then fail (tests/test_run_ranks.sh).

Exit status: 0 the job's result equals the reference bit for bit; 1 it does
not (the differences are listed, with the largest absolute and relative
error), or the ranks deadlock, or a guard fired; 2 bad input.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_plan as RP  # noqa: E402
import run_streams as RS  # noqa: E402
from run_plan import BadInput, PlanViolation  # noqa: E402

import torch  # noqa: E402

EXIT_MATCH, EXIT_MISMATCH, EXIT_BAD = 0, 1, 2


class JobFailure(Exception):
    """The ranks cannot complete the step together (deadlock, collectives out of order)."""
    pass


def meta_list(g, key):
    return [x for x in g.meta.get(key, "").split(",") if x]


def poison(dt, shape):
    t = torch.empty(shape, dtype=dt)
    RP.fill_poison(t)
    return t


# --------------------------------------------------------------------------- a rank's step


class Rank:
    """One rank's step, what its names mean in the reference's terms."""

    def __init__(self, index, path, plan_path, ref):
        self.index, self.path = index, path
        self.g = RP.Graph(path)
        self.plan = RP.load_plan(plan_path, self.g) if plan_path else None
        self.ref = ref
        self.shard = self.g.meta.get("roamc.shard", "")
        self.pipeline = self.g.meta.get("roamc.pipeline", "")
        self.kind = self.shard.split()[0] if self.shard else ("pipeline" if self.pipeline else "none")
        self.world = int(re.search(r"world=(\d+)", self.shard).group(1)) if self.shard else None
        self.owned = set(meta_list(self.g, "roamc.owned"))
        calls = self.g.calls
        producer = self.g.producer

        def root(name):
            # follow views and in-place writes back to the value that owns the memory
            while name in producer:
                c = calls[producer[name]]
                k = list(c.node.output).index(name)
                j = c.alias[k] if k < len(c.alias) else -1
                if j < 0:
                    break
                name = c.inputs[j]
            return name
        self.root = root
        # zero3/fsdp: unit -> [(param, offset, numel)], from the "<P>[.mb<k>].gathered" views
        self.units = {}
        self.mine = {}  # param -> (unit, offset in the rank's shard, numel)
        ref_params = set(meta_list(ref, "roamc.parameters"))
        for c in calls:
            if c.op != "as_strided" or not c.inputs:
                continue
            out = c.node.output[0]
            a = {x.name: x for x in c.node.attribute}
            size = list(a["size"].ints)
            off = a["storage_offset"].i if "storage_offset" in a else 0
            numel = 1
            for d in size:
                numel *= d
            src = root(c.inputs[0])
            m = re.match(r"^(.*?)(\.mb\d+)?\.(re)?gathered$", out)
            if m and m.group(1) in ref_params and src in producer and calls[producer[src]].op == "AllGather":
                unit = calls[producer[src]].inputs[0]
                lay = self.units.setdefault(unit, {})
                prev = lay.get(m.group(1))
                if prev is not None and prev != (off, numel):
                    raise BadInput("%s: parameter '%s' is at two places of unit %s" % (path, m.group(1), unit))
                lay[m.group(1)] = (off, numel)
            m = re.match(r"^(.*)\.mine$", out)
            if m and m.group(1) in ref_params and src.startswith("roamc.param"):
                self.mine[m.group(1)] = (src, off, numel)
        # zero2: bucket root -> [(offset, numel)] of the gradients of parameters it owns
        grad_param = dict(zip(meta_list(ref, "roamc.gradients"), meta_list(ref, "roamc.parameters")))
        # gradient accumulation: zero2 buckets each microbatch's own gradient (shard.h), the
        # add_(sum so far, microbatch k's) chain behind the reference's accumulated one
        for g, p in list(grad_param.items()):
            while g in ref.producer and ref.calls[ref.producer[g]].op == "add_" and \
                    len(ref.calls[ref.producer[g]].inputs) >= 2:
                c = ref.calls[ref.producer[g]]
                grad_param.setdefault(c.inputs[1], p)
                g = c.inputs[0]
                grad_param.setdefault(g, p)
        self.owned_ranges = {}
        for c in calls:
            if c.op == "as_strided" and c.node.output[0].endswith(".bucket"):
                grad = c.node.output[0][:-len(".bucket")]
                a = {x.name: x for x in c.node.attribute}
                numel = 1
                for d in a["size"].ints:
                    numel *= d
                ranges = self.owned_ranges.setdefault(root(c.inputs[0]), [])
                if grad_param.get(grad) in self.owned:
                    ranges.append((a["storage_offset"].i, numel))

    def shard_size(self, unit):
        return self.g.info[unit][1][0]


# --------------------------------------------------------------------------- inputs


def unit_flat(lay, values, world, S, dt):
    """The unit's parameters flattened at their offsets, zero-padded to world * S."""
    flat = torch.zeros(world * S, dtype=dt)
    for p, (off, n) in lay.items():
        if off + n > world * S:
            raise BadInput("parameter '%s' at [%d,%d) lies outside the unit's %d x %d elements"
                           % (p, off, off + n, world, S))
        flat[off:off + n] = values[p].reshape(-1)
    return flat


def param_of_state(name, params):
    best = None
    for p in params:
        if name.startswith(p + ".") and (best is None or len(p) > len(best)):
            best = p
    return best


def rank_inputs(rk, ref, init, world):
    """The rank's inputs from the reference's."""
    g = rk.g
    params = meta_list(ref, "roamc.parameters")
    vals = {}
    for name in g.inputs:
        dt, shape = g.info[name]
        if name in rk.units:
            S = shape[0]
            vals[name] = unit_flat(rk.units[name], init, world, S, dt)[rk.index * S:(rk.index + 1) * S].to(dt).clone()
        elif name in init and tuple(init[name].shape) == shape and init[name].dtype == dt:
            vals[name] = init[name].clone()
        elif name in init:
            p = param_of_state(name, params)
            if p is None or p not in rk.mine:
                raise BadInput("%s: input '%s' is %s there, %s in the reference, and is no parameter's "
                               "state with a '.mine' range" % (rk.path, name, shape, tuple(init[name].shape)))
            unit, off, n = rk.mine[p]
            start = rk.index * rk.shard_size(unit) + off - rk.units[unit][p][0]
            if shape != (n,):
                raise BadInput("%s: state '%s' is %s, its range has %d elements" % (rk.path, name, shape, n))
            vals[name] = init[name].reshape(-1)[start:start + n].clone()
        elif name.startswith("roamc."):
            vals[name] = poison(dt, shape)  # communication buffers: nothing may read what is there
        else:
            raise BadInput("%s: input '%s' is not an input of the reference %s" % (rk.path, name, ref.path))
    return vals


def pipeline_seed_keys(g, ref, src):
    """Seed keys of a pipeline stage's random nodes (run_plan.seed_keys): node
    "mb<k>.X" draws as the reference's microbatch k draws at the node that
    matches the source's node making X.  The reference (export.py --grad-accum
    M) traces the source's forward M times, naming each microbatch's nodes
    anew, so the match is by place: the j-th random node of the source is the
    (k * n + j)-th of the reference (n: the source's random nodes)."""
    src_rand = [c for c in src.calls if c.random]
    ref_rand = [i for i, c in enumerate(ref.calls) if c.random]
    n = len(src_rand)
    if not n:
        return RP.seed_keys(g, ref)
    if len(ref_rand) % n:
        raise BadInput("%s has %d random nodes, not a multiple of the %d of %s"
                       % (ref.path, len(ref_rand), n, src.path))
    where = {c.node.output[0]: j for j, c in enumerate(src_rand)}
    keys = []
    for i, c in enumerate(g.calls):
        if not c.random:
            keys.append(None)
            continue
        m = re.match(r"^mb(\d+)\.(.*)$", c.node.output[0])
        if not m or m.group(2) not in where or (int(m.group(1)) + 1) * n > len(ref_rand):
            raise BadInput("%s: random node %s has no counterpart in %s" % (g.path, c.where, ref.path))
        r = ref_rand[int(m.group(1)) * n + where[m.group(2)]]
        if ref.calls[r].op != c.op:
            raise BadInput("%s: random node %s (%s) matched to the reference's %s (%s)"
                           % (g.path, c.where, c.op, ref.calls[r].where, ref.calls[r].op))
        keys.append(r)
    return keys


def place_map(src, ref, i):
    """The reference's nodes matching source node i, one per microbatch (the
    reference traces the source's step M times: by place among the nodes of
    the same operator), or None when the counts do not divide."""
    op = src.calls[i].op
    s = [j for j, c in enumerate(src.calls) if c.op == op]
    r = [j for j, c in enumerate(ref.calls) if c.op == op]
    if not s or len(r) % len(s):
        return None
    j = s.index(i)
    return [r[k * len(s) + j] for k in range(len(r) // len(s))]


def tied_parts(ranks, ref, src):
    """A pipeline's tied parameters (an AllReduce over a group of stages,
    named "<P>.grad.all_reduce"): [(P, [(group member, [the reference's part of
    that stage per microbatch])])].  The source makes P's gradient with one add
    of the stages' two parts; the reference's microbatch k makes it with the
    add at the same place (place_map)."""
    out = []
    sgrad = dict(zip(meta_list(src, "roamc.parameters"), meta_list(src, "roamc.gradients")))
    seen = set()
    for rk in ranks:
        for c in rk.g.calls:
            if c.op != "AllReduce" or not c.node.output[0].endswith(".grad.all_reduce"):
                continue
            p = c.node.output[0][:-len(".grad.all_reduce")]
            if p in seen:
                continue
            seen.add(p)
            group = group_of(c, len(ranks))
            add = src.producer.get(sgrad.get(p, ""))
            places = place_map(src, ref, add) if add is not None else None
            if add is None or len(src.calls[add].inputs) != 2 or places is None:
                raise BadInput("%s: tied parameter '%s': no add of two parts makes its gradient in %s, "
                               "or %s does not repeat it per microbatch" % (rk.path, p, src.path, ref.path))
            parts = []
            for r in group:
                slots = [k for k, x in enumerate(src.calls[add].inputs) if "mb0." + x in ranks[r].g.info]
                if len(slots) != 1:
                    raise BadInput("%s: stage %d makes %d of the parts of '%s''s gradient"
                                   % (ranks[r].path, r, len(slots), p))
                parts.append((r, [ref.calls[q].inputs[slots[0]] for q in places]))
            out.append((p, parts))
    return out


def tied_sums(tied, ref, refenv):
    """Each tied parameter's reference gradient summed as the pipeline sums it:
    each stage accumulates its parts over the microbatches in order (add_),
    then the AllReduce adds the stages' sums in group order.  {the reference's
    gradient name: that sum}."""
    grad = dict(zip(meta_list(ref, "roamc.parameters"), meta_list(ref, "roamc.gradients")))
    out = {}
    for p, parts in tied:
        total = None
        for _, names in parts:
            acc = refenv[names[0]].detach().clone()
            for n in names[1:]:
                acc.add_(refenv[n])
            if total is None:
                total = acc
            else:
                total += acc
        out[grad[p]] = total
    return out


# --------------------------------------------------------------------------- lock step


def describe(r, req):
    if req is None:
        return "rank %d: finished" % r
    c, _ = req
    peer = c.attrs.get("peer")
    return "rank %d: %s -> '%s'%s" % (r, c.op, c.node.output[0], "" if peer is None else " (peer %d)" % peer)


def group_of(c, R):
    """The ranks a collective runs over: its INTS attribute group (a pipeline's
    tied-parameter AllReduce between two stages), else every rank."""
    for a in c.node.attribute:
        if a.name == "group":
            g = list(a.ints)
            if len(set(g)) != len(g) or any(not 0 <= r < R for r in g):
                raise JobFailure("%s: group %s in a job of %d ranks" % (c.where, g, R))
            return g
    return list(range(R))


def collective(ranks, reqs):
    """Computes one collective across the ranks given (a group, in its order):
    the outputs per rank."""
    c0 = reqs[0][0]
    world = len(reqs)
    for r, (c, ins) in enumerate(reqs):
        if c.op != c0.op or c.node.output[0] != c0.node.output[0] or c.attrs.get("root") != c0.attrs.get("root"):
            raise JobFailure("collectives out of order: %s, but %s" % (describe(0, reqs[0]), describe(r, (c, ins))))
        if "world" in c.attrs and c.attrs["world"] != world:
            raise JobFailure("%s: world=%d, but %d ranks run" % (c.where, c.attrs["world"], world))
        if "rank" in c.attrs and c.attrs["rank"] != r:
            raise JobFailure("%s: rank=%d in the step rank %d runs" % (c.where, c.attrs["rank"], r))
        if ins[0].shape != reqs[0][1][0].shape or ins[0].dtype != reqs[0][1][0].dtype:
            raise JobFailure("%s: rank %d gives %s %s, rank 0 %s %s" % (c.where, r, tuple(ins[0].shape), ins[0].dtype,
                                                                        tuple(reqs[0][1][0].shape),
                                                                        reqs[0][1][0].dtype))
    xs = [ins[0] for _, ins in reqs]
    op = c0.op
    if op == "Broadcast":
        root = c0.attrs.get("root", 0)
        v = xs[root].clone()
        for x in xs:
            x.copy_(v)
        return [[x] for x in xs]
    if op == "AllGather":
        v = torch.cat([x.reshape(-1) for x in xs])
        return [[v.clone()] for _ in xs]
    total = xs[0].clone()
    for x in xs[1:]:
        total += x  # rank order: (x0 + x1) + x2 ...
    if op == "AllReduce":
        for x in xs:
            x.copy_(total)
        return [[x] for x in xs]
    if op == "ReduceScatter":
        if c0.alias and c0.alias[0] >= 0:
            # zero2: a rank keeps the sum on what it owns
            outs = []
            for r, (rk, x) in enumerate(zip(ranks, xs)):
                ranges = rk.owned_ranges.get(rk.root(reqs[r][0].inputs[0]))
                if ranges is None:
                    raise BadInput("%s: rank %d's bucket has no '<grad>.bucket' views" % (c0.where, r))
                keep = poison(x.dtype, tuple(x.shape)).to(x.device).reshape(-1)
                flat_total = total.reshape(-1)
                for off, n in ranges:
                    keep[off:off + n] = flat_total[off:off + n]
                x.copy_(keep.view(x.shape))
                outs.append([x])
            return outs
        n = total.numel()
        if n % world:
            raise JobFailure("%s: ReduceScatter of %d elements over %d ranks" % (c0.where, n, world))
        S = n // world
        flat = total.reshape(-1)
        return [[flat[r * S:(r + 1) * S].clone()] for r in range(world)]
    raise BadInput("%s: no collective %s" % (c0.where, op))


def run_job(ranks, gens):
    """Drives the ranks' generators in lock step; returns each rank's env."""
    R = len(gens)
    pend, done, finished = [None] * R, [None] * R, [False] * R
    mailbox, order = {}, []  # messages sent, not yet received; their keys in the order sent

    def advance(r, val=None, first=False):
        try:
            pend[r] = next(gens[r]) if first else gens[r].send(val)
        except StopIteration as e:
            done[r], pend[r], finished[r] = e.value, None, True

    for r in range(R):
        advance(r, first=True)
    while not all(finished):
        progress = True
        while progress:
            progress = False
            for r in range(R):
                while pend[r] is not None and pend[r][0].op in ("Send", "Recv"):
                    c, ins = pend[r]
                    peer = c.attrs.get("peer")
                    if peer is None or not 0 <= peer < R or peer == r:
                        raise JobFailure("%s: peer %s in a job of %d ranks" % (c.where, peer, R))
                    if c.op == "Send":
                        key = (r, peer, c.inputs[0])
                        if key in mailbox:
                            raise JobFailure("%s: '%s' sent twice to rank %d" % (c.where, c.inputs[0], peer))
                        mailbox[key] = ins[0].detach().clone()
                        order.append(key)
                        advance(r, [torch.ops.aten.alias(ins[0])])
                    else:
                        key = (peer, r, c.node.output[0])
                        queue = [k for k in order if k[:2] == key[:2]]
                        if not queue:
                            break
                        if queue[0] != key:
                            # matched in issue order, as NCCL's send/recv are
                            raise JobFailure("%s: rank %d receives '%s' from rank %d, but the first message "
                                             "rank %d sent it is '%s' (out of order)"
                                             % (c.where, r, key[2], peer, peer, queue[0][2]))
                        order.remove(key)
                        advance(r, [mailbox.pop(key)])
                    progress = True
        if all(finished):
            break
        # a collective runs once every rank of its group has reached it
        ran = False
        for r in range(R):
            if pend[r] is None or pend[r][0].op in ("Send", "Recv"):
                continue
            group = group_of(pend[r][0], R)
            if r not in group:
                raise JobFailure("%s: rank %d runs a collective of group %s" % (pend[r][0].where, r, group))
            if not all(pend[q] is not None and pend[q][0].op not in ("Send", "Recv") for q in group):
                continue
            for q in group:
                if group_of(pend[q][0], R) != group:
                    raise JobFailure("collectives out of order: %s (group %s), but %s (group %s)"
                                     % (describe(r, pend[r]), group, describe(q, pend[q]),
                                        group_of(pend[q][0], R)))
            outs = collective([ranks[q] for q in group], [pend[q] for q in group])
            for q, out in zip(group, outs):
                advance(q, out)
            ran = True
            break
        if ran:
            continue
        raise JobFailure("the ranks cannot go on (a real job would hang): "
                         + "; ".join(describe(r, pend[r]) for r in range(R)))
    if mailbox:
        raise JobFailure("sent but never received: %s" % ", ".join("'%s' rank %d -> %d" % (k[2], k[0], k[1])
                                                                   for k in sorted(mailbox)))
    return done


# --------------------------------------------------------------------------- compare


def errors(a, b):
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    d = (a - b).abs()
    ok = ~torch.isnan(d)
    if not ok.any():
        return float("nan"), float("nan")
    rel = d[ok] / b[ok].abs().clamp_min(1e-30)
    return float(d[ok].max()), float(rel.max())


class Verdict:
    def __init__(self):
        self.n, self.diffs, self.max_abs, self.max_rel, self.notes = 0, [], 0.0, 0.0, []

    def same(self, what, want, got):
        self.n += 1
        want, got = want.detach().cpu(), got.detach().cpu()
        if tuple(want.shape) != tuple(got.shape) or want.dtype != got.dtype:
            self.diffs.append("%s: %s %s, the reference has %s %s" % (what, tuple(got.shape), got.dtype,
                                                                      tuple(want.shape), want.dtype))
            return False
        if torch.equal(RP.bits(want), RP.bits(got)):
            return True
        ab, rel = errors(got, want)
        self.max_abs, self.max_rel = max(self.max_abs, ab), max(self.max_rel, rel)
        self.diffs.append("%s differs: %d of %d elements; max abs %.3g, max rel %.3g"
                          % (what, int((got.reshape(-1) != want.reshape(-1)).sum()), want.numel(), ab, rel))
        return False


def compare_job(ref, refenv, ranks, envs, world):
    v = Verdict()
    params = meta_list(ref, "roamc.parameters")
    states = meta_list(ref, "roamc.optimizer_state")
    buffers = meta_list(ref, "roamc.buffers")
    # loss
    for rk, env in zip(ranks, envs):
        loss = rk.g.loss
        if not loss:
            continue
        want = ref.loss if loss == ref.loss else (loss[4:] if loss.startswith("mb0.") else loss)
        if want not in refenv:
            raise BadInput("%s: its loss '%s' has no counterpart in the reference" % (rk.path, loss))
        v.same("rank %d loss '%s' (reference '%s')" % (rk.index, loss, want), refenv[want], env[loss])
    # parameters and module buffers
    for p in params + buffers:
        copies = 0
        for rk, env in zip(ranks, envs):
            if p in rk.g.inputs:
                v.same("rank %d %s" % (rk.index, p), refenv[p], env[p])
                copies += 1
        units = [(u, lay) for u, lay in ranks[0].units.items() if p in lay]
        if units:
            u, lay = units[0]
            flat = torch.cat([env[u].detach().cpu().reshape(-1) for env in envs])
            off, n = lay[p]
            v.same("%s (shards of %s)" % (p, u), refenv[p], flat[off:off + n].view(refenv[p].shape))
            copies += 1
        if not copies:
            v.diffs.append("%s: no rank holds it" % p)
    # optimizer state
    for s in states:
        want = refenv[s]
        holders = [(rk, env) for rk, env in zip(ranks, envs) if s in rk.g.inputs]
        if not holders:
            v.diffs.append("%s: no rank holds it" % s)
            continue
        whole = [(rk, env) for rk, env in holders if tuple(rk.g.info[s][1]) == tuple(want.shape)]
        for rk, env in whole:
            v.same("rank %d %s" % (rk.index, s), want, env[s])
        parts = [(rk, env) for rk, env in holders if tuple(rk.g.info[s][1]) != tuple(want.shape)]
        if parts:
            p = param_of_state(s, params)
            got = torch.full((want.numel(),), float("nan"), dtype=want.dtype)
            seen = torch.zeros(want.numel(), dtype=torch.int32)
            for rk, env in parts:
                unit, off, n = rk.mine[p]
                start = rk.index * rk.shard_size(unit) + off - rk.units[unit][p][0]
                got[start:start + n] = env[s].detach().cpu().reshape(-1)
                seen[start:start + n] += 1
            if not bool((seen == 1).all()):
                v.diffs.append("%s: the ranks' ranges cover %d of %d elements once (%d twice or more)"
                               % (s, int((seen == 1).sum()), want.numel(), int((seen > 1).sum())))
            v.same("%s (ranges of %d ranks)" % (s, len(parts)), want, got.view(want.shape))
    return v


def compare_grads(ref, refenv, ranks, envs, v):
    """Accumulated gradients matched by parameter (where the ranks keep them)."""
    rg = dict(zip(meta_list(ref, "roamc.parameters"), meta_list(ref, "roamc.gradients")))
    for rk, env in zip(ranks, envs):
        if len(meta_list(rk.g, "roamc.parameters")) != len(meta_list(rk.g, "roamc.gradients")):
            continue  # zero2 narrows the gradients to the owned ones; zero3/fsdp name shards
        for p, gname in zip(meta_list(rk.g, "roamc.parameters"), meta_list(rk.g, "roamc.gradients")):
            if p not in rg or rg[p] not in refenv or gname not in env:
                continue
            want, got = refenv[rg[p]].detach().cpu(), env[gname].detach().cpu()
            if want.shape != got.shape:
                continue
            if v.same("rank %d gradient of %s ('%s', reference '%s')" % (rk.index, p, gname, rg[p]), want, got):
                continue
            nz = want != 0
            if nz.any():
                ratio = (got[nz] / want[nz]).reshape(-1)
                k = float(ratio[0])
                if torch.equal(RP.bits(got), RP.bits(want * k)):
                    v.notes.append("rank %d gradient of %s is exactly %g x the reference's" % (rk.index, p, k))


# --------------------------------------------------------------------------- main


def write_ranks(a, workdir):
    src = a.source or a.reference
    os.makedirs(workdir, exist_ok=True)
    out = []
    if a.shard:
        n = a.world
        for r in range(n):
            args = ["--shard", a.shard, "--world", str(n), "--rank", str(r)]
            if a.bucket_mb is not None:
                args += ["--bucket-mb", str(a.bucket_mb)]
            if a.prefetch is not None:
                args += ["--prefetch", str(a.prefetch)]
            if a.wrap:
                args += ["--wrap", a.wrap]
            if a.no_sync:
                args += ["--no-sync"]
            out.append(args)
    else:
        for s in range(a.pipeline_stages):
            args = ["--pipeline-stages", str(a.pipeline_stages), "--stage", str(s)]
            if a.microbatches:
                args += ["--microbatches", str(a.microbatches)]
            if a.schedule:
                args += ["--schedule", a.schedule]
            out.append(args)
    steps = []
    for r, args in enumerate(out):
        step, plan = os.path.join(workdir, "rank%d.onnx" % r), os.path.join(workdir, "rank%d.json" % r)
        cmd = [a.roamc, src] + args + ["-q", "--emit-train", step, "-o", plan]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise BadInput("%s: exit %d: %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout).strip()[:400]))
        steps.append((step, plan))
    return steps


def break_step(path, name):
    """A test of the test: the node making `name` is removed and its readers
    read its first input (as if the collective had been forgotten)."""
    import onnx
    m = onnx.load(path)
    nodes = list(m.graph.node)
    hit = [n for n in nodes if name in n.output]
    if not hit:
        raise BadInput("--break: no node of %s makes '%s'" % (path, name))
    n = hit[0]
    src = n.input[0]
    m.graph.ClearField("node")
    for x in nodes:
        if x is n:
            continue
        for k, i in enumerate(x.input):
            if i == name:
                x.input[k] = src
        m.graph.node.append(x)
    infos = [vi for vi in m.graph.value_info if vi.name != name]
    m.graph.ClearField("value_info")
    m.graph.value_info.extend(infos)
    onnx.save(m, path)


def interleaved_job(a, ref, refenv, ranks, init, world, src, device):
    """The job with version 2 plans: a.interleavings runs, in each every
    rank's streams interleaved its own way (models/run_streams.py; run k of
    rank r is that rank's interleaving k, seeded by the seed and r), the
    collectives computed across the ranks when each has started its own; every
    run compared with the reference.  A pipeline's tied parameters are not
    summed in the pipeline's order here (no run of that kind has streams yet)."""
    if any(rk.plan is None for rk in ranks):
        raise BadInput("--order file runs the ranks without plans: nothing to interleave")
    runs = []
    for rk in ranks:
        vals = rank_inputs(rk, ref, init, world)
        keys = (pipeline_seed_keys(rk.g, ref, src) if rk.kind == "pipeline" and src is not None
                else RP.seed_keys(rk.g, ref))
        arena = RP.Arena(rk.g, rk.plan, device, not a.trust_plan, keys)
        arena.capture = set(meta_list(rk.g, "roamc.gradients") + ([rk.g.loss] if rk.g.loss else []))
        runs.append((RS.Interleaver(RP, arena, rk.plan, not a.trust_plan), vals))
    what = ranks[0].shard.split(" rank=")[0] if ranks[0].shard else ranks[0].pipeline
    broken, n = [], 0
    for k in range(a.interleavings):
        gens = [il.steps(vals, a.seed, device, k, a.seed + 1000 * r) for r, (il, vals) in enumerate(runs)]
        at = "interleaving %d (%s)" % (k, runs[0][0].order(k, a.seed)[0])
        try:
            envs = run_job(ranks, gens)
        except PlanViolation as e:
            broken.append("%s: a plan broke a guard: %s" % (at, e))
            continue
        except (RS.TornRead, JobFailure) as e:
            broken.append("%s: %s" % (at, e))
            continue
        v = compare_job(ref, refenv, ranks, envs, world)
        compare_grads(ref, refenv, ranks, envs, v)
        n = v.n
        if v.diffs:
            broken.append("%s: %d of %d compared tensors differ: %s" % (at, len(v.diffs), v.n, "; ".join(v.diffs[:3])))
    streams = "; ".join("rank %d: %s" % (r, il.sp.describe()) for r, (il, _) in enumerate(runs))
    if broken:
        print("MISMATCH %s; %d ranks: %d of %d interleavings fail (%s)" % (what, world, len(broken),
                                                                         a.interleavings, streams))
        for b in broken[:5]:
            print("  " + b)
        return EXIT_MISMATCH
    if not a.quiet:
        print("MATCH %s; %d ranks: %d interleavings of each rank's streams (%s), each bit for bit equal to %s "
              "(loss, parameters and optimizer state: %d tensors)"
              % (what, world, a.interleavings, streams, a.reference, n))
    return EXIT_MATCH


def main(argv):
    ap = argparse.ArgumentParser(prog="run_ranks.py", description=__doc__.split("\n")[0])
    ap.add_argument("reference")
    ap.add_argument("--roamc")
    ap.add_argument("--source", help="the step roamc shards or cuts (default REFERENCE)")
    ap.add_argument("--shard", choices=("ddp", "zero1", "zero2", "zero3", "fsdp"))
    ap.add_argument("--world", type=int)
    ap.add_argument("--bucket-mb", type=float)
    ap.add_argument("--prefetch", type=int)
    ap.add_argument("--wrap")
    ap.add_argument("--no-sync", action="store_true",
                    help="roamc --no-sync: a --grad-accum step's gradients reduced once")
    ap.add_argument("--pipeline-stages", type=int)
    ap.add_argument("--microbatches", type=int)
    ap.add_argument("--schedule")
    ap.add_argument("--steps", nargs="+", metavar="RANK.onnx[:PLAN.json]")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--order", choices=("plan", "file"), default="plan")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trust-plan", action="store_true")
    ap.add_argument("--break", dest="brk", metavar="NAME",
                    help="test of the test: rank 0's node making NAME is dropped (its readers read its input), "
                         "and the plans are made again")
    ap.add_argument("--interleavings", type=int, default=50, metavar="N",
                    help="version 2 plans (several streams): the job runs under N interleavings of each "
                         "rank's streams (models/run_streams.py)")
    ap.add_argument("--quiet", action="store_true")
    try:
        a = ap.parse_args(argv[1:])
    except SystemExit as e:
        return EXIT_BAD if e.code else 0
    if a.interleavings < 1:
        print("run_ranks.py: --interleavings must be at least 1, not %d" % a.interleavings, file=sys.stderr)
        return EXIT_BAD
    device = torch.device("cpu")
    try:
        ref = RP.Graph(a.reference)
        if a.steps:
            steps = [(s.split(":", 1) + [None])[:2] for s in a.steps]
        else:
            if not a.roamc or not (a.shard or a.pipeline_stages) or (a.shard and not a.world):
                raise BadInput("give --steps, or --roamc with --shard KIND --world N or --pipeline-stages P")
            workdir = a.workdir or os.path.join("/tmp", "run_ranks.%d" % os.getpid())
            steps = write_ranks(a, workdir)
            if a.brk:
                break_step(steps[0][0], a.brk)
                p = subprocess.run([a.roamc, steps[0][0], "-q", "-o", steps[0][1]], capture_output=True, text=True)
                if p.returncode:
                    raise BadInput("replanning the broken step: %s" % p.stderr.strip()[:300])
        if a.order == "file":
            steps = [(s, None) for s, _ in steps]
        ranks = [Rank(r, s, p, ref) for r, (s, p) in enumerate(steps)]
        world = len(ranks)
        init = RP.make_inputs(ref, a.seed)
        # a pipeline's stages are cut from SOURCE: their random nodes are matched through it
        src = RP.Graph(a.source) if a.source and any(rk.kind == "pipeline" for rk in ranks) else None
        tied = tied_parts(ranks, ref, src) if src is not None else []
        keep = [rk.g.loss[4:] for rk in ranks if rk.g.loss and rk.g.loss.startswith("mb0.")]
        keep += meta_list(ref, "roamc.gradients")
        keep += [n for _, parts in tied for _, names in parts for n in names]
        refenv = RP.run_reference(ref, init, a.seed, device, RP.seed_keys(ref, ref), keep_also=keep)
        if any(rk.plan is not None and rk.plan.get("version") == 2 for rk in ranks):
            return interleaved_job(a, ref, refenv, ranks, init, world, src, device)
        gens = []
        for rk in ranks:
            vals = rank_inputs(rk, ref, init, world)
            keys = (pipeline_seed_keys(rk.g, ref, src) if rk.kind == "pipeline" and src is not None
                    else RP.seed_keys(rk.g, ref))
            wanted = meta_list(rk.g, "roamc.gradients") + ([rk.g.loss] if rk.g.loss else [])
            if rk.plan is None:
                gens.append(RP.reference_steps(rk.g, vals, a.seed, device, keys, keep_also=wanted))
            else:
                arena = RP.Arena(rk.g, rk.plan, device, not a.trust_plan, keys)
                arena.capture = set(wanted)
                gens.append(arena.steps(vals, a.seed, device))
        envs = run_job(ranks, gens)
        v = compare_job(ref, refenv, ranks, envs, world)
        compare_grads(ref, refenv, ranks, envs, v)
        what = ranks[0].shard or ranks[0].pipeline
        setup = "%s; %d ranks, %s order" % (what.split(" rank=")[0] if ranks[0].shard else what, world, a.order)
        if v.diffs and tied:
            # Megatron's order: each stage's parts accumulated, then one AllReduce; the
            # reference adds the two parts of each microbatch, then accumulates.  The
            # reference again with the tied gradients summed in the pipeline's order:
            sums = tied_sums(tied, ref, refenv)
            env2 = RP.run_reference(ref, init, a.seed, device, RP.seed_keys(ref, ref), keep_also=keep,
                                    overrides=sums)
            v2 = compare_job(ref, env2, ranks, envs, world)
            compare_grads(ref, env2, ranks, envs, v2)
            if not v2.diffs:
                print("MATCH %s: loss, parameters and optimizer state (%d tensors) bit for bit equal to %s "
                      "with the gradient of the tied %s summed in the pipeline's order (each stage's parts "
                      "accumulated over the microbatches, then the stages' sums all-reduced); against %s as "
                      "traced (each microbatch's two parts added, then accumulated) %d differ by float "
                      "rounding (max abs %.3g, max rel %.3g)"
                      % (setup, v2.n, a.reference, ", ".join(p for p, _ in tied), a.reference, len(v.diffs),
                         v.max_abs, v.max_rel))
                if not a.quiet:
                    for d in v.diffs[:20]:
                        print("  as traced: " + d)
                return EXIT_MATCH
            v.notes += ["with the tied gradients summed in the pipeline's order, still: " + d
                        for d in v2.diffs[:10]]
        if v.diffs:
            print("MISMATCH %s: %d of %d compared tensors differ from %s (max abs %.3g, max rel %.3g)"
                  % (setup, len(v.diffs), v.n, a.reference, v.max_abs, v.max_rel))
            for d in v.diffs[:20]:
                print("  " + d)
            for n in v.notes:
                print("  note: " + n)
            return EXIT_MISMATCH
        if not a.quiet:
            print("MATCH %s: loss, parameters and optimizer state (%d tensors) bit for bit equal to %s"
                  % (setup, v.n, a.reference))
        return EXIT_MATCH
    except BadInput as e:
        print("run_ranks.py: %s" % e, file=sys.stderr)
        return EXIT_BAD
    except PlanViolation as e:
        print("MISMATCH: a plan broke a guard: %s" % e)
        return EXIT_MISMATCH
    except JobFailure as e:
        print("MISMATCH: %s" % e)
        return EXIT_MISMATCH


if __name__ == "__main__":
    sys.exit(main(sys.argv))
