/* autosleep.h - opportunistic suspend (kernel/power/autosleep.c): while
 * enabled, suspend whenever no wakeup source is active.
 */
#ifndef POWERFS_AUTOSLEEP_H
#define POWERFS_AUTOSLEEP_H

#include <glib.h>
#include "powerfs/engine/suspend.h"

struct autosleep;

struct autosleep *autosleep_new(struct wakeup_engine *engine, struct suspend *s,
				struct pf_clock *clock);
void autosleep_free(struct autosleep *as);

/* The "autosleep" wakeup source (for saving its statistics). */
struct wakeup_source *autosleep_source(struct autosleep *as);

/* The state autosleep suspends to, or PM_ON while autosleep is off (as
 * the kernel's pm_autosleep_state). */
enum pm_state autosleep_state(const struct autosleep *as);

/* Switch autosleep to state (PM_ON = off) for caller (NULL: nobody's
 * write).  Counts one event on the "autosleep" source (which also ends a
 * simulated sleep early), waits for a state transition in progress to
 * finish, and switches, publishing PF_EVENT_AUTOSLEEP: 0 if that happened at
 * once, else PF_PENDING and done(0) later.  -EINVAL for a state the backend
 * cannot enter. */
int autosleep_set_state(struct autosleep *as, enum pm_state state,
			const struct pf_caller *caller, backend_done_func done,
			gpointer data);

/* At start, the setting a previous run of powerfs left (state-file.c):
 * no event, no waiting for the transition lock. */
void autosleep_restore_state(struct autosleep *as, enum pm_state state);

#endif
