/* backend.h - how powerfs really enters a sleep state.
 *
 * A backend is asked to enter a state and answers once, asynchronously, from
 * the main loop, when the system has resumed (0) or the attempt failed
 * (negative errno).
 */
#ifndef POWERFS_BACKEND_H
#define POWERFS_BACKEND_H

#include <sys/types.h>
#include <glib.h>
#include "powerfs/engine/clock.h"

/* Sleep states, in the kernel's order (suspend_state_t). */
enum pm_state {
	PM_ON = 0,
	PM_FREEZE,
	PM_STANDBY,
	PM_MEM,
	PM_DISK,
	PM_NR_STATES,
};
#define PM_STATE_BIT(s) (1u << (s))

/* "freeze", "standby", "mem", "disk"; NULL for PM_ON. */
const char *pm_state_label(enum pm_state state);

typedef void (*backend_done_func)(int error, gpointer data);

struct backend;

/* How a backend tells the core about sleeps it sees, whoever started them
 * (logind announces every sleep of the host). */
struct backend_listener {
	/* The system is about to sleep.  host: the host's tasks are going to
	 * be frozen until resumed(), so nobody may wait inside powerfs
	 * meanwhile; FALSE for a sleep that freezes nothing (simulated), for
	 * which this is only the moment the freezer would strike.  TRUE if
	 * it answered requests that waited: their callers may come back at
	 * once (a read retried after EINTR). */
	gboolean (*sleeping)(gboolean host, gpointer data);
	/* It resumed (0), or the sleep failed (negative errno, at the
	 * backend's failed_step). */
	void (*resumed)(int error, gpointer data);
	gpointer data;
};

struct backend_ops {
	const char *name;
	/* Bit mask of PM_STATE_BIT(state) the system can enter. */
	guint (*states)(struct backend *be);
	/* An error at once, or PF_PENDING and done() after resume. */
	int (*suspend)(struct backend *be, enum pm_state state,
		       backend_done_func done, gpointer data);
	/* A wakeup event arrived while suspended (optional). */
	void (*wake)(struct backend *be);
	/* Task pid (in powerfs's pid namespace) was interrupted inside the
	 * state write whose sleep is under way (optional).  TRUE if the
	 * sleep freezes that task: its write is then answered at once, with
	 * success, and it leaves the request to be held by the freezer
	 * before it runs again, until the sleep ends. */
	gboolean (*freezes)(struct backend *be, pid_t pid);
	/* Hold the host awake (a logind block inhibitor, "powerfs: held by
	 * WHY") while why is not NULL (--inhibit-sleep; optional: a backend
	 * without it cannot). */
	void (*block_host_sleep)(struct backend *be, const char *why);
	void (*free)(struct backend *be);
};

struct backend {
	const struct backend_ops *ops;
	const struct backend_listener *listener; /* set by the core */
	/* The host's /sys/power (host-power.h) when the backend puts the host
	 * to sleep: the host's settings are then the ones that count.  NULL
	 * for a backend that sleeps on its own terms (simulated). */
	const char *host_dir;
	/* Where a failed sleep failed, as the kernel names its steps
	 * ("freeze", "suspend_noirq", ...), set before reporting an error to
	 * done() or resumed(); NULL means "suspend".  Valid during that call
	 * only: the core keeps its own copy. */
	const char *failed_step;
	/* Attempts the host failed within this sleep before the outcome
	 * reported (systemd-sleep tries mem, then freeze), set with
	 * failed_step: counted first, as failures at failed_step with
	 * earlier_errno (the kernel keeps the step and errno of its last
	 * failure only).  The core sets it back to 0. */
	guint earlier_failures;
	int earlier_errno;
	/* Why the sleep it reports ended, set with the report (done() or
	 * resumed() without an error) and valid during that call only: the
	 * IRQ that woke the host (wake_irq >= 0, its handler's name in
	 * wake_irq_name, NULL if it has none), or a wakeup that was no IRQ
	 * (wake_reason); neither when the host does not say.  slept_ns >= 0:
	 * how long it slept, where the clocks cannot tell (a simulation);
	 * -1 otherwise.  The core sets them back. */
	int wake_irq;
	const char *wake_irq_name;
	const char *wake_reason;
	gint64 slept_ns;
	/* A wakeup source that woke the system (set with the report, as
	 * wake_reason): the core signals an event on a source of that name,
	 * active for wake_source_ms, as the kernel's driver would
	 * (pm_wakeup_event()).  The core sets it back. */
	const char *wake_source;
	guint wake_source_ms;
	/* pm_freeze_timeout, in ms, set by the core before each suspend(). */
	guint freeze_timeout_ms;
	/* What "mem" may mean (PM_STATE_BIT() of PM_FREEZE, PM_STANDBY,
	 * PM_MEM: mem_sleep's s2idle, shallow, deep), set by a backend whose
	 * "mem" is not simply its deepest state; 0: s2idle, and standby and
	 * mem where states() offers them. */
	guint mem_sleep_states;
};

/* No reason and no length known (what a backend starts with). */
void backend_clear_wakeup(struct backend *be);

/* Pretends to sleep for sleep_ms (a wake() ends it early). */
struct backend *backend_simulate_new(struct pf_clock *clock, guint sleep_ms,
				     guint states);

/* Writes the state to DIR/state (a host's /sys/power, or another powerfs).
 * NULL and error if DIR/state cannot be read. */
struct backend *backend_sysfs_new(struct pf_clock *clock, const char *dir,
				  GError **error);

/* Suspends through systemd-logind on the system bus (DBUS_SYSTEM_BUS_ADDRESS
 * applies).  The host kernel's suspend statistics, read from stats_dir
 * (/sys/power/suspend_stats) around each sleep when readable, tell whether
 * the sleep succeeded; host_dir (/sys/power) has its settings and says
 * which IRQ woke it.  NULL and error if logind cannot be reached. */
struct backend *backend_logind_new(struct pf_clock *clock,
				   guint suspend_timeout_s,
				   const char *host_dir, const char *stats_dir,
				   GError **error);

/* Puts one container to sleep: the cgroup directory dir (cgroup v2's
 * cgroup.freeze, or the v1 freezer's freezer.state; it may come and go
 * with its container, but its parent must be a cgroup of either) is frozen
 * until a wakeup event, the earliest alarm timer its tasks armed, or the
 * host's resume (through host, a logind backend, or NULL) wakes it.  A
 * container a dead server left frozen is thawed.  NULL and error if dir
 * cannot be such a cgroup, or if powerfs runs inside it. */
struct backend *backend_freeze_new(struct pf_clock *clock, const char *dir,
				   struct backend *host, GError **error);
/* The checks of backend_freeze_new(), before anything is mounted. */
gboolean backend_freeze_check(const char *dir, GError **error);
/* Thaws dir if a server froze it and is gone (a keeper whose servers
 * will not come back).  TRUE if it was. */
gboolean backend_freeze_release(const char *dir);

#endif
