/* journal.h - the event journal (--journal=PATH): what happened and when,
 * one JSON object per line, for powerfs-report.
 *
 * The core calls one function per event where it happens.  Every function
 * takes NULL for "no journal" and then does nothing, so the core needs no
 * test of its own.  Events are formatted into a buffer and written by a
 * thread of the journal's own, never by the caller: see journal.c.
 */
#ifndef POWERFS_JOURNAL_H
#define POWERFS_JOURNAL_H

#include <sys/types.h>
#include <glib.h>
#include "powerfs/engine/clock.h"

struct journal;
struct wakeup_engine;

#define JOURNAL_DEFAULT_SIZE (8 * 1024 * 1024)
/* Smaller makes no sense: one suspend event may take a few KiB. */
#define JOURNAL_MIN_SIZE (64 * 1024)

/* Opens (creates, mode 0600) path for appending; at max_bytes the file is
 * renamed to path.1 and a new one begun.  Times are clock's (monotonic)
 * and the wall clock's. */
struct journal *journal_open(const char *path, guint64 max_bytes,
			     struct pf_clock *clock, GError **error);
/* Writes what is buffered and closes. */
void journal_close(struct journal *j);

/* The daemon starts (backend name, the states it offers) and stops. */
void journal_start(struct journal *j, const char *backend, guint states);
void journal_stop(struct journal *j);

/* A wake_lock write that succeeded (timeout_ms 0: none), and a
 * wake_unlock write that succeeded; pid 0 when the writer is not visible
 * in powerfs's pid namespace. */
void journal_lock(struct journal *j, const char *name, gsize len,
		  guint32 timeout_ms, gboolean created, gboolean was_active,
		  pid_t pid, uid_t uid);
void journal_unlock(struct journal *j, const char *name, gsize len,
		    gboolean was_active, pid_t pid, uid_t uid);
/* A source's timeout expired; a wake lock was garbage-collected. */
void journal_expire(struct journal *j, const char *name);
void journal_gc(struct journal *j, const char *name);

/* The wakeup_count handshake: a read that returned count, a write (count
 * parsed or not) and its result (0 or -errno). */
void journal_count_read(struct journal *j, guint count, pid_t pid,
			uid_t uid);
void journal_count_write(struct journal *j, gboolean parsed, guint count,
			 int result, pid_t pid, uid_t uid);

/* An autosleep write that took effect: "off" or the state's label.
 * pid < 0: no writer (the setting restored at start). */
void journal_autosleep(struct journal *j, const char *state, pid_t pid,
		       uid_t uid);

/* One suspend attempt, from its start to its end. */
struct journal_attempt {
	const char *state;	/* "mem", ... */
	const char *by;		/* "state" (a write), "autosleep", "host" */
	pid_t pid;		/* the writer of "state", else -1 */
	uid_t uid;
	gint64 start, start_wall;	/* monotonic, wall; microseconds */
};
/* The attempt ended with result (0 or -errno) at step ("" on success).  A
 * failed attempt names the sources active now and those signalled since
 * the handshake was armed (or the attempt began). */
void journal_suspend(struct journal *j, const struct journal_attempt *a,
		     int result, const char *step,
		     const struct wakeup_engine *engine);
/* The start of an attempt: fills a's times. */
void journal_attempt_begin(struct journal *j, struct journal_attempt *a);

/* The host slept, put to sleep by someone else (logind). */
void journal_sleep(struct journal *j, gint64 start, gint64 start_wall);

/* Autosleep backs off after a backend failure. */
void journal_backoff(struct journal *j, int result, guint pause_ms);

#endif
