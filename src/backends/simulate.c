/* backend-simulate.c - a backend that pretends to sleep.
 *
 * A "suspend" lasts sleep_ms of the powerfs clock, or ends early when a
 * wakeup event arrives (as a wakeup interrupt would end a real one).  Used
 * for demos, tests and containers whose host must not sleep.
 */
#include "powerfs/engine/backend.h"
#include "powerfs/engine/suspend.h"

struct simulate {
	struct backend base;
	struct pf_clock *clock;
	guint sleep_ms;
	guint states;
	struct pf_timer *wakeup;
	backend_done_func done;
	gpointer data;
	gint64 slept_at;
	gboolean woken; /* by a wakeup event, not the time */
};

static guint simulate_states(struct backend *be)
{
	return ((struct simulate *)be)->states;
}

static void simulate_resume(gpointer data)
{
	struct simulate *sim = data;
	backend_done_func done = sim->done;

	g_debug("simulated sleep over after %" G_GINT64_FORMAT " ms",
		(pf_clock_now(sim->clock) - sim->slept_at) / 1000);
	sim->done = NULL;
	/* The clock went on while "asleep": say how long that was.  An
	 * event that woke it early is the reason (the core knows which);
	 * otherwise the time ran out. */
	sim->base.slept_ns = (pf_clock_now(sim->clock) - sim->slept_at) * 1000;
	if (!sim->woken)
		sim->base.wake_reason = "simulated sleep ended";
	if (sim->base.listener)
		sim->base.listener->resumed(0, sim->base.listener->data);
	done(0, sim->data);
}

static int simulate_suspend(struct backend *be, enum pm_state state,
			    backend_done_func done, gpointer data)
{
	struct simulate *sim = (struct simulate *)be;

	g_debug("simulating %s for up to %u ms", pm_state_label(state),
		sim->sleep_ms);
	sim->done = done;
	sim->data = data;
	sim->slept_at = pf_clock_now(sim->clock);
	sim->woken = FALSE;
	pf_timer_arm(sim->wakeup, sim->slept_at + (gint64)sim->sleep_ms * 1000);
	/* Nothing is frozen here; but where the kernel's freezer would
	 * strike, every wait in powerfs ends as it would. */
	if (sim->base.listener)
		sim->base.listener->sleeping(FALSE, sim->base.listener->data);
	return PF_PENDING;
}

static void simulate_wake(struct backend *be)
{
	struct simulate *sim = (struct simulate *)be;

	/* Resume from the main loop, not inside the event's caller. */
	if (sim->done) {
		sim->woken = TRUE;
		pf_timer_arm(sim->wakeup, pf_clock_now(sim->clock));
	}
}

static void simulate_free(struct backend *be)
{
	struct simulate *sim = (struct simulate *)be;

	pf_timer_free(sim->wakeup);
	g_free(sim);
}

static const struct backend_ops simulate_ops = {
	.name = "simulate",
	.states = simulate_states,
	.suspend = simulate_suspend,
	.wake = simulate_wake,
	.free = simulate_free,
};

struct backend *backend_simulate_new(struct pf_clock *clock, guint sleep_ms,
				     guint states)
{
	struct simulate *sim = g_new0(struct simulate, 1);

	sim->base.ops = &simulate_ops;
	sim->clock = clock;
	sim->sleep_ms = sleep_ms;
	sim->states = states;
	sim->wakeup = pf_timer_new(clock, simulate_resume, sim);
	return &sim->base;
}
