/* events.h - what the engine tells whoever listens: one list of
 * subscribers, each called synchronously with every event of the kinds it
 * asked for, in the order it subscribed.
 *
 * The engine publishes and never knows who listens: the journal, the
 * metrics, the state file, the logind inhibitor and the file systems
 * subscribe, as debugfs, sysfs and tracepoints hook into the kernel's
 * wakeup code without it knowing them.  A new consumer is one more
 * subscription.
 *
 * Single-threaded, like the engine: events are published and received
 * under the loop lock.  A subscriber must not subscribe or unsubscribe from
 * its call.
 */
#ifndef POWERFS_EVENTS_H
#define POWERFS_EVENTS_H

#include <sys/types.h>
#include <glib.h>
#include "powerfs/engine/backend.h"

struct wakeup_source;

/* Who wrote the request an event was caused by (from the FUSE request). */
struct pf_caller {
	pid_t pid; /* 0 if not visible in powerfs's pid namespace */
	uid_t uid;
	gid_t gid;
};

enum pf_event_type {
	/* Something a saved state keeps changed: source (its state or its
	 * statistics), or, source NULL, the engine's counters, a setting,
	 * suspend_stats, autosleep, or a file's owner or mode. */
	PF_EVENT_CHANGED,
	/* The number of active sources went from 0 to more, or back to 0. */
	PF_EVENT_ACTIVITY,
	/* A wakeup event was reported on source (it wakes a system that
	 * sleeps). */
	PF_EVENT_WAKEUP,
	/* A wake_lock write took effect on the lock name (len bytes, not
	 * NUL-terminated): timeout_ms (0: none), created, was_active. */
	PF_EVENT_LOCK,
	/* A wake_unlock write of the existing lock name (len bytes) is about
	 * to take effect: was_active. */
	PF_EVENT_UNLOCK,
	/* The timeout of source expired: it is about to relax. */
	PF_EVENT_EXPIRE,
	/* The wake lock source was garbage-collected: it is about to go. */
	PF_EVENT_GC,
	/* A read of wakeup_count was answered with count. */
	PF_EVENT_COUNT_READ,
	/* A wakeup_count write (count, if parsed) was answered with error
	 * (0 or a negative errno). */
	PF_EVENT_COUNT_WRITE,
	/* Autosleep was switched to state (PM_ON: off). */
	PF_EVENT_AUTOSLEEP,
	/* A suspend attempt begins: to state, by "state" (a write), by
	 * "autosleep", or by "host" for a sleep someone else started (logind
	 * announces every sleep of the host; state is then PM_ON). */
	PF_EVENT_ATTEMPT_BEGIN,
	/* The attempt ends with error (0 or a negative errno) at step (""
	 * on success); state, by and caller are those of its beginning. */
	PF_EVENT_ATTEMPT_END,
	/* The system is about to sleep, whoever started it: every request
	 * that waits must be answered now, as the kernel's freezer ends every
	 * wait with a fake signal; with host, no request may wait at all
	 * until PF_EVENT_RESUMED (a task inside a FUSE request cannot be
	 * frozen, and the host's sleep would fail).  A subscriber that
	 * answered requests that waited sets answered. */
	PF_EVENT_SLEEPING,
	/* The host resumed, after a PF_EVENT_SLEEPING with host. */
	PF_EVENT_RESUMED,
	/* Autosleep pauses for pause_ms after the backend failed with
	 * error. */
	PF_EVENT_BACKOFF,
	PF_EVENT_TYPES
};

#define PF_EVENT_BIT(type) (1u << (type))

/* One event; a field not named for its type is zero. */
struct pf_event {
	enum pf_event_type type;
	/* The writer whose request caused it, or NULL: no write did (a
	 * timeout, autosleep, a setting restored at start). */
	const struct pf_caller *caller;
	struct wakeup_source *source;
	const char *name;
	gsize len;
	guint32 timeout_ms;
	gboolean created, was_active;
	gboolean active; /* PF_EVENT_ACTIVITY: some source is */
	guint count;
	gboolean parsed; /* PF_EVENT_COUNT_WRITE: count was */
	int error;
	enum pm_state state;
	const char *by;
	const char *step;
	gboolean host;	   /* PF_EVENT_SLEEPING */
	gboolean answered; /* PF_EVENT_SLEEPING: set by subscribers */
	guint pause_ms;
};

typedef void (*pf_event_func)(struct pf_event *ev, gpointer data);

struct pf_events;

struct pf_events *pf_events_new(void);
void pf_events_free(struct pf_events *events);

/* func is called with every event whose PF_EVENT_BIT() is in mask, after
 * the subscribers before it. */
void pf_events_subscribe(struct pf_events *events, guint mask,
			 pf_event_func func, gpointer data);
/* Removes the subscription of the same func and data. */
void pf_events_unsubscribe(struct pf_events *events, pf_event_func func,
			   gpointer data);

void pf_events_publish(struct pf_events *events, struct pf_event *ev);

#endif
