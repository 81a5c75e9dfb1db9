/* wakelock.h - user-space wake locks (kernel/power/wakelock.c): a registry of
 * named wakeup sources with a limit and least-recently-used garbage collection.
 */
#ifndef POWERFS_WAKELOCK_H
#define POWERFS_WAKELOCK_H

#include <glib.h>
#include "powerfs/engine/wakeup.h"

struct wakelocks;

/* limit 0 = unlimited; sources idle for gc_seconds are collected. */
struct wakelocks *wakelocks_new(struct wakeup_engine *engine,
				struct pf_clock *clock, guint limit,
				guint gc_seconds);
void wakelocks_free(struct wakelocks *wls);

/* Lock name (len bytes) for caller (NULL: nobody's write); timeout_ns 0 =
 * until unlocked.  0 (and PF_EVENT_LOCK), or -ENOSPC when a new name would
 * exceed the limit. */
int wakelocks_lock(struct wakelocks *wls, const char *name, gsize len,
		   guint64 timeout_ns, const struct pf_caller *caller);
/* 0 (PF_EVENT_UNLOCK, then any garbage collection's PF_EVENT_GC), or
 * -EINVAL for an unknown name. */
int wakelocks_unlock(struct wakelocks *wls, const char *name, gsize len,
		     const struct pf_caller *caller);

/* The sysfs listing: active (or inactive) names sorted, space separated. */
void wakelocks_show(const struct wakelocks *wls, gboolean active, GString *out);

guint wakelocks_count(const struct wakelocks *wls);

/* The lock's source, or NULL if there is no lock of that name. */
struct wakeup_source *wakelocks_lookup(const struct wakelocks *wls,
				       const char *name, gsize len);

/* The locks' sources in the order they were created (for saving them). */
void wakelocks_foreach(const struct wakelocks *wls, wakeup_source_visit visit,
		       gpointer data);
/* Recreate a saved lock, inactive and without an event (its state is
 * loaded next), as the most recently used; NULL if the limit is reached. */
struct wakeup_source *wakelocks_restore(struct wakelocks *wls,
					const char *name);

#endif
