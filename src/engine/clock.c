/* clock.c - the monotonic clock and one-shot timers, real and fake.
 *
 * The real clock arms one GSource per timer with a ready time in
 * microseconds, so re-arming costs no allocation and an idle process has no
 * timer at all.  The fake clock keeps its timers in a list and fires them
 * from pf_clock_fake_advance(), for unit tests.
 */
#include <time.h>

#include "powerfs/engine/clock.h"

struct pf_clock {
	gboolean fake;
	gint64 fake_now;
	gint64 fake_slept;  /* the fake host's sleeps, for the boot clock */
	GList *fake_timers; /* struct pf_timer *, armed or not */
};

struct pf_timer {
	struct pf_clock *clock;
	pf_timer_func func;
	gpointer data;
	gint64 deadline; /* -1 = disarmed */
	GSource *source; /* real clock only */
};

struct timer_source {
	GSource source;
	struct pf_timer *timer;
};

struct pf_clock *pf_clock_new_monotonic(void)
{
	return g_new0(struct pf_clock, 1);
}

struct pf_clock *pf_clock_new_fake(gint64 start_us)
{
	struct pf_clock *clock = g_new0(struct pf_clock, 1);

	clock->fake = TRUE;
	clock->fake_now = start_us;
	return clock;
}

void pf_clock_free(struct pf_clock *clock)
{
	if (!clock)
		return;
	g_warn_if_fail(clock->fake_timers == NULL);
	g_free(clock);
}

gint64 pf_clock_now(struct pf_clock *clock)
{
	return clock->fake ? clock->fake_now : g_get_monotonic_time();
}

static gint64 clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (gint64)ts.tv_sec * G_GINT64_CONSTANT(1000000000) + ts.tv_nsec;
}

gint64 pf_clock_mono_ns(struct pf_clock *clock)
{
	return clock->fake ? clock->fake_now * 1000 : clock_ns(CLOCK_MONOTONIC);
}

/* boottime - monotonic, between two readings of the monotonic clock that
 * are close together: a preemption between the reads would count as
 * sleep. */
gint64 pf_clock_slept_ns(struct pf_clock *clock)
{
	gint64 before, boot, after;
	int tries = 0;

	if (clock->fake)
		return clock->fake_slept * 1000;
	do {
		before = clock_ns(CLOCK_MONOTONIC);
		boot = clock_ns(CLOCK_BOOTTIME);
		after = clock_ns(CLOCK_MONOTONIC);
	} while (after - before > 2000 && ++tries < 10);
	return boot - before - (after - before) / 2;
}

void pf_clock_fake_host_sleep(struct pf_clock *clock, gint64 delta_us)
{
	g_return_if_fail(clock->fake);
	clock->fake_slept += delta_us;
}

static gboolean timer_source_dispatch(GSource *source, GSourceFunc callback,
				      gpointer user_data)
{
	struct pf_timer *timer = ((struct timer_source *)source)->timer;

	(void)callback;
	(void)user_data;
	/* One-shot: disarm before the call, which may arm it again. */
	timer->deadline = -1;
	g_source_set_ready_time(source, -1);
	timer->func(timer->data);
	return G_SOURCE_CONTINUE;
}

static GSourceFuncs timer_source_funcs = {
	.dispatch = timer_source_dispatch,
};

struct pf_timer *pf_timer_new(struct pf_clock *clock, pf_timer_func func,
			      gpointer data)
{
	struct pf_timer *timer = g_new0(struct pf_timer, 1);

	timer->clock = clock;
	timer->func = func;
	timer->data = data;
	timer->deadline = -1;
	if (clock->fake) {
		clock->fake_timers = g_list_prepend(clock->fake_timers, timer);
	} else {
		timer->source = g_source_new(&timer_source_funcs,
					     sizeof(struct timer_source));
		((struct timer_source *)timer->source)->timer = timer;
		g_source_set_name(timer->source, "powerfs timer");
		g_source_attach(timer->source, NULL);
	}
	return timer;
}

void pf_timer_arm(struct pf_timer *timer, gint64 deadline_us)
{
	if (deadline_us < 0)
		deadline_us = 0;
	timer->deadline = deadline_us;
	if (timer->source)
		g_source_set_ready_time(timer->source, deadline_us);
}

void pf_timer_disarm(struct pf_timer *timer)
{
	if (timer->deadline < 0)
		return;
	timer->deadline = -1;
	if (timer->source)
		g_source_set_ready_time(timer->source, -1);
}

gboolean pf_timer_is_armed(const struct pf_timer *timer)
{
	return timer->deadline >= 0;
}

void pf_timer_free(struct pf_timer *timer)
{
	if (!timer)
		return;
	if (timer->source) {
		g_source_destroy(timer->source);
		g_source_unref(timer->source);
	} else {
		timer->clock->fake_timers =
			g_list_remove(timer->clock->fake_timers, timer);
	}
	g_free(timer);
}

static struct pf_timer *fake_next_due(struct pf_clock *clock, gint64 until)
{
	struct pf_timer *next = NULL;

	for (GList *l = clock->fake_timers; l; l = l->next) {
		struct pf_timer *t = l->data;

		if (t->deadline >= 0 && t->deadline <= until &&
		    (!next || t->deadline < next->deadline))
			next = t;
	}
	return next;
}

void pf_clock_fake_advance(struct pf_clock *clock, gint64 delta_us)
{
	gint64 until = clock->fake_now + delta_us;
	struct pf_timer *t;

	g_return_if_fail(clock->fake);
	while ((t = fake_next_due(clock, until))) {
		if (t->deadline > clock->fake_now)
			clock->fake_now = t->deadline;
		t->deadline = -1;
		t->func(t->data);
	}
	clock->fake_now = until;
}
