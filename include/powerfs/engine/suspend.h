/* suspend.h - entering a sleep state (kernel/power/suspend.c): the transition
 * lock that serialises state changes, the pending-wakeup check, and
 * suspend_stats.
 */
#ifndef POWERFS_SUSPEND_H
#define POWERFS_SUSPEND_H

#include <errno.h>
#include <glib.h>
#include "powerfs/engine/backend.h"
#include "powerfs/engine/events.h"
#include "powerfs/engine/wakeup.h"
#include "powerfs/engine/wakeup-reason.h"

struct suspend;

/* pm_test's levels, in the kernel's order (TEST_NONE ... TEST_FREEZER). */
enum pm_test_level {
	PM_TEST_NONE,
	PM_TEST_CORE,
	PM_TEST_PROCESSORS,
	PM_TEST_PLATFORM,
	PM_TEST_DEVICES,
	PM_TEST_FREEZER,
	PM_TEST_LEVELS,
};

/* The settings of kernel/power/main.c, as this instance keeps them when
 * it sleeps on its own terms (a backend with a host reads the host's). */
struct pm_settings {
	enum pm_state mem_sleep; /* what "mem" means: FREEZE (s2idle),
					 * STANDBY (shallow) or MEM (deep) */
	gboolean sync_on_suspend, pm_async, pm_print_times, pm_debug_messages;
	guint freeze_timeout_ms;
	enum pm_test_level test_level;
};

/* Functions that take a completion callback either return their result at
 * once (and never call it) or return PF_PENDING and call it exactly once,
 * later, from the main loop. */
#define PF_PENDING (-EINPROGRESS)

struct suspend_stats {
	int success, fail, failed_freeze, failed_prepare, failed_suspend,
		failed_suspend_late, failed_suspend_noirq, failed_resume,
		failed_resume_early, failed_resume_noirq;
	int last_failed_errno;
	const char *last_failed_dev;  /* always "" here */
	const char *last_failed_step; /* "" or one of the kernel's steps */
};

/* Every attempt, and every sleep of the host's own, is recorded in
 * reasons (/sys/kernel/wakeup_reasons) and published as
 * PF_EVENT_ATTEMPT_BEGIN and PF_EVENT_ATTEMPT_END; the sleep itself as
 * PF_EVENT_SLEEPING and PF_EVENT_RESUMED. */
struct suspend *suspend_new(struct wakeup_engine *engine,
			    struct backend *backend,
			    struct wakeup_reason *reasons);
void suspend_free(struct suspend *s);

/* Bit mask of supported states (from the backend). */
guint suspend_valid_states(const struct suspend *s);
/* What "mem" may mean: PM_STATE_BIT() of PM_FREEZE (s2idle, always),
 * PM_STANDBY (shallow), PM_MEM (deep). */
guint suspend_mem_sleep_states(const struct suspend *s);

/* The transition lock (the kernel's autosleep_lock): state writes,
 * wakeup_count writes, autosleep changes and autosleep cycles run one at a
 * time.  Returns TRUE if the caller holds the lock now (func is not called);
 * otherwise func is called later, from the main loop, with the lock held. */
typedef void (*suspend_locked_func)(gpointer data);
gboolean suspend_lock(struct suspend *s, suspend_locked_func func,
		      gpointer data);
void suspend_unlock(struct suspend *s);
/* Takes back a queued suspend_lock(func, ...) whose data match(es) key:
 * TRUE (and its data) if one waited; func will not be called for it. */
gboolean suspend_lock_cancel(struct suspend *s, suspend_locked_func func,
			     gboolean (*match)(gpointer data, gpointer key),
			     gpointer key, gpointer *data);
gboolean suspend_in_progress(const struct suspend *s);

/* Shutting down: the attempt in progress ends now with -EIO, and every
 * caller queued on the lock runs at once and must give up (its func sees
 * suspend_shutting_down() and fails its request).  So every pending request
 * gets its answer exactly once before the file system goes away. */
void suspend_abort(struct suspend *s);
gboolean suspend_shutting_down(const struct suspend *s);

/* With the lock held: enter state, unless a wakeup event is pending (then
 * -EBUSY at once) or a pm_test level ends the attempt first (0 at once).
 * Otherwise PF_PENDING, and done(0 or -errno) after resume. */
int suspend_enter(struct suspend *s, enum pm_state state,
		  backend_done_func done, gpointer data);

/* For the attempt in progress: call func once when the backend reports that
 * the host is about to sleep (logind's PrepareForSleep, the sysfs backend's
 * write), before PF_EVENT_SLEEPING is published.  A state write is answered then, not
 * after resume: its writer would be inside a request while the host freezes
 * its tasks. */
void suspend_when_sleeping(struct suspend *s, wakeup_func func, gpointer data);
/* The writer (pid) of the attempt in progress, whose suspend_when_sleeping()
 * data match(es) key, was interrupted: TRUE if the sleep freezes it, so
 * that its write is to be answered now (see backend_ops.freezes).  The
 * attempt goes on; its func still runs, and the late answer is dropped. */
gboolean suspend_writer_frozen(struct suspend *s,
			       gboolean (*match)(gpointer data, gpointer key),
			       gpointer key, pid_t pid);

/* Who asks for the next suspend_enter(), for its PF_EVENT_ATTEMPT_BEGIN:
 * by is "state" (a write, caller its writer) or "autosleep" (caller
 * NULL). */
void suspend_set_origin(struct suspend *s, const char *by,
			const struct pf_caller *caller);

/* A test level other than none makes every attempt a test that ends in
 * success before the backend is asked to sleep. */
struct pm_settings *suspend_settings(struct suspend *s);
/* "s2idle", "shallow", "deep" for PM_FREEZE, PM_STANDBY, PM_MEM. */
const char *mem_sleep_label(enum pm_state state);
const char *pm_test_label(enum pm_test_level level);

const struct suspend_stats *suspend_get_stats(const struct suspend *s);
/* Restoring saved statistics (--state-file). */
void suspend_load_stats(struct suspend *s, const struct suspend_stats *stats);

/* Between PF_EVENT_SLEEPING with host and PF_EVENT_RESUMED. */
gboolean suspend_host_asleep(const struct suspend *s);

#endif
