/* test-autosleep.c - unit tests of autosleep (src/engine/autosleep.c) and the
 * suspend path (src/engine/suspend.c) on the simulated backend and a fake clock,
 * wired together by power_new().
 */
#include <errno.h>
#include <string.h>
#include <glib.h>

#include "powerfs/engine/autosleep.h"
#include "powerfs/engine/backend.h"
#include "powerfs/engine/clock.h"
#include "powerfs/engine/power.h"
#include "powerfs/engine/suspend.h"
#include "powerfs/engine/wakelock.h"
#include "powerfs/engine/wakeup.h"

#define T0 G_GINT64_CONSTANT(1000000000)
#define MS(x) ((gint64)(x)*1000)
#define SLEEP_MS 1000

static struct power *power_setup(void)
{
	struct pf_clock *clock = pf_clock_new_fake(T0);
	struct backend *be;
	struct power_options opts = { 100, 300, FALSE, NULL };
	struct power *pw;

	be = backend_simulate_new(clock, SLEEP_MS,
				  PM_STATE_BIT(PM_MEM) |
					  PM_STATE_BIT(PM_FREEZE));
	g_assert_nonnull(be);
	pw = power_new(clock, be, &opts);
	g_assert_nonnull(pw);
	g_assert_nonnull(pw->engine);
	g_assert_nonnull(pw->wakelocks);
	g_assert_nonnull(pw->suspend);
	g_assert_nonnull(pw->autosleep);
	g_assert_true(pw->clock == clock);
	return pw;
}

struct done {
	int calls;
	int error;
};

static void done_cb(int error, gpointer data)
{
	struct done *d = data;

	d->calls++;
	d->error = error;
}

static void advance(struct power *pw, gint64 delta_us)
{
	pf_clock_fake_advance(pw->clock, delta_us);
}

/* Moves the fake clock to T0 + at_us. */
static void at(struct power *pw, gint64 at_us)
{
	gint64 now = pf_clock_now(pw->clock);

	g_assert_cmpint(T0 + at_us, >=, now);
	pf_clock_fake_advance(pw->clock, T0 + at_us - now);
}

static int successes(struct power *pw)
{
	return suspend_get_stats(pw->suspend)->success;
}

static guint count_of(struct power *pw)
{
	guint c = 0;

	wakeup_get_count(pw->engine, &c);
	return c;
}

static void power_teardown(struct power *pw)
{
	if (autosleep_state(pw->autosleep) != PM_ON) {
		struct done d = { 0, 1 };
		int i, ret;

		ret = autosleep_set_state(pw->autosleep, PM_ON, NULL, done_cb,
					  &d);
		if (ret == PF_PENDING) {
			for (i = 0; i < 100 && !d.calls; i++)
				advance(pw, MS(100));
			g_assert_cmpint(d.calls, ==, 1);
		} else {
			g_assert_cmpint(ret, ==, 0);
		}
	}
	advance(pw, MS(5000));
	power_free(pw);
}

struct find {
	const char *name;
	const struct wakeup_source *ws;
};

static void find_visit(const struct wakeup_source *ws, gpointer data)
{
	struct find *fd = data;

	if (!fd->ws && strcmp(wakeup_source_name(ws), fd->name) == 0)
		fd->ws = ws;
}

static const struct wakeup_source *find_ws(struct power *pw, const char *name)
{
	struct find fd = { name, NULL };

	wakeup_foreach_source(pw->engine, find_visit, &fd);
	return fd.ws;
}

static struct wakeup_stats stats_of(struct power *pw, const char *name)
{
	const struct wakeup_source *ws = find_ws(pw, name);
	struct wakeup_stats st;

	g_assert_nonnull(ws);
	wakeup_source_get_stats(ws, &st);
	return st;
}

/* autosleep_set_state() when no transition is in progress: it switches at
 * once, returns 0 and never calls done. */
static void set_now(struct power *pw, enum pm_state state)
{
	struct done d = { 0, 1 };

	g_assert_cmpint(
		autosleep_set_state(pw->autosleep, state, NULL, done_cb, &d),
		==, 0);
	g_assert_cmpint(autosleep_state(pw->autosleep), ==, state);
	advance(pw, 0);
	g_assert_cmpint(d.calls, ==, 0);
}

/* ------------------------------------------------------------------ */

static void test_enable_suspends(void)
{
	struct power *pw = power_setup();
	const struct suspend_stats *st;

	g_assert_cmpint(autosleep_state(pw->autosleep), ==, PM_ON);
	g_assert_cmpint(successes(pw), ==, 0);
	g_assert_false(suspend_in_progress(pw->suspend));

	set_now(pw, PM_MEM);
	g_assert_true(suspend_in_progress(pw->suspend));

	/* The first suspend starts at once and lasts SLEEP_MS. */
	g_assert_cmpint(successes(pw), ==, 0);
	at(pw, MS(SLEEP_MS) - 1);
	g_assert_cmpint(successes(pw), ==, 0);
	at(pw, MS(SLEEP_MS));
	g_assert_cmpint(successes(pw), ==, 1);

	/* No event during the cycle: 0.5 s pause, then the next one. */
	at(pw, MS(1500) - 1);
	g_assert_cmpint(successes(pw), ==, 1);
	at(pw, MS(2500) - 1);
	g_assert_cmpint(successes(pw), ==, 1);
	at(pw, MS(2500));
	g_assert_cmpint(successes(pw), ==, 2);
	at(pw, MS(3500) - 1);
	g_assert_cmpint(successes(pw), ==, 2);
	at(pw, MS(4000) - 1);
	g_assert_cmpint(successes(pw), ==, 2);
	at(pw, MS(4000));
	g_assert_cmpint(successes(pw), ==, 3);

	st = suspend_get_stats(pw->suspend);
	g_assert_cmpint(st->fail, ==, 0);
	g_assert_cmpint(st->failed_freeze, ==, 0);
	g_assert_cmpint(st->last_failed_errno, ==, 0);
	g_assert_cmpstr(st->last_failed_step, ==, "");
	g_assert_cmpstr(st->last_failed_dev, ==, "");
	/* Only the one event of the autosleep write was registered. */
	g_assert_cmpuint(stats_of(pw, "autosleep").event_count, ==, 1);

	/* Autosleep is on: prevent_suspend_time is driven by it. */
	{
		struct wakeup_source *ws =
			wakeup_source_register(pw->engine, "probe", 5);
		struct wakeup_stats ps;

		wakeup_source_stay_awake(ws);
		advance(pw, MS(300));
		wakeup_source_get_stats(ws, &ps);
		g_assert_cmpint(ps.prevent_suspend_time_ms, ==, 300);
		wakeup_source_relax(ws);
		wakeup_source_unregister(ws);
	}

	power_teardown(pw);
}

static void test_freeze(void)
{
	struct power *pw = power_setup();

	g_assert_cmpuint(suspend_valid_states(pw->suspend), ==,
			 PM_STATE_BIT(PM_MEM) | PM_STATE_BIT(PM_FREEZE));
	set_now(pw, PM_FREEZE);
	at(pw, MS(SLEEP_MS));
	g_assert_cmpint(successes(pw), ==, 1);
	at(pw, MS(2500));
	g_assert_cmpint(successes(pw), ==, 2);
	power_teardown(pw);
}

static void test_wakelock_blocks(void)
{
	struct power *pw = power_setup();

	set_now(pw, PM_MEM);
	at(pw, MS(SLEEP_MS));
	g_assert_cmpint(successes(pw), ==, 1);

	/* Locked during the pause after the first suspend. */
	at(pw, MS(1200));
	g_assert_cmpint(wakelocks_lock(pw->wakelocks, "hold", 4, 0, NULL), ==,
			0);
	at(pw, MS(10000));
	g_assert_cmpint(successes(pw), ==, 1);
	g_assert_cmpint(suspend_get_stats(pw->suspend)->fail, ==, 0);
	g_assert_cmpint(stats_of(pw, "hold").prevent_suspend_time_ms, ==, 8800);

	/* Released: the next suspend starts at once (no pause). */
	g_assert_cmpint(wakelocks_unlock(pw->wakelocks, "hold", 4, NULL), ==,
			0);
	advance(pw, 0);
	at(pw, MS(11000) - 1);
	g_assert_cmpint(successes(pw), ==, 1);
	at(pw, MS(11000));
	g_assert_cmpint(successes(pw), ==, 2);
	/* Nothing happened during that one: pause again. */
	at(pw, MS(12500) - 1);
	g_assert_cmpint(successes(pw), ==, 2);
	at(pw, MS(12500));
	g_assert_cmpint(successes(pw), ==, 3);

	/* A lock with a timeout blocks until it expires. */
	at(pw, MS(12600));
	g_assert_cmpint(wakelocks_lock(pw->wakelocks, "t", 1,
				       G_GUINT64_CONSTANT(3000000000), NULL),
			==, 0);
	at(pw, MS(15600) - 1);
	g_assert_cmpint(successes(pw), ==, 3);
	at(pw, MS(15600));
	at(pw, MS(16600) - 1);
	g_assert_cmpint(successes(pw), ==, 3);
	at(pw, MS(16600));
	g_assert_cmpint(successes(pw), ==, 4);
	g_assert_cmpint(suspend_get_stats(pw->suspend)->fail, ==, 0);

	power_teardown(pw);
}

/* An event while the simulated system sleeps ends the sleep early (the
 * engine's event hook, backend wake()); the cycle registered an event, so
 * the next suspend follows without the 0.5 s pause. */
static void test_event_during_suspend(void)
{
	struct power *pw = power_setup();
	struct wakeup_source *ws;
	int s;

	ws = wakeup_source_register(pw->engine, "irq", 3);
	set_now(pw, PM_MEM);
	at(pw, MS(200));
	g_assert_cmpint(successes(pw), ==, 0);
	wakeup_source_event(ws, 0);
	advance(pw, 0);
	/* The simulated sleep resumed (0): a success. */
	s = successes(pw);
	g_assert_cmpint(s, ==, 1);
	g_assert_cmpint(suspend_get_stats(pw->suspend)->fail, ==, 0);
	g_assert_true(suspend_in_progress(pw->suspend));
	/* Suspended again from T0 + 200 ms. */
	at(pw, MS(1200) - 1);
	g_assert_cmpint(successes(pw), ==, s);
	at(pw, MS(1200));
	g_assert_cmpint(successes(pw), ==, s + 1);
	at(pw, MS(2700) - 1);
	g_assert_cmpint(successes(pw), ==, s + 1);
	at(pw, MS(2700));
	g_assert_cmpint(successes(pw), ==, s + 2);

	/* A wake lock taken during a suspend: the sleep ends, and no
	 * further suspend until it is released. */
	at(pw, MS(3300));
	g_assert_true(suspend_in_progress(pw->suspend));
	g_assert_cmpint(wakelocks_lock(pw->wakelocks, "hold", 4, 0, NULL), ==,
			0);
	advance(pw, 0);
	g_assert_false(suspend_in_progress(pw->suspend));
	g_assert_cmpint(successes(pw), ==, s + 3);
	s = successes(pw);
	at(pw, MS(9000));
	g_assert_cmpint(successes(pw), ==, s);
	g_assert_cmpint(wakelocks_unlock(pw->wakelocks, "hold", 4, NULL), ==,
			0);
	at(pw, MS(10000) - 1);
	g_assert_cmpint(successes(pw), ==, s);
	at(pw, MS(10000));
	g_assert_cmpint(successes(pw), ==, s + 1);

	wakeup_source_unregister(ws);
	power_teardown(pw);
}

static void test_off_during_suspend(void)
{
	struct power *pw = power_setup();
	struct done off = { 0, 1 };
	guint c;

	set_now(pw, PM_MEM);
	at(pw, MS(300));
	g_assert_true(suspend_in_progress(pw->suspend));
	g_assert_cmpint(successes(pw), ==, 0);
	c = count_of(pw);

	/* A suspend is in progress: the switch waits (PF_PENDING).  The
	 * "autosleep" event ends the simulated sleep early (autosleep.h), so
	 * done comes as soon as the loop runs, not at SLEEP_MS. */
	g_assert_cmpint(
		autosleep_set_state(pw->autosleep, PM_ON, NULL, done_cb, &off),
		==, PF_PENDING);
	g_assert_cmpint(off.calls, ==, 0);
	g_assert_cmpuint(wakeup_events_in_progress(pw->engine), ==, 1);
	advance(pw, 0);
	g_assert_cmpint(off.calls, ==, 1);
	g_assert_cmpint(off.error, ==, 0);
	g_assert_false(suspend_in_progress(pw->suspend));
	g_assert_cmpint(autosleep_state(pw->autosleep), ==, PM_ON);
	g_assert_cmpuint(count_of(pw), ==, c + 1);
	g_assert_cmpuint(wakeup_events_in_progress(pw->engine), ==, 0);
	/* That suspend resumed normally. */
	g_assert_cmpint(successes(pw), ==, 1);

	/* And no more suspends. */
	at(pw, MS(20000));
	g_assert_cmpint(successes(pw), ==, 1);
	g_assert_cmpint(suspend_get_stats(pw->suspend)->fail, ==, 0);
	g_assert_false(suspend_in_progress(pw->suspend));

	power_teardown(pw);
}

static void test_off_during_pause(void)
{
	struct power *pw = power_setup();

	set_now(pw, PM_MEM);
	at(pw, MS(1200));
	g_assert_cmpint(successes(pw), ==, 1);
	g_assert_false(suspend_in_progress(pw->suspend));
	set_now(pw, PM_ON);
	at(pw, MS(20000));
	g_assert_cmpint(successes(pw), ==, 1);

	/* prevent_suspend_time no longer grows. */
	{
		struct wakeup_source *ws =
			wakeup_source_register(pw->engine, "probe", 5);
		struct wakeup_stats ps;

		wakeup_source_stay_awake(ws);
		advance(pw, MS(300));
		wakeup_source_get_stats(ws, &ps);
		g_assert_cmpint(ps.prevent_suspend_time_ms, ==, 0);
		wakeup_source_relax(ws);
		wakeup_source_unregister(ws);
	}

	/* On again. */
	set_now(pw, PM_MEM);
	at(pw, MS(20300 + SLEEP_MS));
	g_assert_cmpint(successes(pw), ==, 2);
	power_teardown(pw);
}

static void test_counts_event(void)
{
	struct power *pw = power_setup();
	struct done d = { 0, 1 };
	guint c0;

	c0 = count_of(pw);
	g_assert_nonnull(find_ws(pw, "autosleep"));

	/* "off" when already off counts too. */
	set_now(pw, PM_ON);
	g_assert_cmpuint(count_of(pw), ==, c0 + 1);
	g_assert_cmpuint(wakeup_events_in_progress(pw->engine), ==, 0);
	set_now(pw, PM_ON);
	g_assert_cmpuint(count_of(pw), ==, c0 + 2);

	set_now(pw, PM_MEM);
	g_assert_cmpuint(count_of(pw), ==, c0 + 3);

	/* Switching state while on (during the pause: at once). */
	at(pw, MS(1200));
	set_now(pw, PM_FREEZE);
	g_assert_cmpuint(count_of(pw), ==, c0 + 4);

	/* Switching during a suspend: pending, still one event. */
	at(pw, MS(2000));
	g_assert_true(suspend_in_progress(pw->suspend));
	g_assert_cmpint(
		autosleep_set_state(pw->autosleep, PM_MEM, NULL, done_cb, &d),
		==, PF_PENDING);
	advance(pw, 0);
	g_assert_cmpint(d.calls, ==, 1);
	g_assert_cmpint(d.error, ==, 0);
	g_assert_cmpint(autosleep_state(pw->autosleep), ==, PM_MEM);
	g_assert_cmpuint(count_of(pw), ==, c0 + 5);

	at(pw, MS(2000) + MS(SLEEP_MS) + MS(100));
	set_now(pw, PM_ON);
	g_assert_cmpuint(count_of(pw), ==, c0 + 6);
	g_assert_cmpuint(stats_of(pw, "autosleep").event_count, ==, 6);
	g_assert_cmpuint(stats_of(pw, "autosleep").active_count, ==, 6);
	g_assert_false(wakeup_source_active(find_ws(pw, "autosleep")));

	power_teardown(pw);
}

static void test_invalid_state(void)
{
	struct power *pw = power_setup();
	struct done d = { 0, 1 };
	guint c0 = count_of(pw);

	g_assert_cmpint(
		autosleep_set_state(pw->autosleep, PM_DISK, NULL, done_cb, &d),
		==, -EINVAL);
	g_assert_cmpint(autosleep_set_state(pw->autosleep, PM_STANDBY, NULL,
					    done_cb, &d),
			==, -EINVAL);
	advance(pw, 0);
	advance(pw, MS(5000));
	g_assert_cmpint(d.calls, ==, 0);
	g_assert_cmpint(autosleep_state(pw->autosleep), ==, PM_ON);
	/* A refused write registers no event. */
	g_assert_cmpuint(count_of(pw), ==, c0);
	g_assert_cmpuint(stats_of(pw, "autosleep").event_count, ==, 0);
	g_assert_cmpint(successes(pw), ==, 0);

	/* Refused while on: the state stays. */
	set_now(pw, PM_MEM);
	g_assert_cmpint(
		autosleep_set_state(pw->autosleep, PM_DISK, NULL, done_cb, &d),
		==, -EINVAL);
	advance(pw, 0);
	g_assert_cmpint(d.calls, ==, 0);
	g_assert_cmpint(autosleep_state(pw->autosleep), ==, PM_MEM);
	at(pw, MS(5000) + MS(SLEEP_MS));
	g_assert_cmpint(successes(pw), ==, 1);
	power_teardown(pw);
}

/* The transition lock: an autosleep change waits for whoever holds it. */
struct locked {
	int calls;
};

static void locked_cb(gpointer data)
{
	struct locked *l = data;

	l->calls++;
}

static void test_waits_for_lock(void)
{
	struct power *pw = power_setup();
	struct done d = { 0, 1 };
	struct locked l = { 0 };
	guint c0 = count_of(pw);

	/* Free: taken at once, func not called. */
	g_assert_true(suspend_lock(pw->suspend, locked_cb, &l));
	advance(pw, 0);
	g_assert_cmpint(l.calls, ==, 0);

	g_assert_cmpint(
		autosleep_set_state(pw->autosleep, PM_ON, NULL, done_cb, &d),
		==, PF_PENDING);
	advance(pw, 0);
	advance(pw, MS(100));
	g_assert_cmpint(d.calls, ==, 0);
	/* The autosleep source is held while it waits. */
	g_assert_cmpuint(wakeup_events_in_progress(pw->engine), ==, 1);

	suspend_unlock(pw->suspend);
	advance(pw, 0);
	g_assert_cmpint(d.calls, ==, 1);
	g_assert_cmpint(d.error, ==, 0);
	g_assert_cmpuint(count_of(pw), ==, c0 + 1);
	g_assert_cmpuint(wakeup_events_in_progress(pw->engine), ==, 0);
	g_assert_cmpint(l.calls, ==, 0);

	/* A second taker queues behind the first and gets func called. */
	g_assert_true(suspend_lock(pw->suspend, locked_cb, &l));
	g_assert_false(suspend_lock(pw->suspend, locked_cb, &l));
	advance(pw, 0);
	g_assert_cmpint(l.calls, ==, 0);
	suspend_unlock(pw->suspend);
	advance(pw, 0);
	g_assert_cmpint(l.calls, ==, 1);
	suspend_unlock(pw->suspend);
	/* Free again. */
	g_assert_true(suspend_lock(pw->suspend, locked_cb, &l));
	suspend_unlock(pw->suspend);
	g_assert_cmpint(l.calls, ==, 1);
	power_teardown(pw);
}

/* Takes the (free) transition lock and calls suspend_enter(); returns what
 * it returned.  The lock stays held. */
static int enter(struct power *pw, struct done *d)
{
	struct locked l = { 0 };
	int ret;

	d->calls = 0;
	d->error = 1;
	g_assert_true(suspend_lock(pw->suspend, locked_cb, &l));
	ret = suspend_enter(pw->suspend, PM_MEM, done_cb, d);
	g_assert_cmpint(l.calls, ==, 0);
	return ret;
}

static void test_enter_stale_handshake(void)
{
	struct power *pw = power_setup();
	const struct suspend_stats *st = suspend_get_stats(pw->suspend);
	struct wakeup_source *ws;
	struct done d;
	guint c;

	g_assert_cmpint(st->success, ==, 0);
	g_assert_cmpint(st->fail, ==, 0);
	g_assert_cmpint(st->last_failed_errno, ==, 0);
	g_assert_cmpstr(st->last_failed_step, ==, "");
	g_assert_cmpstr(st->last_failed_dev, ==, "");

	ws = wakeup_source_register(pw->engine, "ws", 2);

	/* Armed, then the count changes: -EBUSY at once, done never called,
	 * no sleep. */
	g_assert_true(wakeup_get_count(pw->engine, &c));
	g_assert_true(wakeup_save_count(pw->engine, c));
	wakeup_source_event(ws, 0);
	g_assert_cmpint(enter(pw, &d), ==, -EBUSY);
	g_assert_false(suspend_in_progress(pw->suspend));
	advance(pw, 0);
	advance(pw, MS(2 * SLEEP_MS));
	g_assert_cmpint(d.calls, ==, 0);
	suspend_unlock(pw->suspend);
	st = suspend_get_stats(pw->suspend);
	g_assert_cmpint(st->success, ==, 0);
	g_assert_cmpint(st->fail, ==, 1);
	g_assert_cmpint(st->failed_freeze, ==, 1);
	g_assert_cmpint(st->failed_prepare, ==, 0);
	g_assert_cmpint(st->failed_suspend, ==, 0);
	g_assert_cmpint(st->last_failed_errno, ==, -16);
	g_assert_cmpstr(st->last_failed_step, ==, "freeze");
	g_assert_cmpstr(st->last_failed_dev, ==, "");
	/* The handshake is over. */
	wakeup_source_event(ws, 0);
	g_assert_cmpuint(stats_of(pw, "ws").wakeup_count, ==, 1);

	/* Armed, then a source becomes active. */
	g_assert_true(wakeup_get_count(pw->engine, &c));
	g_assert_true(wakeup_save_count(pw->engine, c));
	wakeup_source_stay_awake(ws);
	g_assert_cmpint(enter(pw, &d), ==, -EBUSY);
	advance(pw, 0);
	g_assert_cmpint(d.calls, ==, 0);
	suspend_unlock(pw->suspend);
	wakeup_source_relax(ws);
	st = suspend_get_stats(pw->suspend);
	g_assert_cmpint(st->success, ==, 0);
	g_assert_cmpint(st->fail, ==, 2);
	g_assert_cmpint(st->failed_freeze, ==, 2);
	g_assert_cmpint(st->last_failed_errno, ==, -16);
	g_assert_cmpstr(st->last_failed_step, ==, "freeze");

	/* Armed and still current: it sleeps SLEEP_MS. */
	g_assert_true(wakeup_get_count(pw->engine, &c));
	g_assert_true(wakeup_save_count(pw->engine, c));
	g_assert_cmpint(enter(pw, &d), ==, PF_PENDING);
	g_assert_true(suspend_in_progress(pw->suspend));
	advance(pw, MS(SLEEP_MS) - 1);
	g_assert_cmpint(d.calls, ==, 0);
	advance(pw, 1);
	g_assert_cmpint(d.calls, ==, 1);
	g_assert_cmpint(d.error, ==, 0);
	g_assert_false(suspend_in_progress(pw->suspend));
	suspend_unlock(pw->suspend);
	st = suspend_get_stats(pw->suspend);
	g_assert_cmpint(st->success, ==, 1);
	g_assert_cmpint(st->fail, ==, 2);
	/* Every attempt ends the handshake. */
	wakeup_source_event(ws, 0);
	g_assert_cmpuint(stats_of(pw, "ws").wakeup_count, ==, 2);

	/* Without the handshake an active source does not stop it. */
	wakeup_source_stay_awake(ws);
	g_assert_cmpint(enter(pw, &d), ==, PF_PENDING);
	advance(pw, MS(SLEEP_MS));
	g_assert_cmpint(d.calls, ==, 1);
	g_assert_cmpint(d.error, ==, 0);
	suspend_unlock(pw->suspend);
	wakeup_source_relax(ws);
	g_assert_cmpint(suspend_get_stats(pw->suspend)->success, ==, 2);
	g_assert_cmpint(suspend_get_stats(pw->suspend)->fail, ==, 2);

	/* A failed attempt also ends the handshake (the second failure
	 * above): a stale count written before cannot arm a later one. */
	wakeup_source_unregister(ws);
	power_teardown(pw);
}

/* A backend whose suspends fail with -EIO while "broken", else succeed at
 * once; it records when it was called. */
struct flaky {
	struct backend base;
	struct pf_clock *clock;
	gboolean broken;
	GArray *calls; /* gint64 times */
};

static guint flaky_states(struct backend *be)
{
	(void)be;
	return PM_STATE_BIT(PM_MEM);
}

static int flaky_suspend(struct backend *be, enum pm_state state,
			 backend_done_func done, gpointer data)
{
	struct flaky *f = (struct flaky *)be;
	gint64 now = pf_clock_now(f->clock);

	(void)state;
	g_array_append_val(f->calls, now);
	if (f->broken)
		return -EIO;
	done(0, data); /* instant resume (allowed for a test backend) */
	return PF_PENDING;
}

static void flaky_free(struct backend *be)
{
	struct flaky *f = (struct flaky *)be;

	g_array_free(f->calls, TRUE);
	g_free(f);
}

static const struct backend_ops flaky_ops = {
	.name = "flaky",
	.states = flaky_states,
	.suspend = flaky_suspend,
	.free = flaky_free,
};

static gint64 call_at(struct flaky *f, guint i)
{
	g_assert_cmpuint(i, <, f->calls->len);
	return g_array_index(f->calls, gint64, i) - T0;
}

/* Backend failures: retried after 0.5, 1, 2, 4 ... s, capped at 60 s; a
 * success resets the back-off; failures count in suspend_stats. */
static void test_backoff(void)
{
	struct pf_clock *clock = pf_clock_new_fake(T0);
	struct flaky *f = g_new0(struct flaky, 1);
	struct power_options opts = { 100, 300, FALSE, NULL };
	struct power *pw;
	gint64 expect = 0, pause = MS(500);

	f->base.ops = &flaky_ops;
	f->clock = clock;
	f->broken = TRUE;
	f->calls = g_array_new(FALSE, FALSE, sizeof(gint64));
	/* Each failure logs a warning, by design. */
	g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
	pw = power_new(clock, &f->base, &opts);
	set_now(pw, PM_MEM);
	for (guint i = 0; i < 10; i++) {
		at(pw, expect);
		g_assert_cmpuint(f->calls->len, ==, i + 1);
		g_assert_cmpint(call_at(f, i), ==, expect);
		expect += pause;
		pause = MIN(pause * 2, MS(60000));
	}
	/* 0.5+1+2+...+64 capped: the 9th and 10th pauses are 60 s. */
	g_assert_cmpint(call_at(f, 9) - call_at(f, 8), ==, MS(60000));
	g_assert_cmpint(suspend_get_stats(pw->suspend)->fail, ==, 10);
	g_assert_cmpint(suspend_get_stats(pw->suspend)->failed_suspend, ==, 10);
	g_assert_cmpint(suspend_get_stats(pw->suspend)->last_failed_errno, ==,
			-EIO);
	g_assert_cmpstr(suspend_get_stats(pw->suspend)->last_failed_step, ==,
			"suspend");
	/* Repaired: the next attempt succeeds, and after it the usual 0.5 s
	 * unknown-wakeup pause applies, not the back-off. */
	f->broken = FALSE;
	at(pw, expect);
	g_assert_cmpuint(f->calls->len, ==, 11);
	f->broken = TRUE;
	at(pw, expect + MS(500));
	g_assert_cmpuint(f->calls->len, ==, 12);
	/* ... and a new failure starts again from 0.5 s. */
	at(pw, expect + MS(1000));
	g_assert_cmpuint(f->calls->len, ==, 13);
	power_teardown(pw);
	g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING |
			       G_LOG_LEVEL_CRITICAL);
}

/* The kernel's single work item: turning autosleep off stops no run.  A
 * run that waited for a lock to go still arms the handshake when it goes,
 * sees "off" only then and stops, leaving the handshake armed: the next
 * direct suspend fails if an event came in (kernel-observed, SPEC.md). */
static void test_off_leaves_waiting_run_arming(void)
{
	struct power *pw = power_setup();
	struct wakeup_source *z;
	struct done d;

	g_assert_cmpint(wakelocks_lock(pw->wakelocks, "h", 1, 0, NULL), ==, 0);
	set_now(pw, PM_MEM);
	set_now(pw, PM_ON);
	g_assert_cmpint(wakelocks_unlock(pw->wakelocks, "h", 1, NULL), ==, 0);
	advance(pw, MS(500));
	g_assert_cmpint(successes(pw), ==, 0);
	z = wakeup_source_register(pw->engine, "z", 1);
	wakeup_source_stay_awake(z);
	wakeup_source_relax(z);
	g_assert_cmpuint(stats_of(pw, "z").wakeup_count, ==, 1);
	g_assert_cmpint(enter(pw, &d), ==, -EBUSY);
	suspend_unlock(pw->suspend);
	g_assert_cmpstr(suspend_get_stats(pw->suspend)->last_failed_step, ==,
			"freeze");
	/* Once: the attempt ended the handshake. */
	g_assert_cmpint(enter(pw, &d), ==, PF_PENDING);
	advance(pw, MS(SLEEP_MS));
	g_assert_cmpint(d.calls, ==, 1);
	g_assert_cmpint(d.error, ==, 0);
	suspend_unlock(pw->suspend);
	wakeup_source_unregister(z);
	power_teardown(pw);
}

/* A second "mem" while the work runs queues one more run; after "off" that
 * run still arms the handshake (the kernel's second SPEC.md case). */
static void test_requeued_run_arms_after_off(void)
{
	struct power *pw = power_setup();
	struct wakeup_source *z;
	struct done off = { 0, 1 }, d;
	int ret;

	g_assert_cmpint(wakelocks_lock(pw->wakelocks, "x", 1, 0, NULL), ==, 0);
	set_now(pw, PM_MEM);
	set_now(pw, PM_MEM);
	g_assert_cmpint(wakelocks_unlock(pw->wakelocks, "x", 1, NULL), ==, 0);
	advance(pw, MS(100));
	g_assert_true(suspend_in_progress(pw->suspend));
	ret = autosleep_set_state(pw->autosleep, PM_ON, NULL, done_cb, &off);
	g_assert_cmpint(ret, ==, PF_PENDING);
	advance(pw, 0);
	g_assert_cmpint(off.calls, ==, 1);
	advance(pw, MS(1000));
	/* One suspend only: the second run armed the handshake and stopped. */
	g_assert_cmpint(successes(pw), ==, 1);
	z = wakeup_source_register(pw->engine, "z", 1);
	wakeup_source_stay_awake(z);
	wakeup_source_relax(z);
	g_assert_cmpuint(stats_of(pw, "z").wakeup_count, ==, 1);
	g_assert_cmpint(enter(pw, &d), ==, -EBUSY);
	suspend_unlock(pw->suspend);
	wakeup_source_unregister(z);
	power_teardown(pw);
}

/* "mem" written while a run waits for a lock: the run is in progress, so
 * the work is queued to run once more after it; with autosleep off by then,
 * neither run suspends. */
static void test_write_while_running_runs_again(void)
{
	struct power *pw = power_setup();

	g_assert_cmpint(wakelocks_lock(pw->wakelocks, "x", 1, 0, NULL), ==, 0);
	set_now(pw, PM_MEM);
	advance(pw, MS(100));
	set_now(pw, PM_MEM);
	set_now(pw, PM_ON);
	g_assert_cmpint(wakelocks_unlock(pw->wakelocks, "x", 1, NULL), ==, 0);
	at(pw, MS(5000));
	g_assert_cmpint(successes(pw), ==, 0);
	g_assert_cmpint(suspend_get_stats(pw->suspend)->fail, ==, 0);
	g_assert_false(suspend_in_progress(pw->suspend));
	power_teardown(pw);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/autosleep/enable-suspends", test_enable_suspends);
	g_test_add_func("/autosleep/freeze", test_freeze);
	g_test_add_func("/autosleep/backoff", test_backoff);
	g_test_add_func("/autosleep/wakelock-blocks", test_wakelock_blocks);
	g_test_add_func("/autosleep/event-during-suspend",
			test_event_during_suspend);
	g_test_add_func("/autosleep/off-during-suspend",
			test_off_during_suspend);
	g_test_add_func("/autosleep/off-during-pause", test_off_during_pause);
	g_test_add_func("/autosleep/counts-event", test_counts_event);
	g_test_add_func("/autosleep/invalid-state", test_invalid_state);
	g_test_add_func("/autosleep/waits-for-lock", test_waits_for_lock);
	g_test_add_func("/suspend/enter-stale-handshake",
			test_enter_stale_handshake);
	g_test_add_func("/autosleep/off-leaves-waiting-run-arming",
			test_off_leaves_waiting_run_arming);
	g_test_add_func("/autosleep/requeued-run-arms-after-off",
			test_requeued_run_arms_after_off);
	g_test_add_func("/autosleep/write-while-running-runs-again",
			test_write_while_running_runs_again);
	return g_test_run();
}
