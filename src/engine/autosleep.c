/* autosleep.c - opportunistic suspend (the kernel's kernel/power/autosleep.c).
 *
 * While autosleep is on, one work item runs again and again, as the
 * kernel's single suspend_work does: wait until no wakeup source is active,
 * read the registered event count, take the transition lock, arm the
 * wakeup_count handshake with that count, and only then look at the
 * setting: if autosleep went off meanwhile, stop there, leaving the
 * handshake armed (the kernel does; a later direct suspend then fails if an
 * event came in).  Otherwise suspend, and if the system came back without
 * any event being registered (a wakeup of unknown cause), wait half a
 * second so it cannot spin.
 *
 * Queuing the work that is waiting to run does nothing; queuing it while it
 * runs makes it run once more afterwards.  Turning autosleep off does not
 * stop a run: a run that waits for the last source to go still arms the
 * handshake when it goes.
 *
 * The work is a small state machine driven from the main loop: it never
 * blocks, it waits through wakeup_wait_idle(), the transition lock's queue and
 * a timer.
 */
#include <errno.h>

#include "powerfs/engine/autosleep.h"

#define UNKNOWN_WAKEUP_PAUSE_US (G_USEC_PER_SEC / 2)
#define MIN_BACKOFF_US (G_USEC_PER_SEC / 2)
#define MAX_BACKOFF_US (60 * G_USEC_PER_SEC)

struct autosleep {
	struct wakeup_engine *engine;
	struct suspend *suspend;
	struct pf_clock *clock;
	struct wakeup_source *ws; /* "autosleep": one event per change */
	enum pm_state state;
	gboolean running; /* a run of the work is in progress */
	gboolean queued;  /* the work runs (again) when it can */
	struct wakeup_waiter *idle_wait;
	struct pf_timer *pause;
	guint initial_count;
	gint64 backoff_us; /* after a backend failure; 0 after success */
};

struct set_request {
	struct autosleep *as;
	enum pm_state state;
	struct pf_caller caller;
	gboolean has_caller;
	backend_done_func done;
	gpointer data;
};

static void run_start(struct autosleep *as);

/* The kernel's queue_up_suspend_work(). */
static void queue_work(struct autosleep *as)
{
	if (as->state == PM_ON || as->queued)
		return;
	as->queued = TRUE;
	if (!as->running)
		run_start(as);
}

/* A run ends; requeue unless it stopped because autosleep is off. */
static void run_end(struct autosleep *as, gboolean requeue)
{
	as->running = FALSE;
	if (requeue)
		queue_work(as);
	if (as->queued)
		run_start(as);
}

static void pause_then_end(struct autosleep *as, gint64 pause_us)
{
	pf_timer_arm(as->pause, pf_clock_now(as->clock) + pause_us);
}

/* The backend failed: retry after a pause that doubles from 0.5 s to 60 s,
 * so a broken backend is neither hammered nor given up on.  Each failure is
 * logged once, with the pause it starts. */
static void back_off(struct autosleep *as, int error)
{
	as->backoff_us = as->backoff_us ?
				 MIN(as->backoff_us * 2, MAX_BACKOFF_US) :
				 MIN_BACKOFF_US;
	g_warning("autosleep: suspend failed (%s), next attempt in %.1f s",
		  g_strerror(-error), as->backoff_us / (double)G_USEC_PER_SEC);
	pf_events_publish(
		wakeup_events(as->engine),
		&(struct pf_event){ .type = PF_EVENT_BACKOFF,
				    .error = error,
				    .pause_ms =
					    (guint)(as->backoff_us /
						    (G_USEC_PER_SEC / 1000)) });
	pause_then_end(as, as->backoff_us);
}

static void run_suspended(struct autosleep *as, int error, gboolean backend)
{
	guint final_count;

	suspend_unlock(as->suspend);
	if (backend && error) {
		back_off(as, error);
		return;
	}
	if (backend)
		as->backoff_us = 0;
	/* Came back without any registered event: a wakeup of unknown cause.
	 * Do not spin on it. */
	if (wakeup_get_count(as->engine, &final_count) &&
	    final_count == as->initial_count) {
		pause_then_end(as, UNKNOWN_WAKEUP_PAUSE_US);
		return;
	}
	run_end(as, TRUE);
}

static void run_resumed(int error, gpointer data)
{
	run_suspended(data, error, TRUE);
}

static void run_locked(gpointer data)
{
	struct autosleep *as = data;
	int ret;

	if (suspend_shutting_down(as->suspend)) {
		suspend_unlock(as->suspend);
		as->running = FALSE;
		return;
	}
	if (!wakeup_save_count(as->engine, as->initial_count)) {
		/* An event came in since the count was read: start over. */
		suspend_unlock(as->suspend);
		run_end(as, TRUE);
		return;
	}
	/* The handshake is armed; only now does the setting count. */
	if (as->state == PM_ON) {
		suspend_unlock(as->suspend);
		run_end(as, FALSE);
		return;
	}
	suspend_set_origin(as->suspend, "autosleep", NULL);
	ret = suspend_enter(as->suspend, as->state, run_resumed, as);
	/* At once, -EBUSY is a wakeup event that came in time (no sleep, no
	 * back-off); anything else is the backend failing before sleeping. */
	if (ret != PF_PENDING)
		run_suspended(as, ret, ret != -EBUSY);
}

static void run_idle(gpointer data)
{
	struct autosleep *as = data;

	as->idle_wait = NULL;
	wakeup_get_count(as->engine, &as->initial_count);
	if (suspend_lock(as->suspend, run_locked, as))
		run_locked(as);
}

static void run_start(struct autosleep *as)
{
	as->queued = FALSE;
	as->running = TRUE;
	as->idle_wait = wakeup_wait_idle(as->engine, run_idle, as);
}

static void pause_over(gpointer data)
{
	run_end(data, TRUE);
}

struct autosleep *autosleep_new(struct wakeup_engine *engine, struct suspend *s,
				struct pf_clock *clock)
{
	struct autosleep *as = g_new0(struct autosleep, 1);

	as->engine = engine;
	as->suspend = s;
	as->clock = clock;
	as->state = PM_ON;
	as->ws = wakeup_source_register(engine, "autosleep", 9);
	as->pause = pf_timer_new(clock, pause_over, as);
	return as;
}

void autosleep_free(struct autosleep *as)
{
	if (!as)
		return;
	/* A run waiting for the last source, or pausing, just stops. */
	if (as->idle_wait)
		wakeup_cancel_wait(as->idle_wait);
	pf_timer_free(as->pause);
	wakeup_source_unregister(as->ws);
	g_free(as);
}

struct wakeup_source *autosleep_source(struct autosleep *as)
{
	return as->ws;
}

enum pm_state autosleep_state(const struct autosleep *as)
{
	return as->state;
}

static void apply_state(struct autosleep *as, enum pm_state state)
{
	if (state != as->state)
		g_info("autosleep %s",
		       state == PM_ON ? "off" : pm_state_label(state));
	as->state = state;
	wakeup_source_relax(as->ws);
	wakeup_set_autosleep(as->engine, state != PM_ON);
	wakeup_notify_changed(as->engine, NULL);
	/* Off stops nothing: a run in progress finds it out itself. */
	queue_work(as);
	suspend_unlock(as->suspend);
}

/* The switch took effect: said once apply_state() returned, so after
 * whatever the release of the transition lock ran, and just before the
 * writer is answered. */
static void switched(struct set_request *req)
{
	pf_events_publish(wakeup_events(req->as->engine),
			  &(struct pf_event){ .type = PF_EVENT_AUTOSLEEP,
					      .state = req->state,
					      .caller = req->has_caller ?
								&req->caller :
								NULL });
}

static void set_locked(gpointer data)
{
	struct set_request *req = data;

	if (suspend_shutting_down(req->as->suspend)) {
		suspend_unlock(req->as->suspend);
		req->done(-EIO, req->data);
	} else {
		apply_state(req->as, req->state);
		switched(req);
		req->done(0, req->data);
	}
	g_free(req);
}

void autosleep_restore_state(struct autosleep *as, enum pm_state state)
{
	as->state = state;
	wakeup_set_autosleep(as->engine, state != PM_ON);
	queue_work(as);
}

int autosleep_set_state(struct autosleep *as, enum pm_state state,
			const struct pf_caller *caller, backend_done_func done,
			gpointer data)
{
	struct set_request *req;

	if (state != PM_ON &&
	    !(suspend_valid_states(as->suspend) & PM_STATE_BIT(state)))
		return -EINVAL;
	/* Signalled before waiting for the lock, as in the kernel: the event
	 * wakes a suspend in progress and fails a pending handshake. */
	wakeup_source_stay_awake(as->ws);
	req = g_new0(struct set_request, 1);
	*req = (struct set_request){ .as = as,
				     .state = state,
				     .has_caller = caller != NULL,
				     .done = done,
				     .data = data };
	if (caller)
		req->caller = *caller;
	if (!suspend_lock(as->suspend, set_locked, req))
		return PF_PENDING;
	apply_state(as, state);
	switched(req);
	g_free(req);
	return 0;
}
