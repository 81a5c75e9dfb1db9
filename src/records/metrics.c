/* metrics.c - the statistics for Prometheus (--metrics-dir=DIR).
 *
 * DIR/powerfs.prom holds, in the text exposition format (version 0.0.4),
 * what wakeup_sources and suspend_stats say, for node_exporter's textfile
 * collector: per source its counters and times, the number of sources
 * active, the suspends that succeeded and those that failed at each step.
 *
 * The file is replaced whole, never edited: the text is written to a
 * temporary file in DIR ("powerfs.prom.XXXXXX", which the collector, reading
 * only *.prom, ignores), then renamed over the old one, so a scrape sees the
 * old file or the new one.  Nothing is fsync()ed: the numbers are this
 * boot's (powerfs starts clean on a new boot, as the kernel does) and the
 * file is written afresh at every start, so a crash of the whole system
 * costs nothing that matters.  An fsync would force every version to the
 * disk, megabytes with many thousands of sources, on the machines that care most about
 * power; without it a version replaced before writeback never reaches it.
 *
 * It is written when something changed and at most every MIN_INTERVAL_US:
 * a change arms one timer if none is armed, and the timer writes.  So an
 * idle powerfs stays idle (no timer runs without a change), and a burst of
 * changes costs one write.  The times of an active source are those of the
 * moment of the write, as a read of wakeup_sources would give them then;
 * they do not grow in the file while nothing else changes.
 *
 * The text is built on the main loop (it reads the engine), the file written
 * by a thread of its own, so a slow disk never holds the loop.
 *
 * Label values are escaped as the format wants (backslash, double quote,
 * newline).  The format is UTF-8 but a source's name is any bytes: a name
 * that is not valid UTF-8 has each bad byte shown as U+FFFD in "source",
 * and its exact bytes in hex in a "source_hex" label, so no two sources
 * ever share a label set (a duplicate would make the collector reject the
 * whole file).  For the same reason a "kind" label tells a wake lock from
 * the kernel's own "autosleep" source and from the "deleted" row, whose
 * names a wake lock may take too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "powerfs/records/metrics.h"

/* A scrape every 15 s or more (the usual) sees numbers at most this old. */
#define MIN_INTERVAL_US (2 * G_USEC_PER_SEC)
/* After a quiet time, wait this long for the rest of a burst. */
#define GATHER_US (G_USEC_PER_SEC / 20)

struct pf_metrics {
	struct power *pw;
	char *path;
	struct pf_timer *timer;
	gint64 last_write;   /* when the text was last built */
	gint writing;	     /* atomic: a text is in the writer's hands */
	GThreadPool *writer; /* one thread: writes land in order */
	gboolean failing;    /* the writer's own: its last write failed */
};

/* --- the text ------------------------------------------------------------- */

enum value_kind { COUNT, MILLISECONDS, ACTIVE };

static const struct family {
	const char *name, *type, *help;
	enum value_kind kind;
	gsize offset; /* in struct wakeup_stats */
} families[] = {
	{ "powerfs_wakeup_source_activations_total", "counter",
	  "Times the source became active (wakeup_sources: active_count).",
	  COUNT, offsetof(struct wakeup_stats, active_count) },
	{ "powerfs_wakeup_source_events_total", "counter",
	  "Wakeup events the source signalled (event_count).", COUNT,
	  offsetof(struct wakeup_stats, event_count) },
	{ "powerfs_wakeup_source_wakeups_total", "counter",
	  "Events signalled while a suspend was being prepared, which abort "
	  "it (wakeup_count).",
	  COUNT, offsetof(struct wakeup_stats, wakeup_count) },
	{ "powerfs_wakeup_source_expirations_total", "counter",
	  "Times the source's timeout ended an activation (expire_count).",
	  COUNT, offsetof(struct wakeup_stats, expire_count) },
	{ "powerfs_wakeup_source_active_seconds_total", "counter",
	  "Time the source has been active (total_time).", MILLISECONDS,
	  offsetof(struct wakeup_stats, total_time_ms) },
	{ "powerfs_wakeup_source_prevent_suspend_seconds_total", "counter",
	  "Time the source was active while autosleep was on "
	  "(prevent_suspend_time).",
	  MILLISECONDS,
	  offsetof(struct wakeup_stats, prevent_suspend_time_ms) },
	{ "powerfs_wakeup_source_active", "gauge",
	  "1 while the source is active, else 0.", ACTIVE, 0 },
};

/* The kernel's suspend steps, in suspend_stats's order. */
static const char *const steps[] = {
	"freeze",	 "prepare",	 "suspend",	 "suspend_late",
	"suspend_noirq", "resume_noirq", "resume_early", "resume",
};

/* By hand: a printf per sample would be most of the cost with many
 * sources. */
static void append_uint(GString *out, guint64 v)
{
	char buf[24];
	gsize i = sizeof(buf);

	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	g_string_append_len(out, buf + i, sizeof(buf) - i);
}

/* Milliseconds as seconds, exactly: "12.345". */
static void append_seconds(GString *out, gint64 ms)
{
	guint64 v = (guint64)MAX(ms, 0);

	append_uint(out, v / 1000);
	g_string_append_c(out, '.');
	g_string_append_c(out, (char)('0' + v / 100 % 10));
	g_string_append_c(out, (char)('0' + v / 10 % 10));
	g_string_append_c(out, (char)('0' + v % 10));
}

/* A label value: backslash, double quote and newline escaped, the rest as
 * it is (the caller makes it UTF-8). */
static void append_label_value(GString *out, const char *value)
{
	for (const char *p = value; *p;) {
		gsize n = strcspn(p, "\\\"\n");

		g_string_append_len(out, p, n);
		p += n;
		if (!*p)
			break;
		g_string_append_c(out, '\\');
		g_string_append_c(out, *p == '\n' ? 'n' : *p);
		p++;
	}
}

static void append_source_labels(GString *out, const char *name,
				 const char *kind)
{
	static const char hex[] = "0123456789abcdef";

	g_string_append(out, "{source=\"");
	if (g_utf8_validate(name, -1, NULL)) {
		append_label_value(out, name);
	} else {
		g_autofree char *valid = g_utf8_make_valid(name, -1);

		append_label_value(out, valid);
		g_string_append(out, "\",source_hex=\"");
		for (const char *p = name; *p; p++) {
			g_string_append_c(out, hex[(guchar)*p >> 4]);
			g_string_append_c(out, hex[(guchar)*p & 0xf]);
		}
	}
	g_string_append(out, "\",kind=\"");
	g_string_append(out, kind);
	g_string_append(out, "\"} ");
}

struct row {
	gsize labels, labels_len; /* in the labels buffer */
	gboolean active;
	struct wakeup_stats stats;
};

struct rows {
	struct power *pw;
	GArray *rows;
	GString *labels;
};

static void add_row(struct rows *r, const struct wakeup_source *ws,
		    const char *kind)
{
	struct row row = { .labels = r->labels->len,
			   .active = wakeup_source_active(ws) };

	append_source_labels(r->labels, wakeup_source_name(ws), kind);
	row.labels_len = r->labels->len - row.labels;
	wakeup_source_get_stats(ws, &row.stats);
	g_array_append_val(r->rows, row);
}

static void visit_source(const struct wakeup_source *ws, gpointer data)
{
	struct rows *r = data;

	add_row(r, ws,
		ws == autosleep_source(r->pw->autosleep) ? "autosleep" :
							   "wake_lock");
}

static void append_header(GString *out, const char *name, const char *type,
			  const char *help)
{
	g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
			       name, type);
}

static void append_value(GString *out, const struct family *f,
			 const struct row *row)
{
	const char *field = (const char *)&row->stats + f->offset;

	switch (f->kind) {
	case COUNT:
		append_uint(out, *(const gulong *)field);
		break;
	case MILLISECONDS:
		append_seconds(out, *(const gint64 *)field);
		break;
	case ACTIVE:
		g_string_append_c(out, row->active ? '1' : '0');
		break;
	}
	g_string_append_c(out, '\n');
}

/* One allocation for the whole text, at most a little too big: grown by
 * doubling, a large text would pass through buffers of twice its size. */
static void reserve(GString *out, const struct rows *r)
{
	gsize len = out->len, need = 4096;

	/* A value is at most 20 digits, a dot and a newline. */
	for (gsize i = 0; i < G_N_ELEMENTS(families); i++)
		need += 256 + r->rows->len * (strlen(families[i].name) + 24) +
			r->labels->len;
	g_string_set_size(out, len + need);
	g_string_truncate(out, len);
}

/* Sources in wakeup_sources's order: newest first, "deleted" last. */
void pf_metrics_render(struct power *pw, GString *out)
{
	const struct suspend_stats *st = suspend_get_stats(pw->suspend);
	const int failed[G_N_ELEMENTS(steps)] = {
		st->failed_freeze,	  st->failed_prepare,
		st->failed_suspend,	  st->failed_suspend_late,
		st->failed_suspend_noirq, st->failed_resume_noirq,
		st->failed_resume_early,  st->failed_resume,
	};
	struct rows r = { pw, g_array_new(FALSE, FALSE, sizeof(struct row)),
			  g_string_new(NULL) };

	wakeup_foreach_source(pw->engine, visit_source, &r);
	add_row(&r, wakeup_deleted_source(pw->engine), "deleted");
	reserve(out, &r);
	for (gsize i = 0; i < G_N_ELEMENTS(families); i++) {
		const struct family *f = &families[i];

		append_header(out, f->name, f->type, f->help);
		for (guint j = 0; j < r.rows->len; j++) {
			const struct row *row =
				&g_array_index(r.rows, struct row, j);

			g_string_append(out, f->name);
			g_string_append_len(out, r.labels->str + row->labels,
					    row->labels_len);
			append_value(out, f, row);
		}
	}
	append_header(out, "powerfs_wakeup_sources_active", "gauge",
		      "Wakeup sources active now (events in progress).");
	g_string_append(out, "powerfs_wakeup_sources_active ");
	append_uint(out, wakeup_events_in_progress(pw->engine));
	g_string_append_c(out, '\n');
	append_header(out, "powerfs_suspend_success_total", "counter",
		      "Suspends that succeeded (suspend_stats: success).");
	g_string_append(out, "powerfs_suspend_success_total ");
	append_uint(out, (guint)st->success);
	g_string_append_c(out, '\n');
	append_header(out, "powerfs_suspend_failures_total", "counter",
		      "Suspends that failed, by the step that failed "
		      "(suspend_stats: failed_STEP; their sum is fail).");
	for (gsize i = 0; i < G_N_ELEMENTS(steps); i++) {
		g_string_append(out, "powerfs_suspend_failures_total{step=\"");
		g_string_append(out, steps[i]);
		g_string_append(out, "\"} ");
		append_uint(out, (guint)failed[i]);
		g_string_append_c(out, '\n');
	}
	g_array_unref(r.rows);
	g_string_free(r.labels, TRUE);
}

/* --- the file ------------------------------------------------------------- */

/* On the main loop: the writer's news (log.c is not for other threads). */
static gboolean say(gpointer data)
{
	const char *text = data;

	if (*text == '!')
		g_warning("%s", text + 1);
	else
		g_message("%s", text);
	return G_SOURCE_REMOVE;
}

/* Always through the loop: g_main_context_invoke() would run say() right
 * here if the loop did not own its context yet. */
static void say_later(char *text)
{
	GSource *source = g_idle_source_new();

	g_source_set_priority(source, G_PRIORITY_DEFAULT);
	g_source_set_callback(source, say, text, g_free);
	g_source_attach(source, NULL);
	g_source_unref(source);
}

/* Replaces path with data: a temporary file beside it, renamed over it.
 * Mode 0644 less the umask.  No fsync (see above). */
static gboolean replace_file(const char *path, const char *data, gsize len,
			     GError **error)
{
	g_autofree char *tmp = g_strconcat(path, ".XXXXXX", NULL);
	int fd = g_mkstemp_full(tmp, O_WRONLY | O_CLOEXEC, 0644);
	int err = 0;

	if (fd < 0) {
		err = errno;
		goto fail;
	}
	while (len) {
		gssize n = write(fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = errno;
			break;
		}
		data += n;
		len -= (gsize)n;
	}
	if (close(fd) < 0 && !err)
		err = errno;
	if (!err && rename(tmp, path) < 0)
		err = errno;
	if (!err)
		return TRUE;
	unlink(tmp);
fail:
	g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err),
		    "cannot write %s: %s", path, g_strerror(err));
	return FALSE;
}

/* In the writer's thread: nothing here may touch the engine or log. */
static void write_file(gpointer data, gpointer user_data)
{
	GString *text = data;
	struct pf_metrics *m = user_data;
	g_autoptr(GError) error = NULL;

	if (!replace_file(m->path, text->str, text->len, &error)) {
		/* Said once, not at every write while it lasts. */
		if (!m->failing)
			say_later(g_strdup_printf("!metrics: %s",
						  error->message));
		m->failing = TRUE;
	} else if (m->failing) {
		m->failing = FALSE;
		say_later(
			g_strdup_printf("metrics: %s written again", m->path));
	}
	g_string_free(text, TRUE);
	g_atomic_int_set(&m->writing, FALSE);
}

static void write_now(gpointer data)
{
	struct pf_metrics *m = data;
	gint64 start = pf_clock_now(m->pw->clock);
	GString *text;

	/* A disk slower than the changes: one text at a time, the newest. */
	if (g_atomic_int_get(&m->writing)) {
		pf_timer_arm(m->timer, start + MIN_INTERVAL_US);
		return;
	}
	text = g_string_new(NULL);
	pf_metrics_render(m->pw, text);
	m->last_write = start;
	g_debug("metrics: %zu bytes built in %" G_GINT64_FORMAT " us",
		text->len, pf_clock_now(m->pw->clock) - start);
	g_atomic_int_set(&m->writing, TRUE);
	g_thread_pool_push(m->writer, text, NULL);
}

static void changed(struct pf_event *ev, gpointer data)
{
	struct pf_metrics *m = data;
	gint64 now;

	(void)ev;
	if (pf_timer_is_armed(m->timer))
		return;
	now = pf_clock_now(m->pw->clock);
	pf_timer_arm(m->timer,
		     MAX(now + GATHER_US, m->last_write + MIN_INTERVAL_US));
}

struct pf_metrics *pf_metrics_open(const char *dir, struct power *pw)
{
	struct pf_metrics *m = g_new0(struct pf_metrics, 1);

	m->pw = pw;
	m->path = g_build_filename(dir, PF_METRICS_FILE, NULL);
	m->timer = pf_timer_new(pw->clock, write_now, m);
	/* Exclusive: its thread waits for work without a timeout, so an idle
	 * powerfs stays idle.  A shared pool's thread (GTask's) waits half a
	 * second, then wakes up to go to GLib's pool of unused threads. */
	m->writer = g_thread_pool_new(write_file, m, 1, TRUE, NULL);
	/* Now: what a previous powerfs left is not this one's. */
	write_now(m);
	pf_events_subscribe(pw->events, PF_EVENT_BIT(PF_EVENT_CHANGED), changed,
			    m);
	return m;
}

void pf_metrics_close(struct pf_metrics *m, gboolean remove)
{
	if (!m)
		return;
	pf_events_unsubscribe(m->pw->events, changed, m);
	/* Waits for the write in progress. */
	g_thread_pool_free(m->writer, FALSE, TRUE);
	pf_timer_free(m->timer);
	if (remove && unlink(m->path) < 0 && errno != ENOENT)
		g_warning("metrics: cannot remove %s: %s", m->path,
			  g_strerror(errno));
	g_free(m->path);
	g_free(m);
}
