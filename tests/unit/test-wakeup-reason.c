/* test-wakeup-reason.c - unit tests of /sys/kernel/wakeup_reasons's record
 * (src/engine/wakeup-reason.c) and of how the suspend path fills it (src/engine/suspend.c),
 * on the simulated backend and a fake clock.  The expected texts are the
 * Android common kernel's formats.
 */
#include <string.h>
#include <glib.h>

#include "powerfs/engine/backend.h"
#include "powerfs/engine/clock.h"
#include "powerfs/engine/power.h"
#include "powerfs/engine/suspend.h"
#include "powerfs/engine/wakelock.h"
#include "powerfs/engine/wakeup-reason.h"
#include "powerfs/engine/wakeup.h"

#define T0 G_GINT64_CONSTANT(1000000000)
#define MS(x) ((gint64)(x)*1000)
#define SLEEP_MS 1000

static struct power *power_setup(void)
{
	struct pf_clock *clock = pf_clock_new_fake(T0);
	struct power_options opts = { 100, 300, FALSE, NULL };

	return power_new(
		clock,
		backend_simulate_new(clock, SLEEP_MS, PM_STATE_BIT(PM_MEM)),
		&opts);
}

static char *resume_reason(struct power *pw)
{
	GString *out = g_string_new(NULL);

	wakeup_reason_show_resume(pw->reasons, out);
	return g_string_free(out, FALSE);
}

static char *suspend_time(struct power *pw)
{
	GString *out = g_string_new(NULL);

	wakeup_reason_show_times(pw->reasons, out);
	return g_string_free(out, FALSE);
}

#define assert_files(pw, reason, times)                  \
	do {                                             \
		g_autofree char *r_ = resume_reason(pw); \
		g_autofree char *t_ = suspend_time(pw);  \
		g_assert_cmpstr(r_, ==, reason);         \
		g_assert_cmpstr(t_, ==, times);          \
	} while (0)

static void done_cb(int error, gpointer data)
{
	*(int *)data = error;
}

/* One suspend to mem under the transition lock; returns what
 * suspend_enter() said and, through *done, what the attempt ended with. */
static int enter(struct power *pw, int *done)
{
	int ret;

	*done = 1;
	g_assert_true(suspend_lock(pw->suspend, NULL, NULL));
	ret = suspend_enter(pw->suspend, PM_MEM, done_cb, done);
	if (ret != PF_PENDING)
		suspend_unlock(pw->suspend);
	return ret;
}

static void lock(struct power *pw, const char *name)
{
	g_assert_cmpint(
		wakelocks_lock(pw->wakelocks, name, strlen(name), 0, NULL), ==,
		0);
}

static void unlock(struct power *pw, const char *name)
{
	g_assert_cmpint(
		wakelocks_unlock(pw->wakelocks, name, strlen(name), NULL), ==,
		0);
}

static void test_initially_empty(void)
{
	struct power *pw = power_setup();

	assert_files(pw, "", "0.000000000 0.000000000\n");
	power_free(pw);
}

/* A simulated sleep that runs its course: no IRQ, its length is the
 * sleep, and nothing else of the attempt took time. */
static void test_simulated_sleep(void)
{
	struct power *pw = power_setup();
	int done;

	g_assert_cmpint(enter(pw, &done), ==, PF_PENDING);
	/* Read during the attempt: the reasons are cleared already. */
	assert_files(pw, "", "0.000000000 0.000000000\n");
	pf_clock_fake_advance(pw->clock, MS(SLEEP_MS));
	g_assert_cmpint(done, ==, 0);
	suspend_unlock(pw->suspend);
	assert_files(pw, "-1 simulated sleep ended",
		     "0.000000000 1.000000000\n");
	power_free(pw);
}

/* A wakeup event ends a simulated sleep early and is why it woke. */
static void test_woken_by_event(void)
{
	struct power *pw = power_setup();
	int done;

	g_assert_cmpint(enter(pw, &done), ==, PF_PENDING);
	pf_clock_fake_advance(pw->clock, MS(300));
	lock(pw, "radio");
	lock(pw, "second");
	pf_clock_fake_advance(pw->clock, 1);
	g_assert_cmpint(done, ==, 0);
	suspend_unlock(pw->suspend);
	assert_files(pw, "-1 radio", "0.000000000 0.300000000\n");
	power_free(pw);
}

/* The handshake fails: the kernel names the sources when it aborts. */
static void test_abort_names_sources(void)
{
	struct power *pw = power_setup();
	guint count;
	int done;

	lock(pw, "x");
	pf_clock_fake_advance(pw->clock, MS(5));
	lock(pw, "y");
	pf_clock_fake_advance(pw->clock, MS(5));
	unlock(pw, "y");
	pf_clock_fake_advance(pw->clock, MS(5));
	unlock(pw, "x");
	g_assert_true(wakeup_get_count(pw->engine, &count));
	g_assert_true(wakeup_save_count(pw->engine, count));
	/* y was relaxed before x: x changed last. */
	lock(pw, "y");
	unlock(pw, "y");
	pf_clock_fake_advance(pw->clock, MS(1));
	lock(pw, "x");
	unlock(pw, "x");
	g_assert_cmpint(enter(pw, &done), ==, -EBUSY);
	assert_files(pw, "Abort: Last active Wakeup Source: x",
		     "0.000000000 0.000000000\n");

	/* Active ones, newest first, each followed by a space. */
	g_assert_true(wakeup_get_count(pw->engine, &count));
	g_assert_true(wakeup_save_count(pw->engine, count));
	lock(pw, "x");
	lock(pw, "z");
	g_assert_cmpint(enter(pw, &done), ==, -EBUSY);
	assert_files(pw, "Abort: Pending Wakeup Sources: z x ",
		     "0.000000000 0.000000000\n");
	power_free(pw);
}

/* The kernel's buffer holds MAX_SUSPEND_ABORT_LEN - 1 characters. */
static void test_abort_text_is_cut(void)
{
	struct power *pw = power_setup();
	g_autofree char *reason = NULL;
	guint count;
	int done;

	g_assert_true(wakeup_get_count(pw->engine, &count));
	g_assert_true(wakeup_save_count(pw->engine, count));
	for (int i = 0; i < 10; i++) {
		g_autofree char *name = g_strdup_printf(
			"%d-%s", i, "a-rather-long-wake-lock-name");

		lock(pw, name);
	}
	g_assert_cmpint(enter(pw, &done), ==, -EBUSY);
	reason = resume_reason(pw);
	g_assert_cmpuint(strlen(reason), ==, strlen("Abort: ") + 255);
	g_assert_true(g_str_has_prefix(reason,
				       "Abort: Pending Wakeup Sources: "
				       "9-a-rather-long-wake-lock-name "
				       "8-a-rather-long-wake-lock-name "));
	power_free(pw);
}

/* IRQs, as a real backend reports them: ascending, each once, with the
 * handler's name; the time asleep is the boot clock's jump. */
static void test_irqs(void)
{
	struct pf_clock *clock = pf_clock_new_fake(T0);
	struct wakeup_reason *wr = wakeup_reason_new(clock);
	g_autoptr(GString) out = g_string_new(NULL);

	wakeup_reason_log_irq(wr, 3, "outside"); /* no attempt yet */
	wakeup_reason_begin(wr);
	pf_clock_fake_advance(clock, MS(120));
	pf_clock_fake_host_sleep(clock, MS(5000));
	wakeup_reason_log_irq(wr, 8, "rtc0");
	wakeup_reason_log_irq(wr, 1, NULL);
	wakeup_reason_log_irq(wr, 8, "again");
	wakeup_reason_log_abort(wr, "too late");
	pf_clock_fake_advance(clock, MS(30));
	wakeup_reason_end(wr, -1);
	wakeup_reason_log_irq(wr, 9, "after");
	wakeup_reason_show_resume(wr, out);
	g_assert_cmpstr(out->str, ==, "1 (unnamed)\n8 rtc0\n");
	g_string_truncate(out, 0);
	wakeup_reason_show_times(wr, out);
	g_assert_cmpstr(out->str, ==, "0.150000000 5.000000000\n");

	/* A wakeup that is no IRQ comes first: IRQs are ignored. */
	wakeup_reason_begin(wr);
	wakeup_reason_log_abnormal(wr, "alarmtimer");
	wakeup_reason_log_irq(wr, 8, "rtc0");
	wakeup_reason_log_abort(wr, "ignored too");
	wakeup_reason_end(wr, -1);
	g_string_truncate(out, 0);
	wakeup_reason_show_resume(wr, out);
	g_assert_cmpstr(out->str, ==, "-1 alarmtimer");
	wakeup_reason_free(wr);
	pf_clock_free(clock);
}

/* A container's sleep (freeze:CGROUP): the monotonic clock runs while the
 * container is frozen, the backend says how long that was, and a sleep of
 * the host within it counts as asleep, not as time the attempt took. */
static void test_container_sleep_spans_a_host_sleep(void)
{
	struct pf_clock *clock = pf_clock_new_fake(T0);
	struct wakeup_reason *wr = wakeup_reason_new(clock);
	g_autoptr(GString) out = g_string_new(NULL);

	wakeup_reason_begin(wr);
	pf_clock_fake_advance(clock, MS(100));	/* freezing */
	pf_clock_fake_advance(clock, MS(2000)); /* frozen */
	pf_clock_fake_host_sleep(clock, MS(5000));
	pf_clock_fake_advance(clock, MS(50)); /* frozen, then the thaw */
	wakeup_reason_end(wr, MS(7050) * 1000);
	wakeup_reason_show_times(wr, out);
	g_assert_cmpstr(out->str, ==, "0.100000000 7.050000000\n");
	wakeup_reason_free(wr);
	pf_clock_free(clock);
}

static void find_alarmtimer(const struct wakeup_source *ws, gpointer data)
{
	const struct wakeup_source **found = data;

	if (!strcmp(wakeup_source_name(ws), "alarmtimer"))
		*found = ws;
}

/* A backend that sleeps until the test says it woke, and how. */
struct held {
	struct backend base;
	backend_done_func done;
	gpointer data;
	guint timeout_seen;
};

static guint held_states(struct backend *be)
{
	(void)be;
	return PM_STATE_BIT(PM_FREEZE) | PM_STATE_BIT(PM_MEM);
}

static int held_suspend(struct backend *be, enum pm_state state,
			backend_done_func done, gpointer data)
{
	struct held *h = (struct held *)be;

	(void)state;
	h->done = done;
	h->data = data;
	h->timeout_seen = be->freeze_timeout_ms;
	return PF_PENDING;
}

static void held_free(struct backend *be)
{
	g_free(be);
}

static const struct backend_ops held_ops = {
	.name = "held",
	.states = held_states,
	.suspend = held_suspend,
	.free = held_free,
};

/* The backend names the wakeup source that woke the system (an alarm):
 * the core signals it while the handshake is armed, so that it counts in
 * its wakeup_count column, and it is the reason.  Its "mem" can mean what
 * it says (here s2idle only), and it is told pm_freeze_timeout. */
static void test_wake_source_of_the_backend(void)
{
	struct pf_clock *clock = pf_clock_new_fake(T0);
	struct power_options opts = { 100, 300, FALSE, NULL };
	struct held *h = g_new0(struct held, 1);
	const struct wakeup_source *alarm = NULL;
	struct power *pw;
	struct wakeup_stats st;
	guint count;
	int done = 1;

	h->base.ops = &held_ops;
	h->base.mem_sleep_states = PM_STATE_BIT(PM_FREEZE);
	pw = power_new(clock, &h->base, &opts);
	g_assert_cmpuint(suspend_mem_sleep_states(pw->suspend), ==,
			 PM_STATE_BIT(PM_FREEZE));
	g_assert_cmpint(suspend_settings(pw->suspend)->mem_sleep, ==,
			PM_FREEZE);
	suspend_settings(pw->suspend)->freeze_timeout_ms = 1234;
	g_assert_true(wakeup_get_count(pw->engine, &count));
	g_assert_true(wakeup_save_count(pw->engine, count));
	g_assert_true(suspend_lock(pw->suspend, NULL, NULL));
	g_assert_cmpint(suspend_enter(pw->suspend, PM_MEM, done_cb, &done), ==,
			PF_PENDING);
	g_assert_cmpuint(h->timeout_seen, ==, 1234);
	pf_clock_fake_advance(clock, MS(2000));
	h->base.wake_source = "alarmtimer";
	h->base.slept_ns = MS(2000) * 1000;
	h->done(0, h->data);
	g_assert_cmpint(done, ==, 0);
	suspend_unlock(pw->suspend);
	g_assert_null(h->base.wake_source);
	assert_files(pw, "-1 alarmtimer", "0.000000000 2.000000000\n");
	/* 0 ms: signalled and relaxed at once. */
	g_assert_null(wakeup_first_active(pw->engine));
	g_assert_true(wakeup_get_count(pw->engine, &count));
	g_assert_cmpuint(count, ==, 1);
	wakeup_foreach_source(pw->engine, find_alarmtimer, &alarm);
	g_assert_nonnull(alarm);
	wakeup_source_get_stats(alarm, &st);
	g_assert_cmpuint(st.event_count, ==, 1);
	g_assert_cmpuint(st.wakeup_count, ==, 1);
	power_free(pw);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/wakeup-reason/initially-empty", test_initially_empty);
	g_test_add_func("/wakeup-reason/simulated-sleep", test_simulated_sleep);
	g_test_add_func("/wakeup-reason/woken-by-event", test_woken_by_event);
	g_test_add_func("/wakeup-reason/abort-names-sources",
			test_abort_names_sources);
	g_test_add_func("/wakeup-reason/abort-text-is-cut",
			test_abort_text_is_cut);
	g_test_add_func("/wakeup-reason/irqs", test_irqs);
	g_test_add_func("/wakeup-reason/container-sleep-spans-a-host-sleep",
			test_container_sleep_spans_a_host_sleep);
	g_test_add_func("/wakeup-reason/wake-source-of-the-backend",
			test_wake_source_of_the_backend);
	return g_test_run();
}
