/* wakeup.c - the wakeup engine (the kernel's drivers/base/power/wakeup.c).
 *
 * A wakeup source is active while something must keep the system awake.  Two
 * counters tell whether suspending now would lose an event: the number of
 * events in progress (active sources) and the number of registered events
 * (completed activations).  User space reads the second through wakeup_count,
 * writes it back to arm the handshake, and a suspend attempt fails if either
 * counter moved in between.
 *
 * The kernel packs both counters into one 32-bit atomic, so its registered
 * count wraps at 65536; here they are plain integers and it wraps at 2^32.
 * Everything runs on one thread, so there are no locks.
 */
#include <string.h>

#include "powerfs/engine/text.h"
#include "powerfs/engine/wakeup.h"

struct wakeup_source {
	struct wakeup_engine *engine;
	char *name;
	GList link;	/* in engine->sources, newest first */
	guint id;	/* lowest free at registration (IDA) */
	guint64 serial; /* never reused: identifies the object */
	gboolean unregistering;
	GSequenceIter *timer_node; /* in engine->timeouts, if armed */
	gint64 timer_expires;	   /* 0 = no timeout armed */
	gint64 total_time, max_time, last_time;
	gint64 start_prevent_time, prevent_sleep_time;
	gulong event_count, active_count, relax_count, expire_count,
		wakeup_count;
	gboolean active;
};

struct wakeup_waiter {
	struct wakeup_engine *engine;
	wakeup_func func;
	gpointer data;
	GList link;
};

struct wakeup_engine {
	struct pf_clock *clock;
	GQueue sources;
	GHashTable *by_id; /* id -> source (/sys/class/wakeup/wakeupN) */
	guint id_hint;	   /* every id below it is taken */
	guint64 next_serial;
	gsize row_bytes_bound;	      /* for wakeup_stats_size_bound() */
	struct wakeup_source deleted; /* statistics of removed sources */
	guint registered;	      /* completed events */
	guint in_progress;	      /* active sources */
	guint saved_count;
	gboolean events_check_enabled; /* the handshake is armed */
	gboolean autosleep;
	GSequence *timeouts; /* sources with a timeout, by deadline */
	struct pf_timer *timeout_timer;
	GQueue waiters;
	struct pf_timer *waiter_timer;
	struct pf_events *events;
};

static void timeouts_expire(gpointer data);
static void waiters_run(gpointer data);

/* The widest a row of the listing can be: the name (padded to 12), a tab,
 * nine numbers of at most 20 digits with their two tabs, the newline. */
static gsize row_bound(const char *name)
{
	return MAX(strlen(name), 12) + 1 + 9 * (20 + 2) + 1;
}

struct wakeup_engine *wakeup_engine_new(struct pf_clock *clock)
{
	struct wakeup_engine *e = g_new0(struct wakeup_engine, 1);

	e->clock = clock;
	g_queue_init(&e->sources);
	g_queue_init(&e->waiters);
	e->by_id = g_hash_table_new(g_direct_hash, g_direct_equal);
	e->deleted.engine = e;
	e->deleted.name = g_strdup("deleted");
	e->next_serial = 1;
	e->row_bytes_bound = row_bound(e->deleted.name);
	e->timeouts = g_sequence_new(NULL);
	e->timeout_timer = pf_timer_new(clock, timeouts_expire, e);
	e->waiter_timer = pf_timer_new(clock, waiters_run, e);
	e->events = pf_events_new();
	return e;
}

void wakeup_engine_free(struct wakeup_engine *e)
{
	GList *l;

	if (!e)
		return;
	while ((l = g_queue_peek_head_link(&e->sources)))
		wakeup_source_unregister(l->data);
	while ((l = g_queue_peek_head_link(&e->waiters)))
		wakeup_cancel_wait(l->data);
	g_sequence_free(e->timeouts);
	g_hash_table_destroy(e->by_id);
	pf_timer_free(e->timeout_timer);
	pf_timer_free(e->waiter_timer);
	pf_events_free(e->events);
	g_free(e->deleted.name);
	g_free(e);
}

struct pf_events *wakeup_events(struct wakeup_engine *e)
{
	return e->events;
}

/* The number of active sources went from 0 to more, or back. */
static void activity_changed(struct wakeup_engine *e)
{
	pf_events_publish(e->events,
			  &(struct pf_event){ .type = PF_EVENT_ACTIVITY,
					      .active = e->in_progress > 0 });
}

struct wakeup_source *wakeup_source_register(struct wakeup_engine *e,
					     const char *name, gsize len)
{
	struct wakeup_source *ws = g_new0(struct wakeup_source, 1);

	ws->engine = e;
	ws->name = g_strndup(name, len);
	ws->serial = e->next_serial++;
	e->row_bytes_bound += row_bound(ws->name);
	ws->link.data = ws;
	ws->last_time = pf_clock_now(e->clock);
	g_queue_push_head_link(&e->sources, &ws->link);
	/* The kernel's IDA hands out the lowest free number. */
	ws->id = e->id_hint;
	while (g_hash_table_contains(e->by_id, GUINT_TO_POINTER(ws->id)))
		ws->id++;
	e->id_hint = ws->id + 1;
	g_hash_table_insert(e->by_id, GUINT_TO_POINTER(ws->id), ws);
	wakeup_notify_changed(e, ws);
	return ws;
}

/* Removed sources live on as one "deleted" row (wakeup_source_record()). */
static void record_deleted(struct wakeup_engine *e,
			   const struct wakeup_source *ws)
{
	struct wakeup_source *d = &e->deleted;

	if (!ws->event_count)
		return;
	d->total_time += ws->total_time;
	d->prevent_sleep_time += ws->prevent_sleep_time;
	d->max_time = MAX(d->max_time, ws->max_time);
	d->event_count += ws->event_count;
	d->active_count += ws->active_count;
	d->relax_count += ws->relax_count;
	d->expire_count += ws->expire_count;
	d->wakeup_count += ws->wakeup_count;
}

void wakeup_source_unregister(struct wakeup_source *ws)
{
	struct wakeup_engine *e = ws->engine;

	wakeup_source_relax(ws);
	record_deleted(e, ws);
	g_queue_unlink(&e->sources, &ws->link);
	g_hash_table_remove(e->by_id, GUINT_TO_POINTER(ws->id));
	e->id_hint = MIN(e->id_hint, ws->id);
	e->row_bytes_bound -= row_bound(ws->name);
	/* Said while the source can still be looked at, for the last time. */
	ws->unregistering = TRUE;
	wakeup_notify_changed(e, ws);
	wakeup_notify_changed(e, &e->deleted);
	g_free(ws->name);
	g_free(ws);
}

gboolean wakeup_source_unregistering(const struct wakeup_source *ws)
{
	return ws->unregistering;
}

const char *wakeup_source_name(const struct wakeup_source *ws)
{
	return ws->name;
}

guint wakeup_source_id(const struct wakeup_source *ws)
{
	return ws->id;
}

guint64 wakeup_source_serial(const struct wakeup_source *ws)
{
	return ws->serial;
}

struct wakeup_source *wakeup_source_by_id(const struct wakeup_engine *e,
					  guint id)
{
	return g_hash_table_lookup(e->by_id, GUINT_TO_POINTER(id));
}

gboolean wakeup_source_active(const struct wakeup_source *ws)
{
	return ws->active;
}

gint64 wakeup_source_last_change(const struct wakeup_source *ws)
{
	return ws->last_time;
}

static void timeout_disarm(struct wakeup_source *ws)
{
	struct wakeup_engine *e = ws->engine;
	gboolean was_first;

	if (!ws->timer_node)
		return;
	was_first = ws->timer_node == g_sequence_get_begin_iter(e->timeouts);
	g_sequence_remove(ws->timer_node);
	ws->timer_node = NULL;
	ws->timer_expires = 0;
	if (was_first) {
		/* Re-aim the one timer at the new earliest deadline. */
		if (g_sequence_is_empty(e->timeouts))
			pf_timer_disarm(e->timeout_timer);
		else
			pf_timer_arm(e->timeout_timer,
				     ((struct wakeup_source *)g_sequence_get(
					      g_sequence_get_begin_iter(
						      e->timeouts)))
					     ->timer_expires);
	}
}

static gint by_deadline(gconstpointer a, gconstpointer b, gpointer unused)
{
	const struct wakeup_source *x = a, *y = b;

	(void)unused;
	if (x->timer_expires != y->timer_expires)
		return x->timer_expires < y->timer_expires ? -1 : 1;
	return x < y ? -1 : (x > y);
}

static void timeout_arm(struct wakeup_source *ws, gint64 expires)
{
	struct wakeup_engine *e = ws->engine;

	timeout_disarm(ws);
	ws->timer_expires = expires;
	ws->timer_node =
		g_sequence_insert_sorted(e->timeouts, ws, by_deadline, NULL);
	if (ws->timer_node == g_sequence_get_begin_iter(e->timeouts))
		pf_timer_arm(e->timeout_timer, expires);
	wakeup_notify_changed(e, ws);
}

static void wake_waiters_later(struct wakeup_engine *e)
{
	if (!g_queue_is_empty(&e->waiters))
		pf_timer_arm(e->waiter_timer, pf_clock_now(e->clock));
}

static void source_activate(struct wakeup_source *ws)
{
	struct wakeup_engine *e = ws->engine;

	ws->active = TRUE;
	ws->active_count++;
	ws->last_time = pf_clock_now(e->clock);
	if (e->autosleep)
		ws->start_prevent_time = ws->last_time;
	if (e->in_progress++ == 0)
		activity_changed(e);
	wakeup_notify_changed(e, ws);
}

static void source_deactivate(struct wakeup_source *ws)
{
	struct wakeup_engine *e = ws->engine;
	gint64 now, duration;

	ws->relax_count++;
	ws->active = FALSE;
	now = pf_clock_now(e->clock);
	duration = now - ws->last_time;
	ws->total_time += duration;
	ws->max_time = MAX(ws->max_time, duration);
	ws->last_time = now;
	timeout_disarm(ws);
	if (e->autosleep)
		ws->prevent_sleep_time += now - ws->start_prevent_time;
	/* One event completed: it is registered and no longer in progress. */
	e->registered++;
	if (--e->in_progress == 0) {
		wake_waiters_later(e);
		activity_changed(e);
	}
	wakeup_notify_changed(e, ws);
}

static void report_event(struct wakeup_source *ws)
{
	struct wakeup_engine *e = ws->engine;

	ws->event_count++;
	if (e->events_check_enabled)
		ws->wakeup_count++;
	if (!ws->active)
		source_activate(ws);
	else
		wakeup_notify_changed(e, ws);
	pf_events_publish(
		e->events,
		&(struct pf_event){ .type = PF_EVENT_WAKEUP, .source = ws });
}

void wakeup_source_stay_awake(struct wakeup_source *ws)
{
	report_event(ws);
	timeout_disarm(ws);
}

void wakeup_source_event(struct wakeup_source *ws, guint32 msec)
{
	gint64 expires;

	report_event(ws);
	if (!msec) {
		source_deactivate(ws);
		return;
	}
	expires = pf_clock_now(ws->engine->clock) + (gint64)msec * 1000;
	if (!ws->timer_expires || expires > ws->timer_expires)
		timeout_arm(ws, expires);
}

void wakeup_source_relax(struct wakeup_source *ws)
{
	if (ws->active)
		source_deactivate(ws);
}

static void timeouts_expire(gpointer data)
{
	struct wakeup_engine *e = data;
	gint64 now = pf_clock_now(e->clock);
	GSequenceIter *first;

	while ((first = g_sequence_get_begin_iter(e->timeouts)) &&
	       !g_sequence_iter_is_end(first)) {
		struct wakeup_source *ws = g_sequence_get(first);

		if (ws->timer_expires > now) {
			pf_timer_arm(e->timeout_timer, ws->timer_expires);
			return;
		}
		ws->expire_count++;
		pf_events_publish(e->events,
				  &(struct pf_event){ .type = PF_EVENT_EXPIRE,
						      .source = ws });
		source_deactivate(ws); /* disarms, removing it */
	}
}

guint wakeup_events_in_progress(const struct wakeup_engine *e)
{
	return e->in_progress;
}

gboolean wakeup_get_count(const struct wakeup_engine *e, guint *count)
{
	*count = e->registered;
	return e->in_progress == 0;
}

gboolean wakeup_save_count(struct wakeup_engine *e, guint count)
{
	e->events_check_enabled = count == e->registered && !e->in_progress;
	if (e->events_check_enabled)
		e->saved_count = count;
	wakeup_notify_changed(e, NULL);
	return e->events_check_enabled;
}

gboolean wakeup_pending(struct wakeup_engine *e)
{
	gboolean pending;

	if (!e->events_check_enabled)
		return FALSE;
	pending = e->registered != e->saved_count || e->in_progress;
	e->events_check_enabled = !pending;
	if (pending)
		wakeup_notify_changed(e, NULL);
	return pending;
}

void wakeup_end_handshake(struct wakeup_engine *e)
{
	if (!e->events_check_enabled)
		return;
	e->events_check_enabled = FALSE;
	wakeup_notify_changed(e, NULL);
}

/* Deviation: the kernel only counts sources that existed when autosleep was
 * switched on; here every source active while it is on counts. */
void wakeup_set_autosleep(struct wakeup_engine *e, gboolean enabled)
{
	gint64 now = pf_clock_now(e->clock);

	if (e->autosleep == enabled)
		return;
	for (GList *l = e->sources.head; l; l = l->next) {
		struct wakeup_source *ws = l->data;

		if (!ws->active)
			continue;
		if (enabled)
			ws->start_prevent_time = now;
		else
			ws->prevent_sleep_time += now - ws->start_prevent_time;
	}
	e->autosleep = enabled;
}

struct wakeup_waiter *wakeup_wait_idle(struct wakeup_engine *e,
				       wakeup_func func, gpointer data)
{
	struct wakeup_waiter *w = g_new0(struct wakeup_waiter, 1);

	w->engine = e;
	w->func = func;
	w->data = data;
	w->link.data = w;
	g_queue_push_tail_link(&e->waiters, &w->link);
	if (!e->in_progress)
		wake_waiters_later(e);
	return w;
}

void wakeup_cancel_wait(struct wakeup_waiter *w)
{
	g_queue_unlink(&w->engine->waiters, &w->link);
	g_free(w);
}

/* Runs from the main loop, so a waiter never runs inside the request that
 * relaxed the last source; an event that came in between keeps them waiting. */
static void waiters_run(gpointer data)
{
	struct wakeup_engine *e = data;
	GList *l;

	while (!e->in_progress && (l = g_queue_pop_head_link(&e->waiters))) {
		struct wakeup_waiter *w = l->data;
		wakeup_func func = w->func;
		gpointer fdata = w->data;

		g_free(w);
		func(fdata);
	}
}

/* scnprintf() into a buffer of max bytes holding out->len already. */
static void append_capped(GString *out, gsize max, const char *a, const char *b)
{
	if (out->len + 1 < max)
		g_string_append_len(out, a, MIN(strlen(a), max - 1 - out->len));
	if (b && out->len + 1 < max)
		g_string_append_len(out, b, MIN(strlen(b), max - 1 - out->len));
}

void wakeup_describe_active(const struct wakeup_engine *e, GString *out,
			    gsize max)
{
	const struct wakeup_source *last = NULL;
	gboolean active = FALSE;
	gsize start = out->len;

	/* Measured from start, as the kernel's buffer begins there. */
	max += start;
	for (GList *l = e->sources.head; l; l = l->next) {
		const struct wakeup_source *ws = l->data;

		if (ws->active) {
			if (!active)
				append_capped(out, max,
					      "Pending Wakeup Sources: ", NULL);
			append_capped(out, max, ws->name, " ");
			active = TRUE;
		} else if (!active &&
			   (!last || ws->last_time > last->last_time)) {
			last = ws;
		}
	}
	if (!active && last)
		append_capped(out, max,
			      "Last active Wakeup Source: ", last->name);
}

const struct wakeup_source *wakeup_first_active(const struct wakeup_engine *e)
{
	for (GList *l = e->sources.head; l; l = l->next)
		if (((struct wakeup_source *)l->data)->active)
			return l->data;
	return NULL;
}

static gint64 to_ms(gint64 us)
{
	return us / 1000;
}

void wakeup_source_get_stats(const struct wakeup_source *ws,
			     struct wakeup_stats *st)
{
	const struct wakeup_engine *e = ws->engine;
	gint64 total = ws->total_time, max = ws->max_time;
	gint64 prevent = ws->prevent_sleep_time, active_time = 0;

	if (ws->active) {
		gint64 now = pf_clock_now(e->clock);

		active_time = now - ws->last_time;
		total += active_time;
		max = MAX(max, active_time);
		if (e->autosleep)
			prevent += now - ws->start_prevent_time;
	}
	st->active_count = ws->active_count;
	st->event_count = ws->event_count;
	st->wakeup_count = ws->wakeup_count;
	st->expire_count = ws->expire_count;
	st->active_time_ms = to_ms(active_time);
	st->total_time_ms = to_ms(total);
	st->max_time_ms = to_ms(max);
	st->last_change_ms = to_ms(ws->last_time);
	st->prevent_suspend_time_ms = to_ms(prevent);
}

static const char stats_header[] =
	"name\t\tactive_count\tevent_count\twakeup_count\texpire_count\t"
	"active_since\ttotal_time\tmax_time\tlast_change\t"
	"prevent_suspend_time\n";

/* Room for a row's numbers with their tabs, and the newline. */
#define ROW_NUMBERS_MAX (9 * (2 + PF_DECIMAL_MAX) + 1)

/* "\tN\t\tN...N\n" at p; returns the end. */
static char *put_row_numbers(char *p, const struct wakeup_stats *st)
{
	const gulong counts[] = { st->active_count, st->event_count,
				  st->wakeup_count, st->expire_count };
	const gint64 times[] = { st->active_time_ms, st->total_time_ms,
				 st->max_time_ms, st->last_change_ms,
				 st->prevent_suspend_time_ms };

	*p++ = '\t';
	for (guint i = 0; i < G_N_ELEMENTS(counts); i++) {
		p = pf_put_u64(p, counts[i]);
		memcpy(p, "\t\t", 2);
		p += 2;
	}
	for (guint i = 0; i < G_N_ELEMENTS(times); i++) {
		p = pf_put_i64(p, times[i]);
		memcpy(p, "\t\t", 2);
		p += 2;
	}
	p[-2] = '\n'; /* the last field ends the row */
	return p - 1;
}

/* One row, "%-12s\t%lu\t\t...": by hand (text.h), as a listing of many
 * sources is a row per source. */
static void print_source(GString *out, const struct wakeup_source *ws)
{
	struct wakeup_stats st;
	gsize len = strlen(ws->name);
	char nums[ROW_NUMBERS_MAX], *end;

	wakeup_source_get_stats(ws, &st);
	end = put_row_numbers(nums, &st);
	pf_string_append_len(out, ws->name, len);
	for (; len < 12; len++)
		g_string_append_c(out, ' ');
	pf_string_append_len(out, nums, end - nums);
}

static gsize digits(guint64 v)
{
	gsize n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/* What print_source() would print, counted without printing. */
static gsize source_width(const struct wakeup_source *ws)
{
	struct wakeup_stats st;

	wakeup_source_get_stats(ws, &st);
	return MAX(strlen(ws->name), 12) + 1 + 8 * 2 + 1 +
	       digits(st.active_count) + digits(st.event_count) +
	       digits(st.wakeup_count) + digits(st.expire_count) +
	       digits((guint64)st.active_time_ms) +
	       digits((guint64)st.total_time_ms) +
	       digits((guint64)st.max_time_ms) +
	       digits((guint64)st.last_change_ms) +
	       digits((guint64)st.prevent_suspend_time_ms);
}

/* Once the "deleted" row is printed the listing has ended, even if sources
 * come later. */
#define ROWS_ENDED G_MAXUINT

/* Row r of the listing: 0 the header, then the sources newest first, then
 * "deleted".  *at caches the list position of row r - 1 so that walking the
 * rows in order is linear.  NULL past the end. */
static const struct wakeup_source *row_source(const struct wakeup_engine *e,
					      guint row, GList **at)
{
	if (row == ROWS_ENDED)
		return NULL;
	if (*at)
		*at = (*at)->next;
	else
		*at = g_queue_peek_nth_link((GQueue *)&e->sources, row - 1);
	if (*at)
		return (*at)->data;
	return row == g_queue_get_length((GQueue *)&e->sources) + 1 ?
		       &e->deleted :
		       NULL;
}

gboolean wakeup_print_rows(const struct wakeup_engine *e, guint *row,
			   GString *out, gsize min_len)
{
	GList *at = NULL;

	if (*row == 0 && out->len < min_len) {
		g_string_append(out, stats_header);
		(*row)++;
	}
	while (out->len < min_len) {
		const struct wakeup_source *ws = row_source(e, *row, &at);

		if (!ws)
			return FALSE;
		print_source(out, ws);
		*row = ws == &e->deleted ? ROWS_ENDED : *row + 1;
	}
	return *row != ROWS_ENDED;
}

void wakeup_skip_rows(const struct wakeup_engine *e, guint *row, gsize *skip)
{
	GList *at = NULL;

	if (*row == 0) {
		if (*skip < sizeof(stats_header) - 1)
			return;
		*skip -= sizeof(stats_header) - 1;
		(*row)++;
	}
	for (;;) {
		const struct wakeup_source *ws = row_source(e, *row, &at);
		gsize w;

		if (!ws || (w = source_width(ws)) > *skip)
			return;
		*skip -= w;
		*row = ws == &e->deleted ? ROWS_ENDED : *row + 1;
	}
}

gsize wakeup_stats_size_bound(const struct wakeup_engine *e)
{
	return sizeof(stats_header) - 1 + e->row_bytes_bound;
}

void wakeup_print_stats(const struct wakeup_engine *e, GString *out)
{
	guint row = 0;

	while (wakeup_print_rows(e, &row, out, G_MAXSIZE))
		;
}

void wakeup_foreach_source(const struct wakeup_engine *e,
			   wakeup_source_visit visit, gpointer data)
{
	for (GList *l = e->sources.head; l; l = l->next)
		visit(l->data, data);
}

void wakeup_foreach_source_oldest_first(const struct wakeup_engine *e,
					wakeup_source_visit visit,
					gpointer data)
{
	for (GList *l = e->sources.tail; l; l = l->prev)
		visit(l->data, data);
}

/* The source exactly as it is: within one boot the monotonic clock goes on
 * across a restart of powerfs, so the times stay true as they are. */
void wakeup_source_save(const struct wakeup_source *ws,
			struct wakeup_record *rec)
{
	*rec = (struct wakeup_record){
		.active = ws->active,
		.active_count = ws->active_count,
		.event_count = ws->event_count,
		.relax_count = ws->relax_count,
		.wakeup_count = ws->wakeup_count,
		.expire_count = ws->expire_count,
		.total_time = ws->total_time,
		.max_time = ws->max_time,
		.last_time = ws->last_time,
		.start_prevent_time = ws->start_prevent_time,
		.prevent_sleep_time = ws->prevent_sleep_time,
		.expires = ws->timer_expires,
	};
}

/* Onto a source that is inactive, as a freshly registered one is. */
void wakeup_source_load(struct wakeup_source *ws,
			const struct wakeup_record *rec)
{
	struct wakeup_engine *e = ws->engine;

	g_return_if_fail(!ws->active);
	ws->active_count = rec->active_count;
	ws->event_count = rec->event_count;
	ws->relax_count = rec->relax_count;
	ws->wakeup_count = rec->wakeup_count;
	ws->expire_count = rec->expire_count;
	ws->total_time = rec->total_time;
	ws->max_time = rec->max_time;
	ws->last_time = rec->last_time;
	ws->start_prevent_time = rec->start_prevent_time;
	ws->prevent_sleep_time = rec->prevent_sleep_time;
	if (rec->active && ws != &e->deleted) {
		ws->active = TRUE;
		if (e->in_progress++ == 0)
			activity_changed(e);
		/* A deadline that passed while powerfs was away expires at
		 * the next loop iteration, counted as an expiry. */
		if (rec->expires)
			timeout_arm(ws, rec->expires);
	}
	wakeup_notify_changed(e, ws);
}

struct wakeup_source *wakeup_deleted_source(struct wakeup_engine *e)
{
	return &e->deleted;
}

guint32 wakeup_source_timeout_left(const struct wakeup_source *ws)
{
	gint64 left;

	if (!ws->timer_expires)
		return 0;
	left = ws->timer_expires - pf_clock_now(ws->engine->clock);
	/* Round up: an armed timeout never becomes "none". */
	return (guint32)MAX((left + 999) / 1000, 1);
}

guint wakeup_get_handshake(const struct wakeup_engine *e, gboolean *armed)
{
	*armed = e->events_check_enabled;
	return e->saved_count;
}

void wakeup_restore_counts(struct wakeup_engine *e, guint registered,
			   gboolean armed, guint saved)
{
	e->registered = registered;
	e->events_check_enabled = armed;
	e->saved_count = saved;
	wakeup_notify_changed(e, NULL);
}

void wakeup_notify_changed(struct wakeup_engine *e, struct wakeup_source *ws)
{
	pf_events_publish(
		e->events,
		&(struct pf_event){ .type = PF_EVENT_CHANGED, .source = ws });
}
