/* power.c - builds and tears down one instance's power core. */
#include "powerfs/engine/power.h"

struct power *power_new(struct pf_clock *clock, struct backend *backend,
			const struct power_options *opts)
{
	struct power *pw = g_new0(struct power, 1);

	pw->clock = clock;
	pw->backend = backend;
	pw->engine = wakeup_engine_new(clock);
	pw->events = wakeup_events(pw->engine);
	pw->reasons = wakeup_reason_new(clock);
	pw->suspend = suspend_new(pw->engine, backend, pw->reasons);
	pw->autosleep = autosleep_new(pw->engine, pw->suspend, clock);
	pw->wakelocks = wakelocks_new(pw->engine, clock, opts->wakelock_limit,
				      opts->wakelock_gc_seconds);
	pw->check_capability = opts->check_capability;
	if (opts->trusted_userns_owners)
		pw->trusted_userns_owners =
			g_array_ref(opts->trusted_userns_owners);
	return pw;
}

void power_free(struct power *pw)
{
	if (!pw)
		return;
	wakelocks_free(pw->wakelocks);
	autosleep_free(pw->autosleep);
	suspend_free(pw->suspend);
	wakeup_reason_free(pw->reasons);
	wakeup_engine_free(pw->engine);
	pw->backend->ops->free(pw->backend);
	pf_clock_free(pw->clock);
	if (pw->trusted_userns_owners)
		g_array_unref(pw->trusted_userns_owners);
	g_free(pw);
}
