/* wakeup.h - the wakeup engine: wakeup sources, event counters, the
 * wakeup_count handshake and the statistics (drivers/base/power/wakeup.c).
 *
 * Single-threaded: every call comes from the main loop (or a unit test).
 * Times are microseconds of the injected clock.
 */
#ifndef POWERFS_WAKEUP_H
#define POWERFS_WAKEUP_H

#include <glib.h>
#include "powerfs/engine/clock.h"
#include "powerfs/engine/events.h"

struct wakeup_engine;
struct wakeup_source;
struct wakeup_waiter;

typedef void (*wakeup_func)(gpointer data);

struct wakeup_engine *wakeup_engine_new(struct pf_clock *clock);
void wakeup_engine_free(struct wakeup_engine *engine);

/* Where the engine publishes its events (events.h): the wakeup engine's
 * own, and those of every engine module built on it. */
struct pf_events *wakeup_events(struct wakeup_engine *engine);

/* Sources.  The name is copied (len bytes, need not be NUL-terminated). */
struct wakeup_source *wakeup_source_register(struct wakeup_engine *engine,
					     const char *name, gsize len);
/* Relaxes the source, adds its statistics to the "deleted" row, frees it.
 * PF_EVENT_CHANGED is published for it one last time, and then
 * wakeup_source_unregistering() is TRUE. */
void wakeup_source_unregister(struct wakeup_source *ws);
gboolean wakeup_source_unregistering(const struct wakeup_source *ws);

const char *wakeup_source_name(const struct wakeup_source *ws);
/* The source's number, the lowest free at registration and free again once
 * it is unregistered (the N of /sys/class/wakeup/wakeupN). */
guint wakeup_source_id(const struct wakeup_source *ws);
/* A number no other source ever had or will have (the object's identity:
 * an id is reused after its source is gone). */
guint64 wakeup_source_serial(const struct wakeup_source *ws);
/* The registered source with that number, or NULL. */
struct wakeup_source *wakeup_source_by_id(const struct wakeup_engine *engine,
					  guint id);
gboolean wakeup_source_active(const struct wakeup_source *ws);
/* Monotonic time of the last activation or deactivation (or creation). */
gint64 wakeup_source_last_change(const struct wakeup_source *ws);

/* Signal an event and stay active until wakeup_source_relax() (cancels any
 * armed timeout). */
void wakeup_source_stay_awake(struct wakeup_source *ws);
/* Signal an event and stay active for msec milliseconds; an armed later
 * deadline is kept.  msec == 0 signals and relaxes at once. */
void wakeup_source_event(struct wakeup_source *ws, guint32 msec);
/* Deactivate if active (counts one registered event). */
void wakeup_source_relax(struct wakeup_source *ws);

/* Counters and the handshake. */
guint wakeup_events_in_progress(const struct wakeup_engine *engine);
/* Stores the registered event count; TRUE if no event is in progress. */
gboolean wakeup_get_count(const struct wakeup_engine *engine, guint *count);
/* Arms the handshake if count is current and nothing is in progress;
 * otherwise disarms it.  Returns whether it is armed. */
gboolean wakeup_save_count(struct wakeup_engine *engine, guint count);
/* If the handshake is armed: has an event happened since (count changed, or a
 * source active)?  A pending wakeup ends the handshake. */
gboolean wakeup_pending(struct wakeup_engine *engine);
/* Ends the handshake (after every suspend attempt). */
void wakeup_end_handshake(struct wakeup_engine *engine);

/* Autosleep on/off: drives prevent_suspend_time. */
void wakeup_set_autosleep(struct wakeup_engine *engine, gboolean enabled);

/* Call func once, from the main loop, the next time no event is in progress
 * (soon after, if none is now).  The waiter is freed after the call or by
 * wakeup_cancel_wait(). */
struct wakeup_waiter *wakeup_wait_idle(struct wakeup_engine *engine,
				       wakeup_func func, gpointer data);
void wakeup_cancel_wait(struct wakeup_waiter *waiter);

/* What the Android common kernel says of the sources when a wakeup event
 * aborts a suspend (pm_get_active_wakeup_sources()): "Pending Wakeup
 * Sources: " and the active ones' names, each followed by a space, newest
 * first; or, if none is active, "Last active Wakeup Source: " and the name
 * of the one that changed last.  At most max - 1 bytes, as the kernel cuts
 * it. */
void wakeup_describe_active(const struct wakeup_engine *engine, GString *out,
			    gsize max);
/* The newest active source, or NULL. */
const struct wakeup_source *
wakeup_first_active(const struct wakeup_engine *engine);

/* The debugfs wakeup_sources table, newest source first, "deleted" last. */
void wakeup_print_stats(const struct wakeup_engine *engine, GString *out);
/* The same table a row at a time, as a seq_file prints it, so a read costs
 * what it returns.  Row 0 is the header.  Appends rows from *row on until
 * out holds at least min_len bytes; *row is then the next row.  FALSE once
 * the last row is printed. */
gboolean wakeup_print_rows(const struct wakeup_engine *engine, guint *row,
			   GString *out, gsize min_len);
/* Moves *row past the whole rows that fit in *skip bytes and takes their
 * width off *skip, measuring rather than printing them. */
void wakeup_skip_rows(const struct wakeup_engine *engine, guint *row,
		      gsize *skip);
/* An upper bound of the table's length now (sources added later make it
 * grow). */
gsize wakeup_stats_size_bound(const struct wakeup_engine *engine);

/* Iterate sources, newest first (for /sys/class/wakeup). */
typedef void (*wakeup_source_visit)(const struct wakeup_source *ws,
				    gpointer data);
void wakeup_foreach_source(const struct wakeup_engine *engine,
			   wakeup_source_visit visit, gpointer data);
/* The same, oldest first: the order to register them again in. */
void wakeup_foreach_source_oldest_first(const struct wakeup_engine *engine,
					wakeup_source_visit visit,
					gpointer data);

/* One source's statistics, with the current activation included (as the
 * kernel prints them).  Times in milliseconds. */
struct wakeup_stats {
	gulong active_count, event_count, wakeup_count, expire_count;
	gint64 active_time_ms, total_time_ms, max_time_ms, last_change_ms,
		prevent_suspend_time_ms;
};
void wakeup_source_get_stats(const struct wakeup_source *ws,
			     struct wakeup_stats *stats);

/* Saving and restoring the engine across a restart of powerfs within one
 * boot (state-file.c): a source's whole state, times on the monotonic
 * clock, which goes on across the restart. */
struct wakeup_record {
	gboolean active;
	gulong active_count, event_count, relax_count, wakeup_count,
		expire_count;
	gint64 total_time, max_time, last_time, start_prevent_time,
		prevent_sleep_time;
	gint64 expires; /* the timeout's deadline, 0 = none */
};
void wakeup_source_save(const struct wakeup_source *ws,
			struct wakeup_record *rec);
/* Onto an inactive source; an active record activates it (and arms its
 * timeout, which expires at once if its deadline passed). */
void wakeup_source_load(struct wakeup_source *ws,
			const struct wakeup_record *rec);
/* The "deleted" row (statistics of removed sources). */
struct wakeup_source *wakeup_deleted_source(struct wakeup_engine *engine);
/* Milliseconds until the source's timeout, 0 if none is armed. */
guint32 wakeup_source_timeout_left(const struct wakeup_source *ws);
/* The handshake: the count saved by a wakeup_count write, and whether it
 * is armed.  And restoring it with the registered count. */
guint wakeup_get_handshake(const struct wakeup_engine *engine, gboolean *armed);
void wakeup_restore_counts(struct wakeup_engine *engine, guint registered,
			   gboolean armed, guint saved);

/* Publishes PF_EVENT_CHANGED: ws (its state or statistics) changed, or,
 * ws NULL, the engine's counters or something other modules keep
 * (suspend_stats, autosleep, the settings, the files' owners). */
void wakeup_notify_changed(struct wakeup_engine *engine,
			   struct wakeup_source *ws);

#endif
