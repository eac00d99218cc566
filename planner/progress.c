/* Progress on stderr (see planner.h), in one of two forms main chooses:
 *   a terminal: one line, redrawn in place by a ticker thread every quarter
 *     second with the stage and its seconds, so that a stage without steps
 *     to count (loading, an exact layout) still shows that roamc is working;
 *   anything else (a file, a pipe, a CI log): plain lines, one per finished
 *     stage that took a second or more and one per note (a --max-batch
 *     batch decided), never redrawn.
 * Notes are also kept, whether shown or not, for an interrupted run to
 * print what it had decided (planner_progress_notes).  Without start,
 * every call but planner_progress_note is a no-op. */
#include "planner.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* a finished stage shorter than this is not worth a log line */
#define PROGRESS_LOG_MIN_SECONDS 1.0

static struct {
    int on;  /* started */
    int log; /* plain lines (not a terminal), no ticker */
    int stop;
    int drawn; /* something is on the line */
    char prefix[128], stage[192];
    double since; /* when the stage started */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
} progress = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* The notes so far, appended under progress.lock and published by their
 * length alone, so that a signal handler reads notes[0..notes_len) without
 * a lock (planner_progress_notes). */
static char progress_notes_buf[16384];
static atomic_size_t progress_notes_len, progress_notes_last; /* where the last note starts */

/* Draws the line; the caller holds the lock. */
static void progress_draw(void) {
    if (!progress.stage[0] && !progress.prefix[0]) return;
    fprintf(stderr, "\r\033[Kroamc: %s%s%s (%.1f s)", progress.prefix,
            progress.prefix[0] && progress.stage[0] ? ": " : "", progress.stage,
            roamc_now() - progress.since);
    fflush(stderr);
    progress.drawn = 1;
}

static void *progress_ticker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&progress.lock);
    while (!progress.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&progress.wake, &progress.lock, &ts);
        /* a stage shorter than half a second is not worth a line */
        if (!progress.stop && roamc_now() - progress.since >= 0.5) progress_draw();
    }
    pthread_mutex_unlock(&progress.lock);
    return NULL;
}

void planner_progress_start(int enabled) {
    if (!enabled || progress.on) return;
    progress.stop = 0;
    progress.since = roamc_now();
    if (enabled == PLANNER_PROGRESS_LOG)
        progress.on = progress.log = 1;
    else if (pthread_create(&progress.thread, NULL, progress_ticker, NULL) == 0)
        progress.on = 1;
}

/* Log form: the stage ending now, when it took long enough to be worth a
 * line.  The caller holds the lock. */
static void progress_log_finished(void) {
    double took = roamc_now() - progress.since;
    if (!progress.log || took < PROGRESS_LOG_MIN_SECONDS) return;
    if (!progress.stage[0] && !progress.prefix[0]) return;
    fprintf(stderr, "roamc: %s%s%s: %.1f s\n", progress.prefix,
            progress.prefix[0] && progress.stage[0] ? ": " : "", progress.stage, took);
    fflush(stderr);
}

static void progress_set(char *dst, size_t len, const char *fmt, va_list ap) {
    pthread_mutex_lock(&progress.lock);
    progress_log_finished();
    if (fmt)
        vsnprintf(dst, len, fmt, ap);
    else
        dst[0] = 0;
    progress.stage[0] = dst == progress.prefix ? 0 : progress.stage[0];
    progress.since = roamc_now();
    pthread_mutex_unlock(&progress.lock);
}

void planner_progress_prefix(const char *fmt, ...) {
    if (!progress.on) return;
    va_list ap;
    va_start(ap, fmt);
    progress_set(progress.prefix, sizeof progress.prefix, fmt, ap);
    va_end(ap);
}

void planner_progress_stage(const char *fmt, ...) {
    if (!progress.on) return;
    va_list ap;
    va_start(ap, fmt);
    progress_set(progress.stage, sizeof progress.stage, fmt, ap);
    va_end(ap);
}

void planner_progress_count(const char *fmt, ...) {
    if (!progress.on) return;
    pthread_mutex_lock(&progress.lock);
    double since = progress.since;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(progress.stage, sizeof progress.stage, fmt, ap);
    va_end(ap);
    progress.since = since; /* the same stage: its clock runs on */
    pthread_mutex_unlock(&progress.lock);
}

void planner_progress_note(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&progress.lock);
    size_t n = atomic_load(&progress_notes_len), k = strlen(line);
    if (n + k + 4 <= sizeof progress_notes_buf) { /* past the end: the first notes are kept */
        memcpy(progress_notes_buf + n, "  ", 2);
        memcpy(progress_notes_buf + n + 2, line, k);
        progress_notes_buf[n + 2 + k] = '\n';
        atomic_store(&progress_notes_last, n);
        atomic_store(&progress_notes_len, n + k + 3);
    }
    if (progress.on && progress.log) {
        fprintf(stderr, "roamc: %s\n", line);
        fflush(stderr);
    } else if (progress.on) { /* the terminal's line shows it until the next task */
        /* as much of the note as the line holds */
        snprintf(progress.prefix, sizeof progress.prefix, "%.*s", (int)sizeof progress.prefix - 1,
                 line);
        progress.stage[0] = 0;
        progress.since = roamc_now();
    }
    pthread_mutex_unlock(&progress.lock);
}

size_t planner_progress_notes(const char **text) {
    size_t len = atomic_load(&progress_notes_len), from = 0;
    /* in log form every note is on stderr already: the last, which holds
     * the standing (--max-batch: the largest fitting so far), says enough */
    if (progress.on && progress.log) from = atomic_load(&progress_notes_last);
    *text = progress_notes_buf + from;
    return len - from;
}

int planner_progress_drawn(void) {
    return progress.on && !progress.log && progress.drawn;
}

void planner_progress_clear(void) {
    if (!progress.on || progress.log) return;
    pthread_mutex_lock(&progress.lock);
    if (progress.drawn) fputs("\r\033[K", stderr);
    fflush(stderr);
    progress.drawn = 0;
    pthread_mutex_unlock(&progress.lock);
}

void planner_progress_end(void) {
    if (!progress.on) return;
    if (progress.log) {
        pthread_mutex_lock(&progress.lock);
        progress_log_finished();
        progress.on = progress.log = 0;
        progress.prefix[0] = progress.stage[0] = 0;
        pthread_mutex_unlock(&progress.lock);
        return;
    }
    pthread_mutex_lock(&progress.lock);
    progress.stop = 1;
    pthread_cond_signal(&progress.wake);
    pthread_mutex_unlock(&progress.lock);
    pthread_join(progress.thread, NULL);
    progress.on = 0;
    if (progress.drawn) fputs("\r\033[K", stderr);
    fflush(stderr);
    progress.drawn = 0;
    progress.prefix[0] = progress.stage[0] = 0;
}
