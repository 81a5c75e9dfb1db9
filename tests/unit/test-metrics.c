/* test-metrics.c - unit tests of the Prometheus text (src/records/metrics.c) against
 * a fake clock: label escapes, names that are not UTF-8, the times of an
 * active source.  Writing the file is tested on a real mount
 * (tests/test_metrics.py).
 */
#include <string.h>
#include <glib.h>

#include "powerfs/engine/backend.h"
#include "powerfs/engine/clock.h"
#include "powerfs/records/metrics.h"
#include "powerfs/engine/power.h"

#define T0 G_GINT64_CONSTANT(1000000000)
#define MS(x) ((gint64)(x)*1000)

static struct power *power_setup(void)
{
	struct pf_clock *clock = pf_clock_new_fake(T0);
	struct power_options opts = { 100, 300, FALSE, NULL };

	return power_new(
		clock, backend_simulate_new(clock, 1000, PM_STATE_BIT(PM_MEM)),
		&opts);
}

static char *render(struct power *pw)
{
	GString *out = g_string_new(NULL);

	pf_metrics_render(pw, out);
	return g_string_free(out, FALSE);
}

static void assert_has_line(const char *text, const char *line)
{
	g_autofree char *full = g_strconcat("\n", line, "\n", NULL);

	if (!strstr(text, full))
		g_error("no line \"%s\" in:\n%s", line, text);
}

/* A name from the engine may hold any byte but NUL: a newline too (a wake
 * lock's cannot, a name ends at whitespace). */
static void test_escapes(void)
{
	struct power *pw = power_setup();
	static const char name[] = "a\nb\\c\"d";
	struct wakeup_source *ws =
		wakeup_source_register(pw->engine, name, strlen(name));
	g_autofree char *text = NULL;

	wakeup_source_event(ws, 0);
	text = render(pw);
	assert_has_line(
		text,
		"powerfs_wakeup_source_events_total{source=\"a\\nb\\\\c\\\"d\","
		"kind=\"wake_lock\"} 1");
	g_assert_true(g_utf8_validate(text, -1, NULL));
	wakeup_source_unregister(ws);
	power_free(pw);
}

/* Each byte that is no part of valid UTF-8 becomes U+FFFD, and the name's
 * bytes are given in hex, so that two such names stay two series. */
static void test_not_utf8(void)
{
	struct power *pw = power_setup();
	struct wakeup_source *a =
		wakeup_source_register(pw->engine, "x\xff", 2);
	struct wakeup_source *b =
		wakeup_source_register(pw->engine, "x\xfe", 2);
	struct wakeup_source *c =
		wakeup_source_register(pw->engine, "\xc3\xa9\xc3", 3);
	g_autofree char *text = render(pw);

	assert_has_line(text,
			"powerfs_wakeup_source_active{source=\"x\xef\xbf\xbd\","
			"source_hex=\"78ff\",kind=\"wake_lock\"} 0");
	assert_has_line(text,
			"powerfs_wakeup_source_active{source=\"x\xef\xbf\xbd\","
			"source_hex=\"78fe\",kind=\"wake_lock\"} 0");
	assert_has_line(
		text,
		"powerfs_wakeup_source_active{source=\"\xc3\xa9\xef\xbf\xbd\","
		"source_hex=\"c3a9c3\",kind=\"wake_lock\"} 0");
	g_assert_true(g_utf8_validate(text, -1, NULL));
	wakeup_source_unregister(a);
	wakeup_source_unregister(b);
	wakeup_source_unregister(c);
	power_free(pw);
}

/* An active source's time is counted up to the moment of rendering, as a
 * read of wakeup_sources counts it; seconds to the millisecond. */
static void test_active_times(void)
{
	struct power *pw = power_setup();
	struct wakeup_source *ws = wakeup_source_register(pw->engine, "w", 1);
	g_autofree char *held = NULL, *after = NULL;

	wakeup_source_stay_awake(ws);
	pf_clock_fake_advance(pw->clock, MS(1234) + 999);
	held = render(pw);
	assert_has_line(held, "powerfs_wakeup_source_active_seconds_total"
			      "{source=\"w\",kind=\"wake_lock\"} 1.234");
	assert_has_line(held, "powerfs_wakeup_source_active"
			      "{source=\"w\",kind=\"wake_lock\"} 1");
	assert_has_line(held, "powerfs_wakeup_sources_active 1");
	wakeup_source_relax(ws);
	pf_clock_fake_advance(pw->clock, MS(5000));
	after = render(pw);
	assert_has_line(after, "powerfs_wakeup_source_active_seconds_total"
			       "{source=\"w\",kind=\"wake_lock\"} 1.234");
	assert_has_line(after, "powerfs_wakeup_sources_active 0");
	/* Newest first, the kernel's autosleep source, "deleted" last. */
	g_assert_true(
		strstr(after, "{source=\"w\"") <
		strstr(after, "{source=\"autosleep\",kind=\"autosleep\"}"));
	g_assert_nonnull(strstr(after,
				"{source=\"autosleep\",kind=\"autosleep\""
				"} 0\npowerfs_wakeup_source_activations"
				"_total{source=\"deleted\","
				"kind=\"deleted\"} 0\n"));
	wakeup_source_unregister(ws);
	power_free(pw);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/metrics/escapes", test_escapes);
	g_test_add_func("/metrics/not-utf8", test_not_utf8);
	g_test_add_func("/metrics/active-times", test_active_times);
	return g_test_run();
}
