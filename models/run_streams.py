"""Version 2 plans (DESIGN.md, "Several streams"): the executor that runs a
plan's streams under many interleavings, for models/run_plan.py (one step)
and models/run_ranks.py (every rank of a job).

A plan's `stream` puts each step on a stream, `waits` [a, b] makes node b
start after node a has finished; each stream runs its own nodes in the
schedule's order, one at a time.  Any interleaving of the streams that
respects this is one a device may run, so memory must be right in all of
them.  One interleaving is a sequence of events, two per node:

  start   the node reads its inputs and is computed from what they hold
          now (a buffer it writes in place from a copy of it, so that the
          result lands only at its finish); its outputs' slots are filled
          with garbage (0xFF bytes: NaN), and so are the elements it writes
          in place, as a kernel half way through would leave them;
  finish  nothing else may have written the bytes of a buffer it reads (or
          writes) since its start: a kernel reads all along, so such a write
          is a torn read, always a failure (the runner logs every write to
          the arena); then its outputs land in their slots (new values
          copied in, in-place results copied back, views made on the arena).

Between a node's start and its finish other streams' events run.  A buffer is
in use from the first start of a node touching it to the last finish of one
(the plan's buffers that end at the last step stay in use); then its slot is
filled with garbage (poisoned), so a later read of the old value, or a
writer that reused the address too early, changes the result.  With the
guards on (not --trust-plan) a buffer whose use begins while a buffer sharing
an address is still in use stops the run at once (the plan broke DESIGN.md's
memory rule in this interleaving); a node that starts before the maker of a
value it reads has finished always does.

Interleaving 0 is the schedule's own order; the others choose, at every
point, among the streams that can move (start their next node once its
waits are met and the stream's last node finished, or finish the node in
flight), seeded, by one of three rules taken in turn:
  random    any stream that can move, uniformly;
  priority  the streams ranked at random once; the first that can move
            (a favoured stream runs as far ahead as the waits allow);
  eager     a start whenever one can start, chosen at random (writers run
            as early as the waits allow), else the finish of the node started
            last (one started early stays in flight as long as possible).
"""
import random

import torch

MODES = ("random", "priority", "eager")


class TornRead(Exception):
    """A node's input bytes changed between its start and its finish: another
    stream wrote there while it ran (a value difference, not a guard)."""


class StreamPlan:
    """The streams of a plan: per stream its nodes in schedule order, per
    node the nodes it waits for.  rp: the run_plan module (its BadInput)."""

    def __init__(self, rp, plan, sched):
        n = len(sched)
        per_step = plan.get("stream", [0] * n)
        if not isinstance(per_step, list) or len(per_step) != n or \
                not all(isinstance(x, int) and x >= 0 for x in per_step):
            raise rp.BadInput("'stream' must give a stream id (an integer >= 0) for each step of the schedule")
        declared = plan.get("streams", [])
        if not isinstance(declared, list):
            raise rp.BadInput("'streams' must be a list")
        self.kind = {}
        for st in declared:
            if not isinstance(st, dict) or not isinstance(st.get("id"), int):
                raise rp.BadInput("each entry of 'streams' needs an integer id")
            self.kind[st["id"]] = st.get("kind", "?")
        if declared and not set(per_step) <= set(self.kind):
            raise rp.BadInput("'stream' uses stream ids that 'streams' does not declare: %s"
                              % sorted(set(per_step) - set(self.kind))[:5])
        self.ids = sorted(set(per_step))
        self.stream_of = {node: per_step[s] for s, node in enumerate(sched)}
        self.queue = {sid: [node for s, node in enumerate(sched) if per_step[s] == sid] for sid in self.ids}
        step_of = {node: s for s, node in enumerate(sched)}
        self.waits_into = {}
        for w in plan.get("waits", []):
            if not (isinstance(w, list) and len(w) == 2 and all(isinstance(x, int) and 0 <= x < n for x in w)):
                raise rp.BadInput("each wait must be [a, b], two node indices: %r" % (w,))
            if step_of[w[0]] >= step_of[w[1]]:
                # a wait against the schedule could deadlock the streams
                raise rp.BadInput("wait [%d, %d]: node %d does not come before node %d in the schedule"
                                  % (w[0], w[1], w[0], w[1]))
            self.waits_into.setdefault(w[1], []).append(w[0])

    def describe(self):
        return ", ".join("%d %s (%d nodes)" % (sid, self.kind.get(sid, "?"), len(self.queue[sid]))
                         for sid in self.ids)


def _span(t):
    """Elements from t's first to its last addressable element."""
    return 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) if t.numel() else 0


def _typed(raw, byte_off, like):
    """A tensor with like's dtype, shape and strides at byte byte_off of the
    byte tensor raw."""
    if like.numel() == 0:
        return torch.empty(like.shape, dtype=like.dtype, device=raw.device)
    piece = raw[byte_off:byte_off + _span(like) * like.element_size()].view(like.dtype)
    return piece.as_strided(like.shape, like.stride(), piece.storage_offset())


def _aside(src):
    """A copy of the byte tensor src, at an address of the same alignment
    modulo 64 (so that vectorised kernels take the same path)."""
    n = src.numel()
    room = torch.empty(n + 64, dtype=torch.uint8, device=src.device)
    d = (src.data_ptr() - room.data_ptr()) % 64
    copy = room[d:d + n]
    copy.copy_(src)
    return copy


class Interleaver:
    """One plan's streams run on an Arena (models/run_plan.py) of its memory:
    steps() is one interleaving, a generator as Arena.steps (it yields each
    collective and takes its outputs back)."""

    def __init__(self, rp, arena, plan, guards):
        self.rp, self.a, self.guards = rp, arena, guards
        self.sp = StreamPlan(rp, plan, arena.sched)
        g = arena.g
        # who touches each device and host buffer (a buffer is in use from the first
        # start of one to the last finish of one)
        self.touch, self.host_touch = {}, {}
        for i, nd in enumerate(g.nodes):
            for t in list(nd.input) + list(nd.output):
                if t in arena.buf_of:
                    self.touch.setdefault(arena.buf_of[t], set()).add(i)
                elif t in arena.host_of:
                    self.host_touch.setdefault(arena.host_of[t], set()).add(i)
        # what the plan holds to the last step (outputs, parameters, optimizer state) is
        # never freed; a data input is, after its last reader, as the plan's lifetimes say
        last = len(arena.sched) - 1
        self.persistent = {bi for bi, b in enumerate(arena.buffers) if b["end"] == last}
        self.persistent |= {arena.buf_of[t] for t in g.outputs if t in arena.buf_of}

    # ----------------------------------------------------------------- choice

    def order(self, k, seed):
        """The chooser of interleaving k: a function of the movable streams
        [(stream, 'start'|'finish')] giving the index of the one to move."""
        if k == 0:
            return "schedule", None
        mode = MODES[(k - 1) % len(MODES)]
        rng = random.Random(seed * 7919 + k)
        if mode == "random":
            return mode, lambda moves: rng.randrange(len(moves))
        if mode == "priority":
            rank = {sid: r for r, sid in enumerate(rng.sample(self.sp.ids, len(self.sp.ids)))}
            return mode, lambda moves: min(range(len(moves)), key=lambda m: rank[moves[m][0]])

        def eager(moves):
            starts = [m for m in range(len(moves)) if moves[m][1] == "start"]
            if starts:
                return starts[rng.randrange(len(starts))]
            # the node started last finishes first: one started early (an Offload still
            # reading, a collective) stays in flight while the other streams go on
            return max(range(len(moves)), key=lambda m: self.started_at[moves[m][0]])
        return mode, eager

    # ----------------------------------------------------------------- one interleaving

    def steps(self, init, seed, device, k, order_seed=0):
        """Interleaving k of one training step from init (graph inputs);
        returns env as Arena.steps does."""
        a, g, sp, rp = self.a, self.a.g, self.sp, self.rp
        self.mode, choose = self.order(k, order_seed)
        a.mem.fill_(rp.POISON)
        for h in a.host_mem:
            h.fill_(rp.POISON)
        a.env, a.captured = {}, {}
        self.k, self.seed = k, seed
        self.in_use, self.freed = set(), set()
        self.left = {bi: len(ns) for bi, ns in self.touch.items()}
        self.host_left = {hi: len(ns) for hi, ns in self.host_touch.items()}
        self.done = set()
        self.writes = []  # (lo, hi, node) of every write to the arena, in order
        self.events = 0
        for name in g.inputs:
            bi = a.buf_of[name]
            self.use(bi, None)
            a.env[name] = self.put(name, init[name].to(device), None)
        nxt = {sid: 0 for sid in sp.ids}
        flight = {}  # stream -> (node, pending state)
        self.started_at = {}  # stream -> the event that started its node in flight
        if k == 0:
            plan_order = [(sp.stream_of[i], ev) for i in a.sched for ev in ("start", "finish")]
        while True:
            moves = []
            for sid in sp.ids:
                if sid in flight:
                    moves.append((sid, "finish"))
                elif nxt[sid] < len(sp.queue[sid]):
                    i = sp.queue[sid][nxt[sid]]
                    if all(w in self.done for w in sp.waits_into.get(i, ())):
                        moves.append((sid, "start"))
            if not moves:
                if any(nxt[sid] < len(sp.queue[sid]) for sid in sp.ids):
                    raise rp.PlanViolation("interleaving %d (%s): the streams cannot go on: %s"
                                           % (k, self.mode, self.stuck(nxt)))
                break
            if k == 0:
                pick = plan_order[self.events]
                if pick not in moves:
                    raise rp.PlanViolation("the schedule's own order breaks the waits at step %d (node %d)"
                                           % (self.events // 2, a.sched[self.events // 2]))
                sid, ev = pick
            else:
                sid, ev = moves[choose(moves)]
            self.events += 1
            if ev == "start":
                i = sp.queue[sid][nxt[sid]]
                nxt[sid] += 1
                self.started_at[sid] = self.events
                flight[sid] = (i, (yield from self.start(i)))
            else:
                i, pend = flight.pop(sid)
                self.finish(i, pend)
        a.env.update(a.captured)
        return a.env

    def stuck(self, nxt):
        out = []
        for sid in self.sp.ids:
            if nxt[sid] < len(self.sp.queue[sid]):
                i = self.sp.queue[sid][nxt[sid]]
                out.append("stream %d's node %d waits for %s" % (
                    sid, i, [w for w in self.sp.waits_into.get(i, ()) if w not in self.done]))
        return "; ".join(out)

    def where(self, i):
        return "interleaving %d (%s), event %d: node %d (%s, stream %d)" % (
            self.k, self.mode, self.events, i, self.a.g.nodes[i].op_type, self.sp.stream_of[i])

    # ----------------------------------------------------------------- memory in use

    def use(self, bi, i):
        """Buffer bi comes into use (node i starts touching it first)."""
        if bi in self.in_use:
            return
        if bi in self.freed:
            raise self.rp.PlanViolation("%s: touches buffer %d after every node touching it finished"
                                        % (self.where(i), bi))
        a = self.a
        if self.guards:
            lo, hi = a.slot_range(bi)
            if hi > lo:
                for o in self.in_use:
                    olo, ohi = a.slot_range(o)
                    if lo < ohi and olo < hi and ohi > olo:
                        busy = sorted(n for n in self.touch.get(o, ()) if n not in self.done)
                        raise self.rp.PlanViolation(
                            "%s: buffer %d (%s) comes into use at bytes [%d,%d) while buffer %d (%s) at "
                            "[%d,%d) is still in use (nodes %s not finished): no wait orders them"
                            % (self.where(i) if i is not None else "graph inputs", bi, a.buffers[bi]["tensors"][0],
                               lo - a.base, hi - a.base, o, a.buffers[o]["tensors"][0], olo - a.base,
                               ohi - a.base, busy[:4]))
        self.in_use.add(bi)

    def release(self, i):
        """Node i finished: buffers that nothing will touch again are freed and poisoned."""
        a, rp = self.a, self.rp
        for bi in {a.buf_of[t] for t in self.names(i) if t in a.buf_of}:
            self.left[bi] -= 1
            if self.left[bi] == 0 and bi not in self.persistent:
                for t in a.buffers[bi]["tensors"]:
                    if t in a.capture and t in a.env:
                        a.captured[t] = a.env[t].detach().clone()
                lo, hi = a.slot_range(bi)
                if hi > lo:
                    a.mem[lo - a.base:hi - a.base].fill_(rp.POISON)
                    self.wrote(lo, hi, None)
                self.in_use.discard(bi)
                self.freed.add(bi)
        for hi in {a.host_of[t] for t in self.names(i) if t in a.host_of}:
            self.host_left[hi] -= 1
            if self.host_left[hi] == 0:
                a.host_mem[hi].fill_(rp.POISON)

    def names(self, i):
        nd = self.a.g.nodes[i]
        return [t for t in list(nd.input) + list(nd.output) if t]

    def put(self, name, t, node):
        """A new value into its slot (Arena.place without its step-based guards)."""
        a = self.a
        b = a.buffers[a.buf_of[name]]
        need = (_span(t) if t.is_contiguous() or _span(t) == t.numel() else t.numel()) * t.element_size()
        if need > b["size"]:
            raise self.rp.PlanViolation("'%s' needs %d bytes, its buffer %d has %d"
                                        % (name, need, a.buf_of[name], b["size"]))
        guards, a.guards = a.guards, False
        try:
            out = a.place(name, t)
        finally:
            a.guards = guards
        self.wrote(*a.slot_range(a.buf_of[name]), node)
        return out

    # ----------------------------------------------------------------- the two events

    def start(self, i):
        """Node i starts: computed from what its inputs hold now (a buffer it
        writes in place from a copy aside, so that the result lands only at its
        finish), its outputs' memory scribbled over.  Returns what finish needs."""
        a, g, rp = self.a, self.a.g, self.rp
        c = g.calls[i]
        for t in c.node.input:
            if t and t not in a.env:
                raise rp.PlanViolation("%s: reads '%s' before its maker (node %s) finished: no wait orders them"
                                       % (self.where(i), t, g.producer.get(t)))
        for t in self.names(i):
            if t in a.buf_of:
                self.use(a.buf_of[t], i)
        mutated = set()
        for k, name in enumerate(c.node.output):
            j = c.alias[k] if k < len(c.alias) else -1
            if name and j >= 0 and c.inplace and c.inputs[j] in a.buf_of:
                mutated.add(a.buf_of[c.inputs[j]])
        aside = {}  # buffer written in place -> (its slot's first byte in the arena, a copy of the slot)
        for bi in mutated:
            lo, hi = a.slot_range(bi)
            aside[bi] = (lo, _aside(a.mem[lo - a.base:hi - a.base]))
        reads = {a.buf_of[t] for t in c.node.input if t in a.buf_of}

        def value_of(t):
            x = a.env[t]
            if t in a.buf_of and a.buf_of[t] in aside and x.numel():
                lo, cp = aside[a.buf_of[t]]
                return _typed(cp, x.data_ptr() - lo, x)
            return x

        if c.op in ("Offload", "Reload"):
            flat = [value_of(c.inputs[0]).clone()]
        elif isinstance(c, rp.CommCall):
            if c.op == "Depend":
                flat = c.depend(value_of, g.info, self.a.mem.device)
            else:
                flat = rp.comm_outputs(c, (yield c, [value_of(x) if x else None for x in c.inputs]), g.info)
        else:
            if c.random:
                rp.seed_node(i if a.keys is None else a.keys[i], self.seed, self.a.mem.device)
            args, kw = c.arguments(value_of, self.a.mem.device)
            if c.op in ("as_strided", "as_strided_") and len(args) > 3 and args[3] is not None:
                # storage_offset counts from the start of the storage, which eager allocated
                # for the buffer alone: here the arena's, or the copy's (a few bytes before it)
                bi = a.buf_of[c.inputs[0]]
                es = a.env[c.inputs[0]].element_size()
                args[3] += aside[bi][1].storage_offset() // es if bi in aside else a.buffers[bi]["offset"] // es
            out = c.fn(*args, **kw)
            flat = c.flat_outputs(out, value_of)
        # a kernel in flight has written part of its outputs: garbage until it finishes
        since = len(self.writes)
        for k, name in enumerate(c.node.output):
            if not name:
                continue
            j = c.alias[k] if k < len(c.alias) else -1
            if j < 0 and name in a.buf_of:
                lo, hi = a.slot_range(a.buf_of[name])
                a.mem[lo - a.base:hi - a.base].fill_(rp.POISON)
                self.wrote(lo, hi, i)
            elif j >= 0 and c.inplace and c.inputs[j] in a.buf_of:
                rp.fill_poison(a.env[c.inputs[j]])
                self.wrote(*rp._extent(a.env[c.inputs[j]]), i)
        return flat, aside, reads | mutated, since

    def wrote(self, lo, hi, node):
        """Arena bytes [lo, hi) written by node (None: freed and poisoned)."""
        if hi > lo:
            self.writes.append((lo, hi, node))

    def finish(self, i, pend):
        """Node i finishes: nothing else wrote what it read since it started
        (a kernel reads all along); its outputs land."""
        a, g, rp = self.a, self.a.g, self.rp
        c = g.calls[i]
        flat, aside, reads, since = pend
        for lo, hi, n in self.writes[since:]:
            if n == i:
                continue
            for bi in reads:
                slo, shi = a.slot_range(bi)
                if lo < shi and slo < hi:
                    raise TornRead("%s: bytes [%d,%d) of buffer %d (%s), which it reads, were written while it "
                                   "ran (%s: a torn read)"
                                   % (self.where(i), max(lo, slo) - a.base, min(hi, shi) - a.base, bi,
                                      a.buffers[bi]["tensors"][0],
                                      "freed and poisoned" if n is None else "by node %d (%s, stream %d)"
                                      % (n, g.nodes[n].op_type, self.sp.stream_of[n])))
        for k, (name, t) in enumerate(zip(c.node.output, flat)):
            if not name:
                continue
            if t is None:
                raise rp.BadInput("%s: output '%s' is undefined" % (c.where, name))
            j = c.alias[k] if k < len(c.alias) else -1
            if c.op == "Offload":
                a.env[name] = self.to_host(name, t)
            elif j >= 0:
                a.env[name] = self.back(i, c, name, t, j, aside)
            else:
                if c.empty:
                    rp.fill_poison(t)
                a.env[name] = self.put(name, t, i)
        self.done.add(i)
        self.release(i)

    def back(self, i, c, name, t, j, aside):
        """An output sharing input j's storage, made on the copy aside: the same
        view of the arena, with the in-place result copied in."""
        a, rp = self.a, self.rp
        src = c.inputs[j]
        if src not in a.buf_of or t.numel() == 0 or a.env[src].numel() == 0:
            return t
        if a.buf_of[src] not in aside:
            if t.numel() and rp.storage_ptr(t) != a.base:
                raise rp.BadInput("%s: output '%s' is recorded as sharing the storage of '%s', but the "
                                  "operator returned new memory" % (c.where, name, src))
            if c.empty:
                rp.fill_poison(t)
            return t  # a view made on the arena
        lo, cp = aside[a.buf_of[src]]
        base = cp.data_ptr()
        if rp.storage_ptr(t) != rp.storage_ptr(cp) or t.data_ptr() < base or \
                t.data_ptr() + _span(t) * t.element_size() > base + cp.numel():
            raise rp.BadInput("%s: output '%s' is recorded as sharing the storage of '%s', but the operator "
                              "returned new memory" % (c.where, name, src))
        out = _typed(a.mem, lo - a.base + t.data_ptr() - base, t)
        if c.inplace:
            out.copy_(t)
            self.wrote(*rp._extent(out), i)
        elif c.empty:
            rp.fill_poison(out)
        return out

    def to_host(self, name, x):
        """Offload: x into its host buffer's memory, outside the arena."""
        a = self.a
        hi = a.host_of[name]
        need = x.numel() * x.element_size()
        if need > a.host_buffers[hi]["size"]:
            raise self.rp.PlanViolation("'%s' needs %d bytes, its host buffer %d has %d"
                                        % (name, need, hi, a.host_buffers[hi]["size"]))
        h = a.host_mem[hi][:need].view(x.dtype).view(x.shape) if need else torch.empty(x.shape, dtype=x.dtype)
        h.copy_(x)
        return h


def run_interleavings(rp, path, g, plan, arena, init, refs, a, device):
    """models/run_plan.py's verdict on a version 2 plan: a.interleavings
    interleavings (each a.steps training steps), every one compared bit for
    bit with the reference; True when all match.  Goes on after a failure,
    to say how many interleavings break."""
    il = Interleaver(rp, arena, plan, not a.trust_plan)
    broken, names, modes = [], [], {}
    for k in range(a.interleavings):
        state = init
        for step in range(a.steps):
            at = "interleaving %d (%s)%s" % (k, il.order(k, a.seed)[0], " step %d" % (step + 1) if a.steps > 1 else "")
            try:
                got = rp.drive_alone(il.steps(state, a.seed + step, device, k, a.seed))
            except rp.PlanViolation as e:
                broken.append("%s: the plan broke a guard: %s" % (at, e))
                break
            except TornRead as e:
                broken.append("%s: values differ: %s" % (at, e))
                break
            names, diffs = rp.compare(g, refs[step], got)
            if diffs:
                broken.append("%s: %d of %d compared tensors differ: %s"
                              % (at, len(diffs), len(names), "; ".join(diffs[:3])))
                break
            if step + 1 < a.steps:
                state = rp.carried_state(g, init, got)
            del got
    what = "%d interleavings of streams %s" % (a.interleavings, il.sp.describe())
    if broken:
        for b in broken:
            m = b.split("(", 1)[1].split(")", 1)[0]
            modes[m] = modes.get(m, 0) + 1
        print("MISMATCH %s: %d of %s fail (%s; arena %d B)"
              % (path, len(broken), what, ", ".join("%s %d" % kv for kv in sorted(modes.items())),
                 arena.mem.numel()))
        for b in broken[:5]:
            print("  " + b)
        return False
    if not a.quiet:
        print("MATCH %s: %s, each bit for bit equal to the reference (loss, graph outputs, parameters and "
              "optimizer state: %d tensors%s); arena %d B" % (path, what, len(names),
                                                              ", %d steps each" % a.steps if a.steps > 1 else "",
                                                              arena.mem.numel()))
    return True
