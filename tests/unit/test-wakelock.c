/* test-wakelock.c - unit tests of the user wake lock registry
 * (src/engine/wakelock.c): lock/unlock, the limit, the sysfs listings, timeouts and
 * garbage collection, against a fake clock.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <glib.h>

#include "powerfs/engine/clock.h"
#include "powerfs/engine/wakelock.h"
#include "powerfs/engine/wakeup.h"

#define T0 G_GINT64_CONSTANT(1000000000)
#define MS(x) ((gint64)(x)*1000)
#define SEC(x) ((gint64)(x)*1000000)

struct fixture {
	struct pf_clock *clock;
	struct wakeup_engine *engine;
	struct wakelocks *wls;
};

static void fixture_init(struct fixture *f, guint limit, guint gc_seconds)
{
	f->clock = pf_clock_new_fake(T0);
	f->engine = wakeup_engine_new(f->clock);
	f->wls = wakelocks_new(f->engine, f->clock, limit, gc_seconds);
	g_assert_nonnull(f->wls);
}

static void fixture_fini(struct fixture *f)
{
	wakelocks_free(f->wls);
	wakeup_engine_free(f->engine);
	pf_clock_free(f->clock);
}

static int lock(struct fixture *f, const char *name, guint64 timeout_ns)
{
	return wakelocks_lock(f->wls, name, strlen(name), timeout_ns, NULL);
}

static int unlock(struct fixture *f, const char *name)
{
	return wakelocks_unlock(f->wls, name, strlen(name), NULL);
}

static char *show(struct fixture *f, gboolean active)
{
	GString *out = g_string_new(NULL);

	wakelocks_show(f->wls, active, out);
	return g_string_free(out, FALSE);
}

static void assert_show(struct fixture *f, gboolean active, const char *exp)
{
	char *s = show(f, active);

	g_assert_cmpstr(s, ==, exp);
	g_free(s);
}

static guint count_of(struct fixture *f)
{
	guint c = 0;

	wakeup_get_count(f->engine, &c);
	return c;
}

static void advance(struct fixture *f, gint64 delta_us)
{
	pf_clock_fake_advance(f->clock, delta_us);
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

static const struct wakeup_source *find_ws(struct fixture *f, const char *name)
{
	struct find fd = { name, NULL };

	wakeup_foreach_source(f->engine, find_visit, &fd);
	return fd.ws;
}

static gboolean is_active(struct fixture *f, const char *name)
{
	const struct wakeup_source *ws = find_ws(f, name);

	g_assert_nonnull(ws);
	return wakeup_source_active(ws);
}

static struct wakeup_stats stats_of(struct fixture *f, const char *name)
{
	const struct wakeup_source *ws = find_ws(f, name);
	struct wakeup_stats st;

	g_assert_nonnull(ws);
	wakeup_source_get_stats(ws, &st);
	return st;
}

static char *deleted_row(struct fixture *f)
{
	GString *out = g_string_new(NULL);
	char *start, *res;

	wakeup_print_stats(f->engine, out);
	g_assert_true(out->len > 1);
	g_assert_cmpint(out->str[out->len - 1], ==, '\n');
	out->str[out->len - 1] = '\0';
	start = strrchr(out->str, '\n');
	g_assert_nonnull(start);
	res = g_strdup_printf("%s\n", start + 1);
	g_string_free(out, TRUE);
	return res;
}

static char *deleted_expected(gulong active_count, gulong event_count,
			      gint64 total, gint64 max)
{
	return g_strdup_printf(
		"%-12s\t%lu\t\t%lu\t\t0\t\t0\t\t0\t\t%" G_GINT64_FORMAT
		"\t\t%" G_GINT64_FORMAT "\t\t0\t\t0\n",
		"deleted", active_count, event_count, total, max);
}

/* ------------------------------------------------------------------ */

static void test_lock_unlock(void)
{
	struct fixture f;
	struct wakeup_stats st;
	guint c0;

	fixture_init(&f, 100, 300);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 0);
	c0 = count_of(&f);

	/* The name is len bytes. */
	g_assert_cmpint(wakelocks_lock(f.wls, "foobar", 3, 0, NULL), ==, 0);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 1);
	g_assert_true(is_active(&f, "foo"));
	g_assert_null(find_ws(&f, "foobar"));
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 1);
	assert_show(&f, TRUE, "foo\n");
	assert_show(&f, FALSE, "\n");

	/* Not reference counted: a second lock only counts an event. */
	g_assert_cmpint(lock(&f, "foo", 0), ==, 0);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 1);
	st = stats_of(&f, "foo");
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 2);

	g_assert_cmpint(wakelocks_unlock(f.wls, "foo\n", 3, NULL), ==, 0);
	g_assert_false(is_active(&f, "foo"));
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 0);
	g_assert_cmpuint(count_of(&f), ==, c0 + 1);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 1);
	assert_show(&f, TRUE, "\n");
	assert_show(&f, FALSE, "foo\n");

	/* Unlocking an inactive lock succeeds and changes nothing. */
	g_assert_cmpint(unlock(&f, "foo"), ==, 0);
	g_assert_cmpuint(count_of(&f), ==, c0 + 1);
	st = stats_of(&f, "foo");
	g_assert_cmpuint(st.active_count, ==, 1);
	g_assert_cmpuint(st.event_count, ==, 2);

	/* Lock again. */
	g_assert_cmpint(lock(&f, "foo", 0), ==, 0);
	g_assert_true(is_active(&f, "foo"));
	g_assert_cmpuint(stats_of(&f, "foo").active_count, ==, 2);
	g_assert_cmpint(unlock(&f, "foo"), ==, 0);
	g_assert_cmpuint(count_of(&f), ==, c0 + 2);

	fixture_fini(&f);
}

static void test_unlock_unknown(void)
{
	struct fixture f;
	guint c0;

	fixture_init(&f, 100, 300);
	c0 = count_of(&f);
	g_assert_cmpint(unlock(&f, "nope"), ==, -EINVAL);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 0);
	g_assert_null(find_ws(&f, "nope"));

	g_assert_cmpint(lock(&f, "foo", 0), ==, 0);
	/* Prefixes and extensions are other names. */
	g_assert_cmpint(unlock(&f, "fo"), ==, -EINVAL);
	g_assert_cmpint(unlock(&f, "foox"), ==, -EINVAL);
	g_assert_cmpint(wakelocks_unlock(f.wls, "foo", 2, NULL), ==, -EINVAL);
	g_assert_true(is_active(&f, "foo"));
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 1);
	g_assert_cmpuint(count_of(&f), ==, c0);
	g_assert_cmpint(unlock(&f, "foo"), ==, 0);
	g_assert_false(is_active(&f, "foo"));
	fixture_fini(&f);
}

static void test_limit(void)
{
	struct fixture f;

	fixture_init(&f, 3, 300);
	g_assert_cmpint(lock(&f, "a", 0), ==, 0);
	g_assert_cmpint(lock(&f, "b", 0), ==, 0);
	g_assert_cmpint(lock(&f, "c", 1000000), ==, 0);
	g_assert_cmpint(lock(&f, "d", 0), ==, -ENOSPC);
	g_assert_cmpint(lock(&f, "d", 1000000), ==, -ENOSPC);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 3);
	g_assert_null(find_ws(&f, "d"));
	assert_show(&f, TRUE, "a b c\n");

	/* Re-locking an existing one always works. */
	g_assert_cmpint(lock(&f, "a", 0), ==, 0);
	g_assert_cmpint(lock(&f, "b", 5000000), ==, 0);
	/* Inactive locks still take their place. */
	g_assert_cmpint(unlock(&f, "a"), ==, 0);
	g_assert_cmpint(lock(&f, "d", 0), ==, -ENOSPC);
	g_assert_cmpint(lock(&f, "a", 0), ==, 0);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 3);
	/* -ENOSPC counted no event and left nothing behind. */
	assert_show(&f, TRUE, "a b c\n");
	assert_show(&f, FALSE, "\n");
	fixture_fini(&f);

	/* Limit 0: unlimited. */
	fixture_init(&f, 0, 300);
	for (int i = 0; i < 250; i++) {
		char name[32];

		g_snprintf(name, sizeof(name), "lock%03d", i);
		g_assert_cmpint(lock(&f, name, 0), ==, 0);
	}
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 250);
	g_assert_cmpuint(wakeup_events_in_progress(f.engine), ==, 250);
	fixture_fini(&f);

	/* Limit 100 (the kernel's): the 101st distinct name fails. */
	fixture_init(&f, 100, 300);
	for (int i = 0; i < 100; i++) {
		char name[32];

		g_snprintf(name, sizeof(name), "lock%03d", i);
		g_assert_cmpint(lock(&f, name, 0), ==, 0);
	}
	g_assert_cmpint(lock(&f, "one-more", 0), ==, -ENOSPC);
	g_assert_cmpint(lock(&f, "lock042", 0), ==, 0);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 100);
	fixture_fini(&f);
}

static void test_show_sorted(void)
{
	struct fixture f;

	fixture_init(&f, 100, 300);
	assert_show(&f, TRUE, "\n");
	assert_show(&f, FALSE, "\n");

	g_assert_cmpint(lock(&f, "b", 0), ==, 0);
	g_assert_cmpint(lock(&f, "\xc3\xa9t\xc3\xa9", 0), ==, 0); /* "été" */
	g_assert_cmpint(lock(&f, "a", 0), ==, 0);
	g_assert_cmpint(lock(&f, "B", 0), ==, 0);
	g_assert_cmpint(lock(&f, "_x", 0), ==, 0);
	g_assert_cmpint(lock(&f, "ab", 0), ==, 0);
	g_assert_cmpint(lock(&f, "zz", 0), ==, 0);
	g_assert_cmpint(lock(&f, "a0", 0), ==, 0);
	g_assert_cmpint(unlock(&f, "ab"), ==, 0);
	g_assert_cmpint(unlock(&f, "zz"), ==, 0);
	g_assert_cmpint(unlock(&f, "a0"), ==, 0);

	/* strcmp order (unsigned bytes), single spaces, no trailing space. */
	assert_show(&f, TRUE, "B _x a b \xc3\xa9t\xc3\xa9\n");
	assert_show(&f, FALSE, "a0 ab zz\n");

	g_assert_cmpint(unlock(&f, "B"), ==, 0);
	g_assert_cmpint(unlock(&f, "_x"), ==, 0);
	g_assert_cmpint(unlock(&f, "a"), ==, 0);
	g_assert_cmpint(unlock(&f, "b"), ==, 0);
	g_assert_cmpint(unlock(&f, "\xc3\xa9t\xc3\xa9"), ==, 0);
	assert_show(&f, TRUE, "\n");
	assert_show(&f, FALSE, "B _x a a0 ab b zz \xc3\xa9t\xc3\xa9\n");
	fixture_fini(&f);
}

static void test_show_cap_single(void)
{
	struct fixture f;
	char *name, *s;

	fixture_init(&f, 100, 300);
	name = g_malloc(4096);
	memset(name, 'x', 4096);
	g_assert_cmpint(wakelocks_lock(f.wls, name, 4096, 0, NULL), ==, 0);
	s = show(&f, TRUE);
	g_assert_cmpuint(strlen(s), ==, 4095);
	g_assert_cmpint(memcmp(s, name, 4094), ==, 0);
	g_assert_cmpint(s[4094], ==, '\n');
	g_free(s);
	assert_show(&f, FALSE, "\n");

	/* The lock itself has its whole name. */
	g_assert_cmpint(wakelocks_unlock(f.wls, name, 4096, NULL), ==, 0);
	g_assert_cmpint(wakelocks_unlock(f.wls, name, 4095, NULL), ==, -EINVAL);
	s = show(&f, FALSE);
	g_assert_cmpuint(strlen(s), ==, 4095);
	g_assert_cmpint(s[4094], ==, '\n');
	g_free(s);
	assert_show(&f, TRUE, "\n");
	g_free(name);
	fixture_fini(&f);
}

static void test_show_cap_many(void)
{
	struct fixture f;
	char name[1001];
	char *s, *exp;
	GString *e;
	int i;

	/* Five 1000-byte names: four fit with their spaces (4004 bytes), the
	 * fifth is cut at the 4095-byte buffer (91 bytes), the last byte is
	 * dropped, then "\n". */
	fixture_init(&f, 100, 300);
	e = g_string_new(NULL);
	for (i = 0; i < 5; i++) {
		memset(name, 'a' + i, 1000);
		name[1000] = '\0';
		g_assert_cmpint(lock(&f, name, 0), ==, 0);
		if (i < 4) {
			g_string_append(e, name);
			g_string_append_c(e, ' ');
		}
	}
	for (i = 0; i < 90; i++)
		g_string_append_c(e, 'e');
	g_string_append_c(e, '\n');
	exp = g_string_free(e, FALSE);
	g_assert_cmpuint(strlen(exp), ==, 4095);
	s = show(&f, TRUE);
	g_assert_cmpuint(strlen(s), ==, 4095);
	g_assert_cmpstr(s, ==, exp);
	g_free(s);
	g_free(exp);
	fixture_fini(&f);

	/* Five 818-byte names fill the buffer exactly ("name " x 5 = 4095);
	 * a sixth vanishes and the last space becomes the newline. */
	fixture_init(&f, 100, 300);
	e = g_string_new(NULL);
	for (i = 0; i < 5; i++) {
		memset(name, 'a' + i, 818);
		name[818] = '\0';
		g_assert_cmpint(lock(&f, name, 0), ==, 0);
		if (i)
			g_string_append_c(e, ' ');
		g_string_append(e, name);
	}
	g_assert_cmpint(lock(&f, "zzz", 0), ==, 0);
	g_string_append_c(e, '\n');
	exp = g_string_free(e, FALSE);
	s = show(&f, TRUE);
	g_assert_cmpuint(strlen(s), ==, 4095);
	g_assert_cmpstr(s, ==, exp);
	g_free(s);
	g_free(exp);
	/* The inactive listing is independent of the active one. */
	g_assert_cmpint(unlock(&f, "zzz"), ==, 0);
	assert_show(&f, FALSE, "zzz\n");
	fixture_fini(&f);
}

/* Locks "t" with timeout_ns at the current time and checks that it is
 * released exactly expect_us later. */
static void check_timeout(struct fixture *f, guint64 timeout_ns,
			  gint64 expect_us)
{
	g_assert_cmpint(lock(f, "t", timeout_ns), ==, 0);
	g_assert_true(is_active(f, "t"));
	advance(f, expect_us - 1);
	g_assert_true(is_active(f, "t"));
	advance(f, 1);
	g_assert_false(is_active(f, "t"));
}

static void test_timeout_rounding(void)
{
	struct fixture f;
	gulong expired;

	fixture_init(&f, 100, 300);
	check_timeout(&f, 1, MS(1));
	check_timeout(&f, 999999, MS(1));
	check_timeout(&f, 1000000, MS(1));
	check_timeout(&f, 1000001, MS(2));
	check_timeout(&f, 1999999, MS(2));
	check_timeout(&f, 2000000, MS(2));
	check_timeout(&f, G_GUINT64_CONSTANT(2500000000), MS(2500));
	expired = stats_of(&f, "t").expire_count;
	g_assert_cmpuint(expired, ==, 7);
	assert_show(&f, FALSE, "t\n");
	fixture_fini(&f);
}

static void test_timeout_cap(void)
{
	struct fixture f;
	const gint64 cap_us = (gint64)G_MAXUINT32 * 1000;
	static const guint64 huge[] = {
		G_MAXUINT64,
		G_MAXUINT64 - 999998,		      /* 2^64 - 999999 */
		G_GUINT64_CONSTANT(4294967296000000), /* 2^32 ms */
		G_GUINT64_CONSTANT(4294967296000001),
		G_GUINT64_CONSTANT(8589934592000000), /* 2^33 ms */
	};
	guint i;

	for (i = 0; i < G_N_ELEMENTS(huge); i++) {
		fixture_init(&f, 100, 300);
		g_assert_cmpint(lock(&f, "t", huge[i]), ==, 0);
		g_assert_true(is_active(&f, "t"));
		advance(&f, 0);
		g_assert_true(is_active(&f, "t"));
		advance(&f, SEC(3600));
		g_assert_true(is_active(&f, "t"));
		/* Capped at 2^32 - 1 ms, to the microsecond. */
		advance(&f, cap_us - SEC(3600) - 1);
		g_assert_true(is_active(&f, "t"));
		advance(&f, 1);
		g_assert_false(is_active(&f, "t"));
		g_assert_cmpuint(stats_of(&f, "t").expire_count, ==, 1);
		fixture_fini(&f);
	}

	/* Exactly 2^32 - 1 ms is not cut either. */
	fixture_init(&f, 100, 300);
	check_timeout(&f, G_GUINT64_CONSTANT(4294967295000000), cap_us);
	fixture_fini(&f);
}

static void test_timeout_relock(void)
{
	struct fixture f;

	fixture_init(&f, 100, 300);

	/* Without timeout: cancels the pending one. */
	g_assert_cmpint(lock(&f, "t", 100000000), ==, 0);
	g_assert_cmpint(lock(&f, "t", 0), ==, 0);
	advance(&f, SEC(10));
	g_assert_true(is_active(&f, "t"));
	g_assert_cmpuint(stats_of(&f, "t").expire_count, ==, 0);
	g_assert_cmpint(unlock(&f, "t"), ==, 0);

	/* A shorter timeout never shortens an armed later one. */
	g_assert_cmpint(lock(&f, "t", 200000000), ==, 0);
	advance(&f, MS(50));
	g_assert_cmpint(lock(&f, "t", 100000000), ==, 0);
	advance(&f, MS(150) - 1);
	g_assert_true(is_active(&f, "t"));
	advance(&f, 1);
	g_assert_false(is_active(&f, "t"));

	/* A longer one extends. */
	g_assert_cmpint(lock(&f, "t", 100000000), ==, 0);
	advance(&f, MS(50));
	g_assert_cmpint(lock(&f, "t", 300000000), ==, 0);
	advance(&f, MS(300) - 1);
	g_assert_true(is_active(&f, "t"));
	advance(&f, 1);
	g_assert_false(is_active(&f, "t"));
	g_assert_cmpuint(stats_of(&f, "t").expire_count, ==, 2);

	/* A timeout on a lock held without one: released at the timeout. */
	g_assert_cmpint(lock(&f, "t", 0), ==, 0);
	g_assert_cmpint(lock(&f, "t", 100000000), ==, 0);
	advance(&f, MS(100));
	g_assert_false(is_active(&f, "t"));

	/* Unlock drops the timer: a later lock without timeout stays. */
	g_assert_cmpint(lock(&f, "t", 100000000), ==, 0);
	g_assert_cmpint(unlock(&f, "t"), ==, 0);
	g_assert_false(is_active(&f, "t"));
	g_assert_cmpint(lock(&f, "t", 0), ==, 0);
	advance(&f, MS(200));
	g_assert_true(is_active(&f, "t"));
	g_assert_cmpuint(stats_of(&f, "t").expire_count, ==, 3);
	fixture_fini(&f);
}

/* n unlocks of name, each after locking it, at the current time. */
static void cycles(struct fixture *f, const char *name, int n)
{
	for (int i = 0; i < n; i++) {
		g_assert_cmpint(lock(f, name, 0), ==, 0);
		g_assert_cmpint(unlock(f, name), ==, 0);
	}
}

/* A collection destroys at most 1024 locks in the unlock that starts it
 * and finishes from the main loop, a batch per dispatch; a lock held all
 * along (active, at the very tail) is stepped over each time. */
static void test_gc_batches(void)
{
	struct fixture f;
	char name[32];

	fixture_init(&f, 0, 1);
	g_assert_cmpint(lock(&f, "held", 0), ==, 0);
	for (int i = 0; i < 3000; i++) {
		g_snprintf(name, sizeof(name), "idle%d", i);
		cycles(&f, name, 1);
	}
	advance(&f, SEC(2));
	cycles(&f, "recent", 101); /* one of these collects */
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 3002 - 1024);
	g_assert_nonnull(find_ws(&f, "idle2999"));
	for (int i = 0; i < 10 && g_main_context_iteration(NULL, FALSE); i++)
		;
	g_assert_false(g_main_context_pending(NULL));
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 2);
	g_assert_nonnull(find_ws(&f, "held"));
	g_assert_nonnull(find_ws(&f, "recent"));
	fixture_fini(&f);
}

static void test_gc(void)
{
	struct fixture f;
	char *row, *exp;

	fixture_init(&f, 6, 300);

	/* T0: old1 held 5 s.  T0+5: old2 and stale used, oldactive locked
	 * for good. */
	g_assert_cmpint(lock(&f, "old1", 0), ==, 0);
	advance(&f, SEC(5));
	g_assert_cmpint(unlock(&f, "old1"), ==, 0); /* unlock 1 */
	cycles(&f, "old2", 1);			    /* 2 */
	cycles(&f, "stale", 1);			    /* 3 */
	g_assert_cmpint(lock(&f, "oldactive", 0), ==, 0);
	/* T0+150: mid used. */
	advance(&f, SEC(145));
	cycles(&f, "mid", 1); /* 4 */
	/* T0+400: old1, old2, stale, oldactive idle 395 s; mid 250 s.
	 * Unlocking the inactive stale again makes it the most recently
	 * used lock (its last activity stays at T0+5). */
	advance(&f, SEC(250));
	g_assert_cmpint(unlock(&f, "stale"), ==, 0); /* 5 */
	cycles(&f, "recent", 95);		     /* 100 */
	advance(&f, 0);
	advance(&f, MS(1));
	/* The 100th unlock does not collect. */
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 6);
	g_assert_nonnull(find_ws(&f, "old1"));
	g_assert_nonnull(find_ws(&f, "old2"));
	assert_show(&f, FALSE, "mid old1 old2 recent stale\n");
	g_assert_cmpint(lock(&f, "new", 0), ==, -ENOSPC);
	exp = deleted_expected(0, 0, 0, 0);
	row = deleted_row(&f);
	g_assert_cmpstr(row, ==, exp);
	g_free(row);
	g_free(exp);

	/* The 101st does: old1 and old2 go, oldactive (active) stays, the
	 * walk stops at mid (used 250 s ago), so stale, behind it in LRU
	 * order, stays too. */
	cycles(&f, "recent", 1); /* 101 */
	advance(&f, 0);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 4);
	g_assert_null(find_ws(&f, "old1"));
	g_assert_null(find_ws(&f, "old2"));
	g_assert_true(is_active(&f, "oldactive"));
	g_assert_nonnull(find_ws(&f, "mid"));
	g_assert_nonnull(find_ws(&f, "stale"));
	g_assert_nonnull(find_ws(&f, "recent"));
	assert_show(&f, TRUE, "oldactive\n");
	assert_show(&f, FALSE, "mid recent stale\n");
	g_assert_cmpint(unlock(&f, "old1"), ==, -EINVAL);
	exp = deleted_expected(2, 2, 5000, 5000);
	row = deleted_row(&f);
	g_assert_cmpstr(row, ==, exp);
	g_free(row);
	g_free(exp);
	/* Their places are free again. */
	g_assert_cmpint(lock(&f, "new", 0), ==, 0); /* T0+400 */
	g_assert_cmpint(unlock(&f, "new"), ==, 0);  /* 1 */
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 5);

	/* The count started again from 0.  T0+800: mid idle 650 s, stale
	 * 795 s (used 400 s ago), recent and new 400 s. */
	advance(&f, SEC(400));
	cycles(&f, "later", 99); /* 100 */
	advance(&f, 0);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 6);
	g_assert_nonnull(find_ws(&f, "mid"));
	cycles(&f, "later", 1); /* 101 */
	advance(&f, 0);
	g_assert_cmpuint(wakelocks_count(f.wls), ==, 2);
	assert_show(&f, TRUE, "oldactive\n");
	assert_show(&f, FALSE, "later\n");
	g_assert_null(find_ws(&f, "mid"));
	g_assert_null(find_ws(&f, "stale"));
	g_assert_null(find_ws(&f, "recent"));
	g_assert_null(find_ws(&f, "new"));
	/* old1, old2 + mid 1 + stale 1 + recent 96 + new 1 */
	exp = deleted_expected(101, 101, 5000, 5000);
	row = deleted_row(&f);
	g_assert_cmpstr(row, ==, exp);
	g_free(row);
	g_free(exp);

	/* Failed unlocks do not count toward a collection. */
	advance(&f, SEC(400));
	cycles(&f, "x", 99); /* 99 */
	for (int i = 0; i < 50; i++)
		g_assert_cmpint(unlock(&f, "nope"), ==, -EINVAL);
	advance(&f, 0);
	g_assert_nonnull(find_ws(&f, "later"));
	g_assert_cmpint(unlock(&f, "x"), ==, 0); /* 100 */
	advance(&f, 0);
	g_assert_nonnull(find_ws(&f, "later"));
	g_assert_cmpint(unlock(&f, "x"), ==, 0); /* 101 */
	advance(&f, 0);
	g_assert_null(find_ws(&f, "later"));
	g_assert_nonnull(find_ws(&f, "x"));
	g_assert_true(is_active(&f, "oldactive"));
	fixture_fini(&f);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/wakelock/lock-unlock", test_lock_unlock);
	g_test_add_func("/wakelock/unlock-unknown", test_unlock_unknown);
	g_test_add_func("/wakelock/limit", test_limit);
	g_test_add_func("/wakelock/show/sorted", test_show_sorted);
	g_test_add_func("/wakelock/show/cap-single", test_show_cap_single);
	g_test_add_func("/wakelock/show/cap-many", test_show_cap_many);
	g_test_add_func("/wakelock/timeout/rounding", test_timeout_rounding);
	g_test_add_func("/wakelock/timeout/cap", test_timeout_cap);
	g_test_add_func("/wakelock/timeout/relock", test_timeout_relock);
	g_test_add_func("/wakelock/gc", test_gc);
	g_test_add_func("/wakelock/gc/batches", test_gc_batches);
	return g_test_run();
}
