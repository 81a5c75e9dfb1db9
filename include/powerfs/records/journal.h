/* journal.h - the event journal (--journal=PATH): what happened and when,
 * one JSON object per line, for powerfs-report.
 *
 * The journal subscribes to the engine's events (events.h) and records
 * them.  Events are formatted into a buffer and written by a thread of the
 * journal's own, never by the caller: see journal.c.
 */
#ifndef POWERFS_JOURNAL_H
#define POWERFS_JOURNAL_H

#include <glib.h>

struct journal;
struct power;

#define JOURNAL_DEFAULT_SIZE (8 * 1024 * 1024)
/* Smaller makes no sense: one suspend event may take a few KiB. */
#define JOURNAL_MIN_SIZE (64 * 1024)

/* Opens (creates, mode 0600) path for appending, and records pw's events
 * from now on; at max_bytes the file is renamed to path.1 and a new one
 * begun.  Times are pw's clock's (monotonic) and the wall clock's. */
struct journal *journal_open(const char *path, guint64 max_bytes,
			     struct power *pw, GError **error);
/* Records no more, writes what is buffered and closes.  NULL is ignored,
 * as by the other functions. */
void journal_close(struct journal *j);

/* The daemon starts (backend name, the states it offers) and stops. */
void journal_start(struct journal *j, const char *backend, guint states);
void journal_stop(struct journal *j);

/* What a previous run left (the state file) goes on: recorded as if it had
 * just happened, so that the report sees it in this run (the held locks,
 * with the time their timeouts have left, and autosleep if on). */
void journal_restored(struct journal *j);

#endif
