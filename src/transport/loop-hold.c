/* loop-hold.c - how long requests hold the loop lock, logged with --debug.
 *
 * Every request, and every dispatch of the main loop, runs under one lock
 * (loop-lock.c), so the longest hold is what any other caller may wait
 * for on top of the CPU.  A client's latency mixes the two; this measures
 * the hold alone.  Holds go into histograms (10 us buckets up to 20 ms),
 * one per kind of request, and once a second of holds a debug line gives
 * each kind's count, median, 99th percentile and maximum:
 *
 *   loop hold S s: KIND n=N p50 MS p99 MS max MS ms
 *   (cpu p99 MS max MS ms); ...
 *
 * Each figure comes twice: wall time, and the holding thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) in the hold, since on a busy machine a thread
 * can be preempted while it holds the lock.
 *
 * The percentiles are bucket upper edges (never below the truth); the
 * maximum is exact.  The summary is built under the lock but costs a walk
 * of the buckets only, a few microseconds.  Off by default: then a hold
 * costs one branch; on, two clock reads at each end.
 */
#include <string.h>
#include <time.h>
#include <linux/fuse.h>

#include "powerfs/transport/loop-hold.h"

#define BUCKET_US 10
#define BUCKETS 2000 /* 20 ms; the last bucket takes the rest */
#define WINDOW_US G_USEC_PER_SEC

enum kind {
	K_LOOKUP,
	K_GETATTR,
	K_OPEN,
	K_READ,
	K_WRITE,
	K_RELEASE,
	K_OTHER,
	K_MAIN,
	N_KINDS
};

static const char *const kind_name[N_KINDS] = {
	"lookup", "getattr", "open",  "read",
	"write",  "release", "other", "main-loop",
};

struct hist {
	guint count;
	gint64 max_us;
	guint bucket[BUCKETS];
};

/* Wall time held, and the holding thread's CPU time in it: a hold much
 * longer than its CPU time was preempted (a busy machine), not working. */
struct kind_stats {
	struct hist wall, cpu;
};

static gboolean enabled;
static struct kind_stats stats[N_KINDS];
static __thread gint64 cpu_start;
static gint64 window_start;

void pf_loop_hold_enable(void)
{
	enabled = TRUE;
}

static gint64 thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (gint64)ts.tv_sec * G_USEC_PER_SEC + ts.tv_nsec / 1000;
}

gint64 pf_loop_hold_start(void)
{
	if (!enabled)
		return 0;
	cpu_start = thread_cpu_us();
	return g_get_monotonic_time();
}

static void add(struct hist *h, gint64 us)
{
	h->count++;
	h->bucket[MIN(us / BUCKET_US, BUCKETS - 1)]++;
	h->max_us = MAX(h->max_us, us);
}

static enum kind kind_of(guint32 opcode)
{
	switch (opcode) {
	case PF_HOLD_MAIN_LOOP:
		return K_MAIN;
	case FUSE_LOOKUP:
		return K_LOOKUP;
	case FUSE_GETATTR:
		return K_GETATTR;
	case FUSE_OPEN:
		return K_OPEN;
	case FUSE_READ:
		return K_READ;
	case FUSE_WRITE:
		return K_WRITE;
	case FUSE_RELEASE:
		return K_RELEASE;
	default:
		return K_OTHER;
	}
}

/* Upper edge, in ms, of the bucket holding the q-quantile. */
static double quantile_ms(const struct hist *h, double q)
{
	guint want = (guint)(q * h->count + 0.999999), seen = 0;

	for (guint i = 0; i < BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= want && seen)
			return i == BUCKETS - 1 ? h->max_us / 1000.0 :
						  (i + 1) * BUCKET_US / 1000.0;
	}
	return h->max_us / 1000.0;
}

static void summarize(gint64 now)
{
	g_autoptr(GString) s = g_string_new(NULL);

	g_string_printf(s, "loop hold %.2f s:",
			(now - window_start) / (double)G_USEC_PER_SEC);
	for (int k = 0; k < N_KINDS; k++) {
		struct hist *h = &stats[k].wall, *c = &stats[k].cpu;

		if (!h->count)
			continue;
		g_string_append_printf(
			s,
			" %s n=%u p50 %.2f p99 %.2f max %.2f "
			"ms (cpu p99 %.2f max %.2f ms);",
			kind_name[k], h->count, quantile_ms(h, 0.5),
			quantile_ms(h, 0.99), h->max_us / 1000.0,
			quantile_ms(c, 0.99), c->max_us / 1000.0);
		memset(&stats[k], 0, sizeof(stats[k]));
	}
	g_string_truncate(s, s->len - 1);
	g_debug("%s", s->str);
}

void pf_loop_hold_end(gint64 start, guint32 opcode)
{
	struct kind_stats *k;
	gint64 now;

	if (!enabled || !start)
		return;
	now = g_get_monotonic_time();
	k = &stats[kind_of(opcode)];
	add(&k->wall, now - start);
	add(&k->cpu, thread_cpu_us() - cpu_start);
	if (!window_start)
		window_start = start;
	if (now - window_start >= WINDOW_US) {
		summarize(now);
		window_start = now;
	}
}
