/* power.h - one powerfs instance's power-management core, wired together:
 * the engine, the user wake locks, the suspend path and autosleep.  The
 * attribute handlers (attrs.c) operate on it; server.c builds it.
 */
#ifndef POWERFS_POWER_H
#define POWERFS_POWER_H

#include "powerfs/engine/autosleep.h"
#include "powerfs/engine/backend.h"
#include "powerfs/engine/clock.h"
#include "powerfs/engine/events.h"
#include "powerfs/engine/suspend.h"
#include "powerfs/engine/wakelock.h"
#include "powerfs/engine/wakeup.h"

struct power {
	struct pf_clock *clock;
	struct wakeup_engine *engine;
	struct pf_events *events; /* the engine's (wakeup_events()) */
	struct wakelocks *wakelocks;
	struct backend *backend;
	struct suspend *suspend;
	struct wakeup_reason *reasons; /* of the last attempt */
	struct autosleep *autosleep;
	/* Require CAP_BLOCK_SUSPEND of wake_lock/wake_unlock writers. */
	gboolean check_capability;
	/* uid_t: owners of user namespaces whose capabilities count besides
	 * root (--trust-userns-owner), or NULL.  See caps.c. */
	GArray *trusted_userns_owners;
};

struct power_options {
	guint wakelock_limit;
	guint wakelock_gc_seconds;
	gboolean check_capability;
	GArray *trusted_userns_owners; /* referenced, may be NULL */
};

/* Takes ownership of clock and backend. */
struct power *power_new(struct pf_clock *clock, struct backend *backend,
			const struct power_options *opts);
void power_free(struct power *pw);

#endif
