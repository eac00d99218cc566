/* planner/streams/ — --streams: a plan on several streams (shared/DESIGN.md
 * "Several streams (roam-plan v2)").
 *
 * A pass of the pipeline (planner.h, planner_pass) between the order and the
 * layout:
 *   - streams: ai.roamc Offload on a device-to-host copy stream, Reload on a
 *     host-to-device one (copy), collectives and Send/Recv on a
 *     communication stream (comm); every other operator on stream 0;
 *   - prefetch: each Reload moved earlier in the schedule, to the point
 *     where the compute before its first reader covers its copy time (never
 *     before its Offload), at the cost of the Reload's buffer living longer;
 *   - collectives ahead: each AllReduce, ReduceScatter, Broadcast and Send
 *     moved up to the step after its last predecessor (a bucket's
 *     all-reduce starts when its last gradient is ready), and the ops that
 *     depend on any collective (AllGather and Recv included) moved after
 *     the independent compute that covers its time, so that the
 *     communication runs beside compute; the buffers held in flight
 *     meanwhile are the memory this costs (no-comm-ahead: as ordered);
 *   - gathers ahead (gather_ahead N): each AllGather moved up to where the
 *     gather N before it in the schedule was issued, as FSDP prefetches;
 *   - waits: a side-stream op waits for the compute op issued before it (its
 *     issue point) and for every producer or ordering predecessor on another
 *     stream that no wait covers yet; a compute op waits for the side-stream
 *     ops that the times say have ended when it starts, so that the memory
 *     they touched can be used again (DESIGN's memory rule), never delaying it
 *     (with sync-offload, also for each Offload at the first compute op after
 *     its value's last compute use, which may delay it);
 *   - times: each op's start and end on the device profile (fit.h): compute
 *     ops by fit_op_seconds on stream 0, copies at the host link's bandwidth
 *     (each direction its own copy engine), collectives at
 *     comm_bytes_per_s (an all-reduce moves twice its input);
 *   - layout: each storage's lifetime lengthened to the last step of an op
 *     not ordered after every op touching it (graph_hb_extend), so that the
 *     layout engine, unchanged, never gives an address to two buffers that
 *     some interleaving runs together;
 *   - the plan file: version 2 ("streams", "stream", "waits", "times"); the
 *     report: step time, what overlaps, and the memory the overlap costs. */
#ifndef ROAMC_STREAMS_H
#define ROAMC_STREAMS_H

#include <stdbool.h>
#include <stddef.h>

#include "fit.h"
#include "planner.h"

enum streams_bits {
    STREAMS_COPY = 1, /* Offload and Reload on copy streams */
    STREAMS_COMM = 2, /* collectives, Send and Recv on a communication stream */
};

/* Collectives' bandwidth when none is given: one 200 Gb/s InfiniBand NIC
 * per GPU, 25 GB/s each way (a DGX H100 has one per GPU); NVLink within a
 * node is faster, so an estimate on the slow side. */
#define STREAMS_DEFAULT_COMM_GBPS 25.0

typedef struct streams_options {
    unsigned kinds; /* enum streams_bits; 0: one stream (version 1 plans) */
    bool prefetch;  /* Reloads issued ahead of their reader (default true) */
    /* each collective issued as soon as its inputs are ready, its readers
     * deferred until the compute before them covers its time (default true;
     * false: where the order put them, holding less in flight) */
    bool comm_ahead;
    /* --shard zero3|fsdp --prefetch N: each AllGather issued where the
     * unit N gathers earlier starts, so it runs beside that unit's compute
     * (0: where the order put it, the default outside zero3/fsdp) */
    long gather_ahead;
    /* compute waits for each Offload at the first compute op after its
     * value's last compute use, so that the value leaves device memory where
     * one stream would free it (time traded for memory; default false) */
    bool sync_offload;
    fit_device device;
    double comm_bytes_per_s;
} streams_options;

/* --streams LIST: comma-separated copy, comm, all (copy,comm), none,
 * no-prefetch (Reloads stay where the order put them), no-comm-ahead
 * (collectives and their readers stay where the order put them) and
 * sync-offload.  Sets kinds, prefetch, comm_ahead and sync_offload in *o.  Returns 0, or -1 with a
 * message. */
int streams_parse(const char *list, streams_options *o, char *err, size_t errlen);

/* The pass for planner_options.pass: *o must outlive every plan made with it. */
void streams_pass_init(planner_pass *pass, const streams_options *o);

#endif
