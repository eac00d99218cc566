/* The progress line (see planner.h): one line on stderr, redrawn in place
 * by a ticker thread every quarter second with the stage and its seconds,
 * so that a stage without steps to count (loading, an exact layout) still
 * shows that roamc is working.  Only when main enables it (stderr is a
 * terminal and no -q); every other call is then a no-op. */
#include "planner.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

static struct {
    int on; /* the ticker runs */
    int stop;
    int drawn; /* something is on the line */
    char prefix[128], stage[192];
    double since; /* when the stage started */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
} progress = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

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
    if (pthread_create(&progress.thread, NULL, progress_ticker, NULL) == 0) progress.on = 1;
}

static void progress_set(char *dst, size_t len, const char *fmt, va_list ap) {
    pthread_mutex_lock(&progress.lock);
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

void planner_progress_clear(void) {
    if (!progress.on) return;
    pthread_mutex_lock(&progress.lock);
    if (progress.drawn) fputs("\r\033[K", stderr);
    fflush(stderr);
    progress.drawn = 0;
    pthread_mutex_unlock(&progress.lock);
}

void planner_progress_end(void) {
    if (!progress.on) return;
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
