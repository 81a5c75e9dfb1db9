/* test-wakeup.c - unit tests of the wakeup engine (src/engine/wakeup.c) against a
 * fake clock: sources and counters, timeouts, the wakeup_count handshake,
 * waiting for idle, the event hook and the statistics.
 */
#include <string.h>
#include <glib.h>

#include "powerfs/engine/clock.h"
#include "powerfs/engine/wakeup.h"

/* 1000 s: a start time far from 0 so that last_change values mean something. */
#define T0 G_GINT64_CONSTANT(1000000000)
#define T0_MS (T0 / 1000)
#define MS(x) ((gint64)(x)*1000)

#define HEADER                                                            \
	"name\t\tactive_count\tevent_count\twakeup_count\texpire_count\t" \
	"active_since\ttotal_time\tmax_time\tlast_change\tprevent_suspend_time\n"

struct fixture {
	struct pf_clock *clock;
	struct wakeup_engine *engine;
};

static void fixture_init(struct fixture *f)
{
	f->clock = pf_clock_new_fake(T0);
	g_assert_nonnull(f->clock);
	f->engine = wakeup_engine_new(f->clock);
	g_assert_nonnull(f->engine);
}

static void fixture_fini(struct fixture *f)
{
	wakeup_engine_free(f->engine);
	pf_clock_free(f->clock);
}

static struct wakeup_source *reg(struct fixture *f, const char *name)
{
	struct wakeup_source *ws =
		wakeup_source_register(f->engine, name, strlen(name));

	g_assert_nonnull(ws);
	return ws;
}

static guint count_of(struct fixture *f)
{
	guint c = 0xdeadbeef;

	wakeup_get_count(f->engine, &c);
	return c;
}

static void advance(struct fixture *f, gint64 delta_us)
{
	pf_clock_fake_advance(f->clock, delta_us);
}

static void advance_to(struct fixture *f, gint64 abs_us)
{
	gint64 now = pf_clock_now(f->clock);

	g_assert_cmpint(abs_us, >=, now);
	pf_clock_fake_advance(f->clock, abs_us - now);
}

static struct wakeup_stats stats_of(const struct wakeup_source *ws)
{
	struct wakeup_stats st;

	memset(&st, 0xa5, sizeof(st));
	wakeup_source_get_stats(ws, &st);
	return st;
}

static void count_visit(const struct wakeup_source *ws, gpointer data)
{
	guint *n = data;

	(void)ws;
	(*n)++;
}

static guint n_sources(struct fixture *f)
{
	guint n = 0;

	wakeup_foreach_source(f->engine, count_visit, &n);
	return n;
}

static char *row(const char *name, gulong active_count, gulong event_count,
		 gulong wakeup_count, gulong expire_count, gint64 active_since,
		 gint64 total, gint64 max, gint64 last_change, gint64 prevent)
{
	return g_strdup_printf(
		"%-12s\t%lu\t\t%lu\t\t%lu\t\t%lu\t\t%" G_GINT64_FORMAT
		"\t\t%" G_GINT64_FORMAT "\t\t%" G_GINT64_FORMAT
		"\t\t%" G_GINT64_FORMAT "\t\t%" G_GINT64_FORMAT "\n",
		name, active_count, event_count, wakeup_count, expire_count,
		active_since, total, max, last_change, prevent);
}

/* The stats table split into lines, each with its "\n". */
static char **stats_lines(struct fixture *f, guint *n)
{
	GString *out = g_string_new(NULL);
	GPtrArray *lines = g_ptr_array_new();
	const char *p;

	wakeup_print_stats(f->engine, out);
	g_assert_true(out->len > 0);
	g_assert_cmpint(out->str[out->len - 1], ==, '\n');
	p = out->str;
	while (*p) {
		const char *nl = strchr(p, '\n');

		g_assert_nonnull(nl);
		g_ptr_array_add(lines, g_strndup(p, nl - p + 1));
		p = nl + 1;
	}
	*n = lines->len;
	g_ptr_array_add(lines, NULL);
	g_string_free(out, TRUE);
	return (char **)g_ptr_array_free(lines, FALSE);
}

static char *last_stats_line(struct fixture *f)
{
	guint n;
	char **lines = stats_lines(f, &n);
	char *last;

	g_assert_cmpuint(n, >=, 2);
	last = g_strdup(lines[n - 1]);
	g_strfreev(lines);
	return last;
}

/* ------------------------------------------------------------------ */

static void test_register(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;
	guint c;

	fixture_init(&f);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 0);
	g_assert_true(wakeup_get_count(f.engine, &c));

	/* The name is len bytes of the buffer, copied. */
	ws = wakeup_source_register(f.engine, "alphabet", 5);
	g_assert_nonnull(ws);
	g_assert_cmpstr(wakeup_source_name(ws), ==, "alpha");
	g_assert_false(wakeup_source_active(ws));
	g_assert_cmpint(wakeup_source_last_change(ws), ==, T0);

	st = stats_of(ws);
	g_assert_cmpuint(st.active_count, ==, 0);
	g_assert_cmpuint(st.event_count, ==, 0);
	g_assert_cmpuint(st.wakeup_count, ==, 0);
	g_assert_cmpuint(st.expire_count, ==, 0);
	g_assert_cmpint(st.active_time_ms, ==, 0);
	g_assert_cmpint(st.total_time_ms, ==, 0);
	g_assert_cmpint(st.max_time_ms, ==, 0);
	g_assert_cmpint(st.last_change_ms, ==, T0_MS);
	g_assert_cmpint(st.prevent_suspend_time_ms, ==, 0);

	/* Registering does not count an event. */
	g_assert_cmpuint(count_of(&f), ==, c);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 0);

	wakeup_source_unregister(ws);
	g_assert_cmpuint(count_of(&f), ==, c);
	fixture_fini(&f);
}

static void test_activate_relax(void)
{
	struct fixture f;
	struct wakeup_source *a, *b;
	struct wakeup_stats st;
	guint c0, c;

	fixture_init(&f);
	a = reg(&f, "a");
	b = reg(&f, "b");
	g_assert_true(wakeup_get_count(f.engine, &c0));

	advance(&f, MS(5));
	wakeup_source_stay_awake(a);
	g_assert_true(wakeup_source_active(a));
	g_assert_cmpint(wakeup_source_last_change(a), ==, T0 + MS(5));
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 1);
	/* An event in progress: get_count says so, the count does not move. */
	g_assert_false(wakeup_get_count(f.engine, &c));
	g_assert_cmpuint(c, ==, c0);
	st = stats_of(a);
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 1);
	g_assert_cmpuint(st.expire_count, ==, 0);

	wakeup_source_stay_awake(b);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 2);

	advance(&f, MS(5));
	wakeup_source_relax(a);
	g_assert_false(wakeup_source_active(a));
	g_assert_cmpint(wakeup_source_last_change(a), ==, T0 + MS(10));
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 1);
	g_assert_false(wakeup_get_count(f.engine, &c));
	g_assert_cmpuint(c, ==, c0 + 1);

	wakeup_source_relax(b);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 0);
	g_assert_true(wakeup_get_count(f.engine, &c));
	g_assert_cmpuint(c, ==, c0 + 2);

	/* Relaxing an inactive source changes nothing. */
	advance(&f, MS(5));
	wakeup_source_relax(a);
	g_assert_cmpuint(count_of(&f), ==, c0 + 2);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 0);
	g_assert_cmpint(wakeup_source_last_change(a), ==, T0 + MS(10));
	st = stats_of(a);
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 1);

	/* A second activation. */
	wakeup_source_stay_awake(a);
	wakeup_source_relax(a);
	st = stats_of(a);
	g_assert_cmpuint(st.active_count, ==, 2);
	g_assert_cmpuint(st.event_count, ==, 2);
	g_assert_cmpuint(count_of(&f), ==, c0 + 3);

	wakeup_source_unregister(a);
	wakeup_source_unregister(b);
	fixture_fini(&f);
}

static void test_stay_awake_active(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;
	guint c0;

	fixture_init(&f);
	ws = reg(&f, "ws");
	c0 = count_of(&f);

	wakeup_source_stay_awake(ws);
	advance(&f, MS(7));
	/* Already active: only an event is counted. */
	wakeup_source_stay_awake(ws);
	st = stats_of(ws);
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 2);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 1);
	g_assert_cmpuint(count_of(&f), ==, c0);
	/* The activation time is not restarted. */
	g_assert_cmpint(wakeup_source_last_change(ws), ==, T0);
	g_assert_cmpint(st.active_time_ms, ==, 7);

	wakeup_source_event(ws, 100);
	st = stats_of(ws);
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 3);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 1);
	g_assert_cmpuint(count_of(&f), ==, c0);

	/* Not reference counted: one relax ends it. */
	wakeup_source_relax(ws);
	g_assert_false(wakeup_source_active(ws));
	g_assert_cmpuint(count_of(&f), ==, c0 + 1);
	advance(&f, MS(200));
	st = stats_of(ws);
	g_assert_cmpuint(st.expire_count, ==, 0);
	g_assert_cmpuint(count_of(&f), ==, c0 + 1);

	wakeup_source_unregister(ws);
	fixture_fini(&f);
}

static void test_timeout_exact(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;
	guint c0;

	fixture_init(&f);
	ws = reg(&f, "ws");
	c0 = count_of(&f);

	wakeup_source_event(ws, 100);
	g_assert_true(wakeup_source_active(ws));
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 1);
	st = stats_of(ws);
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 1);
	g_assert_cmpuint(st.expire_count, ==, 0);

	advance(&f, MS(100) - 1);
	g_assert_true(wakeup_source_active(ws));
	g_assert_cmpuint(stats_of(ws).expire_count, ==, 0);
	g_assert_cmpuint(count_of(&f), ==, c0);

	advance(&f, 1);
	g_assert_false(wakeup_source_active(ws));
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 0);
	g_assert_cmpuint(count_of(&f), ==, c0 + 1);
	g_assert_cmpint(wakeup_source_last_change(ws), ==, T0 + MS(100));
	st = stats_of(ws);
	g_assert_cmpuint(st.expire_count, ==, 1);
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 1);
	g_assert_cmpint(st.active_time_ms, ==, 0);
	g_assert_cmpint(st.total_time_ms, ==, 100);
	g_assert_cmpint(st.max_time_ms, ==, 100);
	g_assert_cmpint(st.last_change_ms, ==, T0_MS + 100);

	/* Nothing more happens later. */
	advance(&f, MS(1000));
	g_assert_cmpuint(stats_of(ws).expire_count, ==, 1);
	g_assert_cmpuint(count_of(&f), ==, c0 + 1);

	/* It can be armed again. */
	wakeup_source_event(ws, 1);
	advance(&f, MS(1) - 1);
	g_assert_true(wakeup_source_active(ws));
	advance(&f, 1);
	g_assert_false(wakeup_source_active(ws));
	g_assert_cmpuint(stats_of(ws).expire_count, ==, 2);
	g_assert_cmpuint(count_of(&f), ==, c0 + 2);

	wakeup_source_unregister(ws);
	fixture_fini(&f);
}

static void test_timeout_shorter_keeps_longer(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;

	fixture_init(&f);
	ws = reg(&f, "ws");

	wakeup_source_event(ws, 200);
	advance(&f, MS(50));
	wakeup_source_event(ws, 100); /* would end at +150 */
	advance_to(&f, T0 + MS(150));
	g_assert_true(wakeup_source_active(ws));
	advance_to(&f, T0 + MS(200) - 1);
	g_assert_true(wakeup_source_active(ws));
	advance(&f, 1);
	g_assert_false(wakeup_source_active(ws));
	st = stats_of(ws);
	g_assert_cmpuint(st.expire_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 2);
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpint(st.total_time_ms, ==, 200);

	/* Same deadline again: an equal one changes nothing either. */
	wakeup_source_event(ws, 100);
	advance(&f, MS(50));
	wakeup_source_event(ws, 50);
	advance(&f, MS(50) - 1);
	g_assert_true(wakeup_source_active(ws));
	advance(&f, 1);
	g_assert_false(wakeup_source_active(ws));
	g_assert_cmpuint(stats_of(ws).expire_count, ==, 2);

	wakeup_source_unregister(ws);
	fixture_fini(&f);
}

static void test_timeout_longer_extends(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;
	guint c0;

	fixture_init(&f);
	ws = reg(&f, "ws");
	c0 = count_of(&f);

	wakeup_source_event(ws, 100);
	advance(&f, MS(50));
	wakeup_source_event(ws, 200); /* now ends at +250 */
	advance_to(&f, T0 + MS(100));
	g_assert_true(wakeup_source_active(ws));
	g_assert_cmpuint(count_of(&f), ==, c0);
	advance_to(&f, T0 + MS(250) - 1);
	g_assert_true(wakeup_source_active(ws));
	g_assert_cmpuint(stats_of(ws).expire_count, ==, 0);
	advance(&f, 1);
	g_assert_false(wakeup_source_active(ws));
	st = stats_of(ws);
	g_assert_cmpuint(st.expire_count, ==, 1);
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 2);
	g_assert_cmpint(st.total_time_ms, ==, 250);
	g_assert_cmpuint(count_of(&f), ==, c0 + 1);

	wakeup_source_unregister(ws);
	fixture_fini(&f);
}

static void test_stay_awake_cancels_timeout(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;
	guint c0;

	fixture_init(&f);
	ws = reg(&f, "ws");
	c0 = count_of(&f);

	wakeup_source_event(ws, 100);
	advance(&f, MS(10));
	wakeup_source_stay_awake(ws);
	advance(&f, MS(10000));
	g_assert_true(wakeup_source_active(ws));
	st = stats_of(ws);
	g_assert_cmpuint(st.expire_count, ==, 0);
	g_assert_cmpuint(st.event_count, ==, 2);
	g_assert_cmpuint(count_of(&f), ==, c0);
	wakeup_source_relax(ws);
	g_assert_cmpuint(count_of(&f), ==, c0 + 1);

	/* A timeout that was armed and then relaxed must not end a later
	 * activation. */
	wakeup_source_event(ws, 100);
	wakeup_source_relax(ws);
	wakeup_source_stay_awake(ws);
	advance(&f, MS(200));
	g_assert_true(wakeup_source_active(ws));
	g_assert_cmpuint(stats_of(ws).expire_count, ==, 0);
	wakeup_source_relax(ws);

	/* Relaxing forgets the old deadline: a shorter timeout afterwards
	 * is armed for its own length. */
	wakeup_source_event(ws, 500);
	wakeup_source_relax(ws);
	wakeup_source_event(ws, 100);
	advance(&f, MS(100));
	g_assert_false(wakeup_source_active(ws));
	g_assert_cmpuint(stats_of(ws).expire_count, ==, 1);

	wakeup_source_unregister(ws);
	fixture_fini(&f);
}

static void test_event_zero(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;
	guint c0;

	fixture_init(&f);
	ws = reg(&f, "ws");
	c0 = count_of(&f);

	advance(&f, MS(3));
	wakeup_source_event(ws, 0);
	g_assert_false(wakeup_source_active(ws));
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 0);
	g_assert_cmpuint(count_of(&f), ==, c0 + 1);
	g_assert_cmpint(wakeup_source_last_change(ws), ==, T0 + MS(3));
	st = stats_of(ws);
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 1);
	g_assert_cmpuint(st.expire_count, ==, 0);
	g_assert_cmpint(st.total_time_ms, ==, 0);

	/* On an active source it signals and relaxes it. */
	wakeup_source_stay_awake(ws);
	wakeup_source_event(ws, 0);
	g_assert_false(wakeup_source_active(ws));
	st = stats_of(ws);
	g_assert_cmpuint(st.active_count, ==, 2);
	g_assert_cmpuint(st.event_count, ==, 3);
	g_assert_cmpuint(count_of(&f), ==, c0 + 2);

	/* It also drops an armed timeout. */
	wakeup_source_event(ws, 100);
	wakeup_source_event(ws, 0);
	g_assert_false(wakeup_source_active(ws));
	wakeup_source_stay_awake(ws);
	advance(&f, MS(150));
	g_assert_true(wakeup_source_active(ws));
	g_assert_cmpuint(stats_of(ws).expire_count, ==, 0);
	wakeup_source_relax(ws);

	wakeup_source_unregister(ws);
	fixture_fini(&f);
}

static void test_handshake_save(void)
{
	struct fixture f;
	struct wakeup_source *a, *b;
	guint c;

	fixture_init(&f);
	a = reg(&f, "a");
	b = reg(&f, "b");
	wakeup_source_event(a, 0);
	g_assert_true(wakeup_get_count(f.engine, &c));

	/* Wrong count: refused. */
	g_assert_false(wakeup_save_count(f.engine, c + 1));
	g_assert_false(wakeup_save_count(f.engine, c - 1));
	wakeup_source_event(a, 0);
	g_assert_cmpuint(stats_of(a).wakeup_count, ==, 0);
	g_assert_true(wakeup_get_count(f.engine, &c));

	/* Right count: armed, events count in wakeup_count. */
	g_assert_true(wakeup_save_count(f.engine, c));
	wakeup_source_event(a, 0);
	wakeup_source_stay_awake(b);
	wakeup_source_stay_awake(b); /* already active: still an event */
	g_assert_cmpuint(stats_of(a).wakeup_count, ==, 1);
	g_assert_cmpuint(stats_of(b).wakeup_count, ==, 2);
	g_assert_cmpuint(stats_of(b).event_count, ==, 2);
	wakeup_source_relax(b);
	/* Relaxing is not an event. */
	g_assert_cmpuint(stats_of(b).wakeup_count, ==, 2);

	/* A failed save (wrong count) disarms. */
	g_assert_false(wakeup_save_count(f.engine, count_of(&f) + 5));
	wakeup_source_event(a, 0);
	g_assert_cmpuint(stats_of(a).wakeup_count, ==, 1);
	g_assert_false(wakeup_pending(f.engine));

	/* A source active: refused (even with the right count) and disarms. */
	g_assert_true(wakeup_get_count(f.engine, &c));
	g_assert_true(wakeup_save_count(f.engine, c));
	wakeup_source_stay_awake(b);
	g_assert_cmpuint(stats_of(b).wakeup_count, ==, 3);
	g_assert_false(wakeup_get_count(f.engine, &c));
	g_assert_false(wakeup_save_count(f.engine, c));
	wakeup_source_event(a, 0);
	g_assert_cmpuint(stats_of(a).wakeup_count, ==, 1);
	wakeup_source_relax(b);
	g_assert_false(wakeup_pending(f.engine));

	/* Arming again after that works. */
	g_assert_true(wakeup_get_count(f.engine, &c));
	g_assert_true(wakeup_save_count(f.engine, c));
	wakeup_source_event(a, 0);
	g_assert_cmpuint(stats_of(a).wakeup_count, ==, 2);
	wakeup_end_handshake(f.engine);

	/* After the handshake ends, events no longer count there. */
	wakeup_source_event(a, 0);
	g_assert_cmpuint(stats_of(a).wakeup_count, ==, 2);
	g_assert_cmpuint(stats_of(a).event_count, ==, 7);

	wakeup_source_unregister(a);
	wakeup_source_unregister(b);
	fixture_fini(&f);
}

static void test_handshake_pending(void)
{
	struct fixture f;
	struct wakeup_source *a, *b;
	guint c;

	fixture_init(&f);
	a = reg(&f, "a");
	b = reg(&f, "b");

	/* Not armed: nothing is pending, even with an active source. */
	g_assert_false(wakeup_pending(f.engine));
	wakeup_source_stay_awake(b);
	g_assert_false(wakeup_pending(f.engine));
	wakeup_source_relax(b);

	/* Armed and nothing happened: not pending, still armed. */
	g_assert_true(wakeup_get_count(f.engine, &c));
	g_assert_true(wakeup_save_count(f.engine, c));
	g_assert_false(wakeup_pending(f.engine));
	g_assert_false(wakeup_pending(f.engine));

	/* A registered event (count changed, nothing active). */
	wakeup_source_event(a, 0);
	g_assert_cmpuint(stats_of(a).wakeup_count, ==, 1);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 0);
	g_assert_true(wakeup_pending(f.engine));
	/* That ended the handshake. */
	g_assert_false(wakeup_pending(f.engine));
	wakeup_source_event(a, 0);
	g_assert_cmpuint(stats_of(a).wakeup_count, ==, 1);

	/* An active source (count unchanged). */
	g_assert_true(wakeup_get_count(f.engine, &c));
	g_assert_true(wakeup_save_count(f.engine, c));
	wakeup_source_stay_awake(b);
	g_assert_cmpuint(count_of(&f), ==, c);
	g_assert_true(wakeup_pending(f.engine));
	g_assert_false(wakeup_pending(f.engine));
	wakeup_source_relax(b);

	/* wakeup_end_handshake ends it too. */
	g_assert_true(wakeup_get_count(f.engine, &c));
	g_assert_true(wakeup_save_count(f.engine, c));
	wakeup_end_handshake(f.engine);
	wakeup_source_event(a, 0);
	g_assert_false(wakeup_pending(f.engine));
	g_assert_cmpuint(stats_of(a).wakeup_count, ==, 1);

	/* An expiring timeout is a registered event too. */
	wakeup_source_event(a, 10);
	advance(&f, MS(10));
	g_assert_false(wakeup_source_active(a));
	g_assert_true(wakeup_get_count(f.engine, &c));
	g_assert_true(wakeup_save_count(f.engine, c));
	wakeup_source_stay_awake(a);
	wakeup_source_relax(a);
	g_assert_true(wakeup_pending(f.engine));

	wakeup_source_unregister(a);
	wakeup_source_unregister(b);
	fixture_fini(&f);
}

struct calls {
	int n;
	gpointer last_data;
	struct wakeup_source *last_source; /* of an event hook's call */
};

static void count_call(gpointer data)
{
	struct calls *c = data;

	c->n++;
	c->last_data = data;
}

static void test_wait_idle(void)
{
	struct fixture f;
	struct wakeup_source *a, *b;
	struct calls calls = { 0 };
	struct wakeup_waiter *w;

	fixture_init(&f);
	a = reg(&f, "a");
	b = reg(&f, "b");

	/* Idle already: called soon, from the main loop, not synchronously. */
	w = wakeup_wait_idle(f.engine, count_call, &calls);
	g_assert_nonnull(w);
	g_assert_cmpint(calls.n, ==, 0);
	advance(&f, 0);
	g_assert_cmpint(calls.n, ==, 1);
	g_assert_true(calls.last_data == &calls);
	advance(&f, MS(100));
	g_assert_cmpint(calls.n, ==, 1);

	/* Not while a source is active. */
	calls.n = 0;
	wakeup_source_stay_awake(a);
	wakeup_source_stay_awake(b);
	w = wakeup_wait_idle(f.engine, count_call, &calls);
	g_assert_nonnull(w);
	advance(&f, 0);
	advance(&f, MS(1000));
	g_assert_cmpint(calls.n, ==, 0);
	wakeup_source_relax(a);
	advance(&f, 0);
	advance(&f, MS(10));
	g_assert_cmpint(calls.n, ==, 0);
	/* The last one relaxes. */
	wakeup_source_relax(b);
	g_assert_cmpint(calls.n, ==, 0);
	advance(&f, 0);
	g_assert_cmpint(calls.n, ==, 1);

	/* Once only. */
	wakeup_source_stay_awake(a);
	wakeup_source_relax(a);
	advance(&f, MS(10));
	g_assert_cmpint(calls.n, ==, 1);

	/* A timeout expiring counts as the last relax too. */
	calls.n = 0;
	wakeup_source_event(a, 100);
	w = wakeup_wait_idle(f.engine, count_call, &calls);
	advance(&f, MS(100) - 1);
	g_assert_cmpint(calls.n, ==, 0);
	advance(&f, 1);
	advance(&f, 0);
	g_assert_cmpint(calls.n, ==, 1);

	/* Two waiters, both called. */
	calls.n = 0;
	{
		struct calls other = { 0 };

		wakeup_source_stay_awake(a);
		wakeup_wait_idle(f.engine, count_call, &calls);
		wakeup_wait_idle(f.engine, count_call, &other);
		wakeup_source_relax(a);
		advance(&f, 0);
		g_assert_cmpint(calls.n, ==, 1);
		g_assert_cmpint(other.n, ==, 1);
	}

	wakeup_source_unregister(a);
	wakeup_source_unregister(b);
	fixture_fini(&f);
}

static void test_wait_idle_cancel(void)
{
	struct fixture f;
	struct wakeup_source *a;
	struct calls calls = { 0 }, other = { 0 };
	struct wakeup_waiter *w;

	fixture_init(&f);
	a = reg(&f, "a");

	wakeup_source_stay_awake(a);
	w = wakeup_wait_idle(f.engine, count_call, &calls);
	wakeup_wait_idle(f.engine, count_call, &other);
	wakeup_cancel_wait(w);
	wakeup_source_relax(a);
	advance(&f, 0);
	advance(&f, MS(100));
	g_assert_cmpint(calls.n, ==, 0);
	/* The other waiter is not affected. */
	g_assert_cmpint(other.n, ==, 1);

	/* Cancelled while idle, before the loop ran it. */
	w = wakeup_wait_idle(f.engine, count_call, &calls);
	wakeup_cancel_wait(w);
	advance(&f, 0);
	advance(&f, MS(100));
	g_assert_cmpint(calls.n, ==, 0);

	wakeup_source_unregister(a);
	fixture_fini(&f);
}

static void count_event(struct pf_event *ev, gpointer data)
{
	struct calls *calls = data;

	calls->last_source = ev->source;
	count_call(data);
}

/* PF_EVENT_WAKEUP: every event reported on a source, and only those. */
static void test_wakeup_event(void)
{
	struct fixture f;
	struct wakeup_source *a, *b;
	struct calls calls = { 0 };

	fixture_init(&f);
	a = reg(&f, "a");
	b = reg(&f, "b");

	pf_events_subscribe(wakeup_events(f.engine),
			    PF_EVENT_BIT(PF_EVENT_WAKEUP), count_event, &calls);
	wakeup_source_stay_awake(a);
	g_assert_cmpint(calls.n, ==, 1);
	g_assert_true(calls.last_data == &calls);
	g_assert_true(calls.last_source == a);
	wakeup_source_stay_awake(a); /* already active: still an event */
	g_assert_cmpint(calls.n, ==, 2);
	wakeup_source_event(b, 100);
	g_assert_cmpint(calls.n, ==, 3);
	g_assert_true(calls.last_source == b);
	wakeup_source_event(b, 50);
	g_assert_cmpint(calls.n, ==, 4);
	wakeup_source_event(a, 0);
	g_assert_cmpint(calls.n, ==, 5);

	/* Relaxing and expiring are not events. */
	wakeup_source_stay_awake(a);
	g_assert_cmpint(calls.n, ==, 6);
	wakeup_source_relax(a);
	advance(&f, MS(200));
	g_assert_false(wakeup_source_active(b));
	g_assert_cmpint(calls.n, ==, 6);

	/* Unsubscribed, it hears nothing more. */
	pf_events_unsubscribe(wakeup_events(f.engine), count_event, &calls);
	wakeup_source_event(a, 0);
	wakeup_source_stay_awake(b);
	wakeup_source_relax(b);
	g_assert_cmpint(calls.n, ==, 6);

	wakeup_source_unregister(a);
	wakeup_source_unregister(b);
	fixture_fini(&f);
}

/* Every subscriber of PF_EVENT_CHANGED hears every change, in the order
 * subscribed; one unsubscribed hears nothing more, and one that asked for
 * other kinds hears none of these. */
struct heard {
	guint n;
	struct wakeup_source *last;
	GString *order;
	char tag;
};

static void hear(struct pf_event *ev, gpointer data)
{
	struct heard *h = data;

	h->n++;
	h->last = ev->source;
	g_string_append_c(h->order, h->tag);
}

static void test_changed_event(void)
{
	struct fixture f;
	struct wakeup_source *a;
	struct pf_events *events;
	g_autoptr(GString) order = g_string_new(NULL);
	struct heard x = { 0, NULL, order, 'x' }, y = { 0, NULL, order, 'y' };
	struct heard z = { 0, NULL, order, 'z' };

	fixture_init(&f);
	events = wakeup_events(f.engine);
	pf_events_subscribe(events, PF_EVENT_BIT(PF_EVENT_CHANGED), hear, &x);
	pf_events_subscribe(events, PF_EVENT_BIT(PF_EVENT_EXPIRE), hear, &z);
	pf_events_subscribe(events, PF_EVENT_BIT(PF_EVENT_CHANGED), hear, &y);
	a = reg(&f, "a");
	g_assert_cmpuint(x.n, ==, 1);
	g_assert_cmpuint(y.n, ==, 1);
	g_assert_true(x.last == a && y.last == a);
	g_assert_cmpstr(order->str, ==, "xy");

	wakeup_notify_changed(f.engine, NULL);
	g_assert_cmpuint(x.n, ==, 2);
	g_assert_null(y.last);

	pf_events_unsubscribe(events, hear, &x);
	wakeup_source_stay_awake(a);
	g_assert_cmpuint(x.n, ==, 2);
	g_assert_cmpuint(y.n, ==, 3);
	g_assert_true(y.last == a);

	pf_events_unsubscribe(events, hear, &y);
	wakeup_source_relax(a);
	g_assert_cmpuint(y.n, ==, 3);
	g_assert_cmpuint(z.n, ==, 0);
	pf_events_unsubscribe(events, hear, &z);
	wakeup_source_unregister(a);
	fixture_fini(&f);
}

/* PF_EVENT_ACTIVITY: when the number of active sources leaves 0 and comes
 * back to it, not at every change between. */
static void count_activity(struct pf_event *ev, gpointer data)
{
	GString *said = data;

	g_string_append_c(said, ev->active ? '1' : '0');
}

static void test_activity_event(void)
{
	struct fixture f;
	struct wakeup_source *a, *b;
	g_autoptr(GString) said = g_string_new(NULL);

	fixture_init(&f);
	a = reg(&f, "a");
	b = reg(&f, "b");
	pf_events_subscribe(wakeup_events(f.engine),
			    PF_EVENT_BIT(PF_EVENT_ACTIVITY), count_activity,
			    said);
	wakeup_source_stay_awake(a);
	wakeup_source_stay_awake(b);
	wakeup_source_relax(a);
	g_assert_cmpstr(said->str, ==, "1");
	wakeup_source_relax(b);
	g_assert_cmpstr(said->str, ==, "10");
	wakeup_source_event(a, 100);
	advance(&f, MS(200));
	g_assert_cmpstr(said->str, ==, "1010");
	pf_events_unsubscribe(wakeup_events(f.engine), count_activity, said);
	wakeup_source_unregister(a);
	wakeup_source_unregister(b);
	fixture_fini(&f);
}

static void test_print_stats_format(void)
{
	struct fixture f;
	struct wakeup_source *alpha, *lng, *b;
	guint n0, n, i;
	char **lines;
	char *exp;

	fixture_init(&f);
	n0 = n_sources(&f);

	alpha = reg(&f, "alpha");
	advance(&f, MS(10));
	lng = reg(&f, "a-name-longer-than-12");
	advance(&f, MS(10));
	b = reg(&f, "b");

	wakeup_source_stay_awake(alpha); /* at T0 + 20 ms */
	wakeup_source_event(lng, 0);
	advance(&f, MS(30)); /* T0 + 50 ms */

	lines = stats_lines(&f, &n);
	g_assert_cmpuint(n, ==, 1 + 3 + n0 + 1);
	g_assert_cmpstr(lines[0], ==, HEADER);
	/* Newest first; padded to 12 columns; longer names not cut. */
	g_assert_cmpstr(
		lines[1], ==,
		"b           \t0\t\t0\t\t0\t\t0\t\t0\t\t0\t\t0\t\t1000020\t\t0\n");
	g_assert_cmpstr(
		lines[2], ==,
		"a-name-longer-than-12\t1\t\t1\t\t0\t\t0\t\t0\t\t0\t\t0\t\t1000020\t\t0\n");
	g_assert_cmpstr(
		lines[3], ==,
		"alpha       \t1\t\t1\t\t0\t\t0\t\t30\t\t30\t\t30\t\t1000020\t\t0\n");
	/* "deleted" last, all zero (its last_change is never set). */
	g_assert_cmpstr(
		lines[n - 1], ==,
		"deleted     \t0\t\t0\t\t0\t\t0\t\t0\t\t0\t\t0\t\t0\t\t0\n");
	for (i = 4; i < n - 1; i++)
		g_assert_false(g_str_has_prefix(lines[i], "deleted "));
	g_strfreev(lines);

	/* The same through the helper that mirrors the kernel's printf. */
	exp = row("alpha", 1, 1, 0, 0, 30, 30, 30, T0_MS + 20, 0);
	g_assert_cmpstr(
		exp, ==,
		"alpha       \t1\t\t1\t\t0\t\t0\t\t30\t\t30\t\t30\t\t1000020\t\t0\n");
	g_free(exp);

	/* Relaxed at T0 + 50 ms. */
	wakeup_source_relax(alpha);
	lines = stats_lines(&f, &n);
	exp = row("alpha", 1, 1, 0, 0, 0, 30, 30, T0_MS + 50, 0);
	g_assert_cmpstr(lines[3], ==, exp);
	g_free(exp);
	g_strfreev(lines);

	wakeup_source_unregister(alpha);
	wakeup_source_unregister(lng);
	wakeup_source_unregister(b);
	fixture_fini(&f);
}

static void test_print_stats_deleted(void)
{
	struct fixture f;
	struct wakeup_source *keep, *gone, *gone2;
	guint n0, n, c, c1;
	char **lines;
	char *exp, *last;

	fixture_init(&f);
	n0 = n_sources(&f);
	keep = reg(&f, "keep");
	gone = reg(&f, "gone");
	gone2 = reg(&f, "gone2");

	/* gone: 40 ms held, then a 100 ms timeout that expires, one event
	 * while the handshake is armed. */
	g_assert_true(wakeup_get_count(f.engine, &c));
	g_assert_true(wakeup_save_count(f.engine, c));
	wakeup_source_stay_awake(gone);
	wakeup_end_handshake(f.engine);
	advance(&f, MS(40));
	wakeup_source_relax(gone);
	wakeup_source_event(gone, 100);
	advance(&f, MS(100));
	g_assert_false(wakeup_source_active(gone));

	c = count_of(&f);
	wakeup_source_unregister(gone);
	g_assert_cmpuint(count_of(&f), ==, c);
	lines = stats_lines(&f, &n);
	g_assert_cmpuint(n, ==, 1 + 2 + n0 + 1);
	g_assert_true(g_str_has_prefix(lines[1], "gone2 "));
	g_assert_true(g_str_has_prefix(lines[2], "keep "));
	exp = row("deleted", 2, 2, 1, 1, 0, 140, 100, 0, 0);
	g_assert_cmpstr(lines[n - 1], ==, exp);
	g_free(exp);
	g_strfreev(lines);

	/* gone2 is unregistered while active for 150 ms: it is relaxed
	 * (a registered event), its time counts, the maximum grows. */
	wakeup_source_stay_awake(gone2);
	advance(&f, MS(150));
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 1);
	c = count_of(&f);
	wakeup_source_unregister(gone2);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 0);
	g_assert_true(wakeup_get_count(f.engine, &c1));
	g_assert_cmpuint(c1, ==, c + 1);
	last = last_stats_line(&f);
	exp = row("deleted", 3, 3, 1, 1, 0, 290, 150, 0, 0);
	g_assert_cmpstr(last, ==, exp);
	g_free(exp);
	g_free(last);
	g_assert_cmpuint(n_sources(&f), ==, n0 + 1);

	wakeup_source_unregister(keep);
	fixture_fini(&f);
}

static void test_stats_times(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;
	guint n;
	char **lines;
	char *exp;

	fixture_init(&f);
	ws = reg(&f, "ws");

	advance(&f, MS(1000));
	wakeup_source_stay_awake(ws); /* T0 + 1000 */
	advance(&f, MS(250));
	st = stats_of(ws);
	g_assert_cmpint(st.active_time_ms, ==, 250);
	g_assert_cmpint(st.total_time_ms, ==, 250);
	g_assert_cmpint(st.max_time_ms, ==, 250);
	g_assert_cmpint(st.last_change_ms, ==, T0_MS + 1000);
	lines = stats_lines(&f, &n);
	exp = row("ws", 1, 1, 0, 0, 250, 250, 250, T0_MS + 1000, 0);
	g_assert_cmpstr(lines[1], ==, exp);
	g_free(exp);
	g_strfreev(lines);

	wakeup_source_relax(ws); /* T0 + 1250 */
	st = stats_of(ws);
	g_assert_cmpint(st.active_time_ms, ==, 0);
	g_assert_cmpint(st.total_time_ms, ==, 250);
	g_assert_cmpint(st.max_time_ms, ==, 250);
	g_assert_cmpint(st.last_change_ms, ==, T0_MS + 1250);

	advance(&f, MS(1000));
	/* Inactive: nothing grows. */
	st = stats_of(ws);
	g_assert_cmpint(st.total_time_ms, ==, 250);
	g_assert_cmpint(st.last_change_ms, ==, T0_MS + 1250);

	wakeup_source_stay_awake(ws); /* T0 + 2250 */
	advance(&f, MS(100));
	st = stats_of(ws);
	g_assert_cmpint(st.active_time_ms, ==, 100);
	g_assert_cmpint(st.total_time_ms, ==, 350);
	g_assert_cmpint(st.max_time_ms, ==, 250); /* 100 < 250 */
	g_assert_cmpint(st.last_change_ms, ==, T0_MS + 2250);

	advance(&f, MS(200));
	st = stats_of(ws);
	g_assert_cmpint(st.active_time_ms, ==, 300);
	g_assert_cmpint(st.total_time_ms, ==, 550);
	g_assert_cmpint(st.max_time_ms, ==, 300); /* current one */
	lines = stats_lines(&f, &n);
	exp = row("ws", 2, 2, 0, 0, 300, 550, 300, T0_MS + 2250, 0);
	g_assert_cmpstr(lines[1], ==, exp);
	g_free(exp);
	g_strfreev(lines);

	wakeup_source_relax(ws); /* T0 + 2550 */
	st = stats_of(ws);
	g_assert_cmpuint(st.active_count, ==, 2);
	g_assert_cmpuint(st.event_count, ==, 2);
	g_assert_cmpint(st.active_time_ms, ==, 0);
	g_assert_cmpint(st.total_time_ms, ==, 550);
	g_assert_cmpint(st.max_time_ms, ==, 300);
	g_assert_cmpint(st.last_change_ms, ==, T0_MS + 2550);
	g_assert_cmpint(wakeup_source_last_change(ws), ==, T0 + MS(2550));

	wakeup_source_unregister(ws);
	fixture_fini(&f);
}

/* Times are kept in microseconds and converted (truncated) when shown, as
 * the kernel keeps nanoseconds and prints ktime_to_ms(). */
static void test_stats_sub_ms(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;

	fixture_init(&f);
	ws = reg(&f, "ws");

	wakeup_source_stay_awake(ws);
	advance(&f, 600);
	wakeup_source_relax(ws);
	advance(&f, 1000);
	wakeup_source_stay_awake(ws);
	advance(&f, 600);
	st = stats_of(ws);
	g_assert_cmpint(st.active_time_ms, ==, 0);
	g_assert_cmpint(st.total_time_ms, ==, 1);	   /* 1.2 ms */
	g_assert_cmpint(st.max_time_ms, ==, 0);		   /* 0.6 ms */
	g_assert_cmpint(st.last_change_ms, ==, T0_MS + 1); /* 1.6 ms */
	advance(&f, 500);
	st = stats_of(ws);
	g_assert_cmpint(st.active_time_ms, ==, 1); /* 1.1 ms */
	g_assert_cmpint(st.total_time_ms, ==, 1);  /* 1.7 ms */
	g_assert_cmpint(st.max_time_ms, ==, 1);
	wakeup_source_relax(ws);
	st = stats_of(ws);
	g_assert_cmpint(st.total_time_ms, ==, 1);
	g_assert_cmpint(st.last_change_ms, ==, T0_MS + 2); /* 2.7 ms */
	advance(&f, 400);
	wakeup_source_event(ws, 0);
	wakeup_source_stay_awake(ws);
	advance(&f, 300);
	wakeup_source_relax(ws);
	st = stats_of(ws);
	g_assert_cmpint(st.total_time_ms, ==, 2); /* 2.0 ms */

	wakeup_source_unregister(ws);
	fixture_fini(&f);
}

static void test_prevent_suspend_time(void)
{
	struct fixture f;
	struct wakeup_source *a, *b, *idle;
	struct wakeup_stats st;
	char *exp, *last;

	fixture_init(&f);
	a = reg(&f, "a");
	idle = reg(&f, "idle");

	/* Autosleep off: active time does not count. */
	wakeup_source_stay_awake(a);
	advance(&f, MS(100));
	g_assert_cmpint(stats_of(a).prevent_suspend_time_ms, ==, 0);

	/* Switched on while a is active: counts from now. */
	wakeup_set_autosleep(f.engine, TRUE);
	advance(&f, MS(200));
	st = stats_of(a);
	g_assert_cmpint(st.prevent_suspend_time_ms, ==, 200);
	g_assert_cmpint(st.total_time_ms, ==, 300);
	g_assert_cmpint(stats_of(idle).prevent_suspend_time_ms, ==, 0);

	/* Inactive: does not grow. */
	wakeup_source_relax(a);
	g_assert_cmpint(stats_of(a).prevent_suspend_time_ms, ==, 200);
	advance(&f, MS(300));
	g_assert_cmpint(stats_of(a).prevent_suspend_time_ms, ==, 200);

	/* Activated while autosleep is on. */
	wakeup_source_stay_awake(a);
	advance(&f, MS(50));
	g_assert_cmpint(stats_of(a).prevent_suspend_time_ms, ==, 250);

	/* A source created after autosleep was switched on counts too
	 * (deviation from the kernel, see SPEC.md). */
	b = reg(&f, "b");
	wakeup_source_event(b, 70);
	advance(&f, MS(30));
	g_assert_cmpint(stats_of(b).prevent_suspend_time_ms, ==, 30);
	g_assert_cmpint(stats_of(a).prevent_suspend_time_ms, ==, 280);
	advance(&f, MS(40)); /* b expires at +70 */
	g_assert_false(wakeup_source_active(b));
	g_assert_cmpint(stats_of(b).prevent_suspend_time_ms, ==, 70);
	g_assert_cmpint(stats_of(a).prevent_suspend_time_ms, ==, 320);

	/* Switched off while a is active: stops growing. */
	wakeup_set_autosleep(f.engine, FALSE);
	advance(&f, MS(1000));
	st = stats_of(a);
	g_assert_cmpint(st.prevent_suspend_time_ms, ==, 320);
	wakeup_source_relax(a);
	g_assert_cmpint(stats_of(a).prevent_suspend_time_ms, ==, 320);
	wakeup_source_stay_awake(a);
	advance(&f, MS(10));
	g_assert_cmpint(stats_of(a).prevent_suspend_time_ms, ==, 320);
	wakeup_source_relax(a);
	g_assert_cmpint(stats_of(idle).prevent_suspend_time_ms, ==, 0);

	/* Unregistering adds it to the deleted row. */
	wakeup_source_unregister(b);
	last = last_stats_line(&f);
	exp = row("deleted", 1, 1, 0, 1, 0, 70, 70, 0, 70);
	g_assert_cmpstr(last, ==, exp);
	g_free(exp);
	g_free(last);

	wakeup_source_unregister(a);
	wakeup_source_unregister(idle);
	fixture_fini(&f);
}

struct names {
	GPtrArray *names;
};

static void name_visit(const struct wakeup_source *ws, gpointer data)
{
	struct names *nm = data;

	g_ptr_array_add(nm->names, g_strdup(wakeup_source_name(ws)));
}

static void test_foreach(void)
{
	struct fixture f;
	struct wakeup_source *s1, *s2, *s3;
	struct names nm;
	guint n0;

	fixture_init(&f);
	n0 = n_sources(&f);
	s1 = reg(&f, "one");
	s2 = reg(&f, "two");
	s3 = reg(&f, "three");

	nm.names = g_ptr_array_new_with_free_func(g_free);
	wakeup_foreach_source(f.engine, name_visit, &nm);
	g_assert_cmpuint(nm.names->len, ==, n0 + 3);
	g_assert_cmpstr(g_ptr_array_index(nm.names, 0), ==, "three");
	g_assert_cmpstr(g_ptr_array_index(nm.names, 1), ==, "two");
	g_assert_cmpstr(g_ptr_array_index(nm.names, 2), ==, "one");
	g_ptr_array_free(nm.names, TRUE);

	wakeup_source_unregister(s2);
	nm.names = g_ptr_array_new_with_free_func(g_free);
	wakeup_foreach_source(f.engine, name_visit, &nm);
	g_assert_cmpuint(nm.names->len, ==, n0 + 2);
	g_assert_cmpstr(g_ptr_array_index(nm.names, 0), ==, "three");
	g_assert_cmpstr(g_ptr_array_index(nm.names, 1), ==, "one");
	g_ptr_array_free(nm.names, TRUE);

	wakeup_source_unregister(s1);
	wakeup_source_unregister(s3);
	g_assert_cmpuint(n_sources(&f), ==, n0);
	fixture_fini(&f);
}

static void test_get_stats(void)
{
	struct fixture f;
	struct wakeup_source *ws;
	struct wakeup_stats st;
	guint c;

	fixture_init(&f);
	ws = reg(&f, "ws");

	g_assert_true(wakeup_get_count(f.engine, &c));
	g_assert_true(wakeup_save_count(f.engine, c));
	wakeup_source_event(ws, 20); /* T0, wakeup 1 */
	advance(&f, MS(20));	     /* expires */
	wakeup_end_handshake(f.engine);
	wakeup_source_stay_awake(ws); /* T0 + 20 */
	advance(&f, MS(5));
	wakeup_source_stay_awake(ws);
	advance(&f, MS(5)); /* T0 + 30 */

	st = stats_of(ws);
	g_assert_cmpuint(st.active_count, ==, 2);
	g_assert_cmpuint(st.event_count, ==, 3);
	g_assert_cmpuint(st.wakeup_count, ==, 1);
	g_assert_cmpuint(st.expire_count, ==, 1);
	g_assert_cmpint(st.active_time_ms, ==, 10);
	g_assert_cmpint(st.total_time_ms, ==, 30);
	g_assert_cmpint(st.max_time_ms, ==, 20);
	g_assert_cmpint(st.last_change_ms, ==, T0_MS + 20);
	g_assert_cmpint(st.prevent_suspend_time_ms, ==, 0);

	wakeup_source_unregister(ws);
	fixture_fini(&f);
}

/* Ids come from the lowest free number, like the kernel's IDA, and are
 * free again once the source is unregistered. */
static void test_ids(void)
{
	struct fixture f;
	struct wakeup_source *a, *b, *c, *d, *e;

	fixture_init(&f);
	g_assert_null(wakeup_source_by_id(f.engine, 0));
	a = reg(&f, "a");
	b = reg(&f, "b");
	c = reg(&f, "c");
	g_assert_cmpuint(wakeup_source_id(a), ==, 0);
	g_assert_cmpuint(wakeup_source_id(b), ==, 1);
	g_assert_cmpuint(wakeup_source_id(c), ==, 2);
	g_assert_true(wakeup_source_by_id(f.engine, 0) == a);
	g_assert_true(wakeup_source_by_id(f.engine, 1) == b);
	g_assert_true(wakeup_source_by_id(f.engine, 2) == c);
	g_assert_null(wakeup_source_by_id(f.engine, 3));

	/* The lowest hole is filled first, then the next one up. */
	wakeup_source_unregister(c);
	wakeup_source_unregister(a);
	g_assert_null(wakeup_source_by_id(f.engine, 0));
	g_assert_null(wakeup_source_by_id(f.engine, 2));
	g_assert_true(wakeup_source_by_id(f.engine, 1) == b);
	d = reg(&f, "d");
	g_assert_cmpuint(wakeup_source_id(d), ==, 0);
	e = reg(&f, "e");
	g_assert_cmpuint(wakeup_source_id(e), ==, 2);
	g_assert_true(wakeup_source_by_id(f.engine, 2) == e);
	wakeup_source_unregister(e);
	e = reg(&f, "e2");
	g_assert_cmpuint(wakeup_source_id(e), ==, 2);
	c = reg(&f, "c2");
	g_assert_cmpuint(wakeup_source_id(c), ==, 3);

	/* Activity does not change ids. */
	wakeup_source_stay_awake(b);
	wakeup_source_relax(b);
	g_assert_cmpuint(wakeup_source_id(b), ==, 1);

	wakeup_source_unregister(b);
	wakeup_source_unregister(c);
	wakeup_source_unregister(d);
	wakeup_source_unregister(e);
	for (guint i = 0; i < 5; i++)
		g_assert_null(wakeup_source_by_id(f.engine, i));
	a = reg(&f, "again");
	g_assert_cmpuint(wakeup_source_id(a), ==, 0);
	wakeup_source_unregister(a);
	fixture_fini(&f);
}

/* Many sources, freed out of order: each new one takes the lowest hole. */
static void test_ids_reuse_many(void)
{
	struct fixture f;
	struct wakeup_source *ws[64];

	fixture_init(&f);
	for (guint i = 0; i < G_N_ELEMENTS(ws); i++) {
		ws[i] = reg(&f, "x");
		g_assert_cmpuint(wakeup_source_id(ws[i]), ==, i);
	}
	for (guint i = 1; i < G_N_ELEMENTS(ws); i += 3)
		wakeup_source_unregister(ws[i]);
	for (guint i = 1; i < G_N_ELEMENTS(ws); i += 3) {
		ws[i] = reg(&f, "y");
		g_assert_cmpuint(wakeup_source_id(ws[i]), ==, i);
		g_assert_true(wakeup_source_by_id(f.engine, i) == ws[i]);
	}
	g_assert_cmpuint(wakeup_source_id(reg(&f, "z")), ==, G_N_ELEMENTS(ws));
	fixture_fini(&f); /* unregisters the rest */
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/wakeup/register", test_register);
	g_test_add_func("/wakeup/activate-relax", test_activate_relax);
	g_test_add_func("/wakeup/stay-awake-active", test_stay_awake_active);
	g_test_add_func("/wakeup/timeout/exact", test_timeout_exact);
	g_test_add_func("/wakeup/timeout/shorter-keeps-longer",
			test_timeout_shorter_keeps_longer);
	g_test_add_func("/wakeup/timeout/longer-extends",
			test_timeout_longer_extends);
	g_test_add_func("/wakeup/timeout/stay-awake-cancels",
			test_stay_awake_cancels_timeout);
	g_test_add_func("/wakeup/timeout/zero", test_event_zero);
	g_test_add_func("/wakeup/handshake/save", test_handshake_save);
	g_test_add_func("/wakeup/handshake/pending", test_handshake_pending);
	g_test_add_func("/wakeup/wait-idle/fires", test_wait_idle);
	g_test_add_func("/wakeup/wait-idle/cancel", test_wait_idle_cancel);
	g_test_add_func("/wakeup/wakeup-event", test_wakeup_event);
	g_test_add_func("/wakeup/changed-event", test_changed_event);
	g_test_add_func("/wakeup/activity-event", test_activity_event);
	g_test_add_func("/wakeup/stats/print-format", test_print_stats_format);
	g_test_add_func("/wakeup/stats/deleted", test_print_stats_deleted);
	g_test_add_func("/wakeup/stats/times", test_stats_times);
	g_test_add_func("/wakeup/stats/sub-ms", test_stats_sub_ms);
	g_test_add_func("/wakeup/stats/prevent-suspend-time",
			test_prevent_suspend_time);
	g_test_add_func("/wakeup/stats/get", test_get_stats);
	g_test_add_func("/wakeup/foreach", test_foreach);
	g_test_add_func("/wakeup/ids", test_ids);
	g_test_add_func("/wakeup/ids/reuse-many", test_ids_reuse_many);
	return g_test_run();
}
