/* suspend.c - entering a sleep state (the kernel's kernel/power/suspend.c).
 *
 * All state transitions are serialised by one lock, as the kernel serialises
 * them with autosleep_lock: a state write, a wakeup_count write, an autosleep
 * change and an autosleep cycle each take it and run alone.  The lock is
 * asynchronous: a caller that finds it taken is queued and resumed from the
 * main loop when it is released, so nothing ever blocks a thread.
 */
#include <errno.h>
#include <string.h>

#include "powerfs/engine/suspend.h"

struct lock_waiter {
	suspend_locked_func func;
	gpointer data;
};

/* An attempt as its events tell it. */
struct attempt {
	enum pm_state state; /* PM_ON: someone else's sleep */
	const char *by;	     /* "state", "autosleep", "host" or "" */
	struct pf_caller caller;
	gboolean has_caller;
};

struct suspend {
	struct wakeup_engine *engine;
	struct backend *backend;
	struct wakeup_reason *reasons;
	gboolean locked;
	GQueue lock_queue;   /* struct lock_waiter * */
	gboolean sleeping;   /* the backend is entering a state */
	enum pm_state state; /* the one it is entering */
	backend_done_func done;
	gpointer done_data;
	struct suspend_stats stats;
	struct pm_settings settings;
	struct backend_listener listener;
	gboolean external_sleep;   /* started by someone else */
	gboolean host_asleep;	   /* between sleeping(TRUE) and resumed() */
	wakeup_func sleeping_func; /* of the attempt in progress */
	gpointer sleeping_data;
	gboolean shutting_down;
	struct attempt origin;	  /* of the next attempt */
	struct attempt attempt;	  /* the one in progress */
	struct attempt external;  /* someone else's sleep */
	GHashTable *wake_sources; /* name -> the backend's sources */
};

static const struct attempt no_origin = { .by = "" };

static void publish_attempt(struct suspend *s, enum pf_event_type type,
			    const struct attempt *a, int error,
			    const char *step)
{
	pf_events_publish(
		wakeup_events(s->engine),
		&(struct pf_event){ .type = type,
				    .state = a->state,
				    .by = a->by,
				    .caller = a->has_caller ? &a->caller : NULL,
				    .error = error,
				    .step = step });
}

static const char *const state_labels[PM_NR_STATES] = {
	[PM_FREEZE] = "freeze",
	[PM_STANDBY] = "standby",
	[PM_MEM] = "mem",
	[PM_DISK] = "disk",
};

const char *pm_state_label(enum pm_state state)
{
	return state > PM_ON && state < PM_NR_STATES ? state_labels[state] :
						       NULL;
}

const char *mem_sleep_label(enum pm_state state)
{
	static const char *const labels[] = {
		[PM_FREEZE] = "s2idle",
		[PM_STANDBY] = "shallow",
		[PM_MEM] = "deep",
	};

	return state > PM_ON && state <= PM_MEM ? labels[state] : NULL;
}

const char *pm_test_label(enum pm_test_level level)
{
	static const char *const labels[PM_TEST_LEVELS] = {
		"none", "core", "processors", "platform", "devices", "freezer",
	};

	return level < PM_TEST_LEVELS ? labels[level] : NULL;
}

void backend_clear_wakeup(struct backend *be)
{
	be->wake_irq = -1;
	be->wake_irq_name = NULL;
	be->wake_reason = NULL;
	be->slept_ns = -1;
	be->wake_source = NULL;
	be->wake_source_ms = 0;
}

/* The kernel's suspend steps (suspend_stat_step), in the order of the
 * failed_* counters. */
static const char *const steps[] = {
	"freeze",	 "prepare",	 "suspend",	 "suspend_late",
	"suspend_noirq", "resume_noirq", "resume_early", "resume",
};

static int *step_counter(struct suspend_stats *st, gsize step)
{
	int *counters[G_N_ELEMENTS(steps)] = {
		&st->failed_freeze,	   &st->failed_prepare,
		&st->failed_suspend,	   &st->failed_suspend_late,
		&st->failed_suspend_noirq, &st->failed_resume_noirq,
		&st->failed_resume_early,  &st->failed_resume,
	};

	return counters[step];
}

/* The step's index in steps[], or -1 if unknown. */
static gssize find_step(const char *name)
{
	for (gsize i = 0; i < G_N_ELEMENTS(steps); i++)
		if (!g_strcmp0(name, steps[i]))
			return i;
	return -1;
}

/* A failure at step (NULL, or one we do not know: "suspend") counts in that
 * step's counter, as the kernel counts it. */
static void record_failure(struct suspend *s, int error, const char *step)
{
	gssize i = find_step(step);

	if (i < 0)
		i = find_step("suspend");
	(*step_counter(&s->stats, i))++;
	s->stats.fail++;
	s->stats.last_failed_errno = error;
	s->stats.last_failed_step = steps[i];
}

/* The host's failed tries within one sleep, before its outcome. */
static void record_earlier_failures(struct suspend *s)
{
	guint n = s->backend->earlier_failures;

	s->backend->earlier_failures = 0;
	while (n--)
		record_failure(s, s->backend->earlier_errno,
			       s->backend->failed_step);
}

/* The source the backend says woke the system is why, and signals its
 * event while the handshake is still armed (it counts in its
 * wakeup_count): a driver's pm_wakeup_event() at resume.  The sources are
 * registered the first time they are named, and kept. */
static void signal_wake_source(struct suspend *s)
{
	const char *name = s->backend->wake_source;
	struct wakeup_source *ws;

	if (!name)
		return;
	wakeup_reason_log_abnormal(s->reasons, name);
	ws = g_hash_table_lookup(s->wake_sources, name);
	if (!ws) {
		ws = wakeup_source_register(s->engine, name, strlen(name));
		g_hash_table_insert(s->wake_sources, g_strdup(name), ws);
	}
	wakeup_source_event(ws, s->backend->wake_source_ms);
}

/* The backend's word on why the sleep ended, then the times: an attempt
 * ends here (the kernel's PM_POST_SUSPEND). */
static void record_wakeup(struct suspend *s, int error)
{
	struct backend *be = s->backend;

	if (error) {
		g_autofree char *why = g_strdup_printf(
			"%s failed to %s: error %d", be->ops->name,
			s->stats.last_failed_step, error);

		wakeup_reason_log_abort(s->reasons, why);
	} else if (be->wake_irq >= 0) {
		wakeup_reason_log_irq(s->reasons, be->wake_irq,
				      be->wake_irq_name);
	} else if (be->wake_reason) {
		wakeup_reason_log_abnormal(s->reasons, be->wake_reason);
	}
	wakeup_reason_end(s->reasons, error ? -1 : be->slept_ns);
	backend_clear_wakeup(be);
}

static gboolean system_sleeping(gboolean host, gpointer data)
{
	struct suspend *s = data;
	struct pf_event ev = { .type = PF_EVENT_SLEEPING, .host = host };
	gboolean answered = FALSE;

	if (!s->sleeping && !s->external_sleep) {
		wakeup_reason_begin(s->reasons);
		s->external_sleep = TRUE;
		s->external = (struct attempt){ .state = PM_ON, .by = "host" };
		publish_attempt(s, PF_EVENT_ATTEMPT_BEGIN, &s->external, 0,
				NULL);
		g_message("the system is going to sleep");
	}
	s->host_asleep = host;
	if (host && s->sleeping_func) {
		wakeup_func func = s->sleeping_func;

		s->sleeping_func = NULL;
		func(s->sleeping_data);
		answered = TRUE; /* the state write */
	}
	pf_events_publish(wakeup_events(s->engine), &ev);
	return answered || ev.answered;
}

static void system_resumed(int error, gpointer data)
{
	struct suspend *s = data;

	if (s->host_asleep) {
		s->host_asleep = FALSE;
		pf_events_publish(
			wakeup_events(s->engine),
			&(struct pf_event){ .type = PF_EVENT_RESUMED });
	}
	/* Our own suspends are counted when the backend answers. */
	if (!s->external_sleep)
		return;
	s->external_sleep = FALSE;
	record_earlier_failures(s);
	if (error) {
		record_failure(s, error, s->backend->failed_step);
		record_wakeup(s, error);
		g_message("the system failed to sleep (%s): %s",
			  s->stats.last_failed_step, g_strerror(-error));
		publish_attempt(s, PF_EVENT_ATTEMPT_END, &s->external, error,
				s->stats.last_failed_step);
	} else {
		s->stats.success++;
		signal_wake_source(s);
		record_wakeup(s, 0);
		g_message("the system resumed");
		publish_attempt(s, PF_EVENT_ATTEMPT_END, &s->external, 0, "");
	}
	wakeup_notify_changed(s->engine, NULL);
}

void suspend_when_sleeping(struct suspend *s, wakeup_func func, gpointer data)
{
	g_return_if_fail(s->sleeping);
	s->sleeping_func = func;
	s->sleeping_data = data;
}

gboolean suspend_host_asleep(const struct suspend *s)
{
	return s->host_asleep;
}

static void on_wakeup_event(struct pf_event *ev, gpointer data)
{
	struct suspend *s = data;

	/* A wakeup event while asleep wakes the system (the simulated
	 * backend resumes early; real ones ignore it), and it is why the
	 * system woke: no IRQ, a wakeup source. */
	if (s->sleeping && s->backend->ops->wake) {
		wakeup_reason_log_abnormal(s->reasons,
					   wakeup_source_name(ev->source));
		s->backend->ops->wake(s->backend);
	}
}

struct suspend *suspend_new(struct wakeup_engine *engine,
			    struct backend *backend,
			    struct wakeup_reason *reasons)
{
	struct suspend *s = g_new0(struct suspend, 1);

	s->engine = engine;
	s->backend = backend;
	s->reasons = reasons;
	s->wake_sources =
		g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	backend_clear_wakeup(backend);
	g_queue_init(&s->lock_queue);
	s->stats.last_failed_dev = "";
	s->stats.last_failed_step = "";
	/* The kernel's defaults; "mem" is deep sleep where the platform has
	 * it, else what it has. */
	s->settings = (struct pm_settings){
		.mem_sleep = PM_FREEZE,
		.sync_on_suspend = TRUE,
		.pm_async = TRUE,
		.freeze_timeout_ms = 20000,
	};
	for (enum pm_state m = PM_MEM; m > PM_FREEZE; m--)
		if (suspend_mem_sleep_states(s) & PM_STATE_BIT(m)) {
			s->settings.mem_sleep = m;
			break;
		}
	s->origin = no_origin;
	s->listener =
		(struct backend_listener){ system_sleeping, system_resumed, s };
	backend->listener = &s->listener;
	pf_events_subscribe(wakeup_events(engine),
			    PF_EVENT_BIT(PF_EVENT_WAKEUP), on_wakeup_event, s);
	return s;
}

void suspend_free(struct suspend *s)
{
	GHashTableIter it;
	gpointer ws;

	if (!s)
		return;
	g_hash_table_iter_init(&it, s->wake_sources);
	while (g_hash_table_iter_next(&it, NULL, &ws))
		wakeup_source_unregister(ws);
	g_hash_table_unref(s->wake_sources);
	/* Queued callers are dropped: at exit their requests were already
	 * answered by the file system layer. */
	g_queue_clear_full(&s->lock_queue, g_free);
	pf_events_unsubscribe(wakeup_events(s->engine), on_wakeup_event, s);
	s->backend->listener = NULL;
	g_free(s);
}

guint suspend_valid_states(const struct suspend *s)
{
	return s->backend->ops->states(s->backend);
}

guint suspend_mem_sleep_states(const struct suspend *s)
{
	guint valid = suspend_valid_states(s);

	if (s->backend->mem_sleep_states)
		return s->backend->mem_sleep_states;
	return PM_STATE_BIT(PM_FREEZE) |
	       (valid & (PM_STATE_BIT(PM_STANDBY) | PM_STATE_BIT(PM_MEM)));
}

gboolean suspend_lock(struct suspend *s, suspend_locked_func func,
		      gpointer data)
{
	struct lock_waiter *w;

	if (!s->locked) {
		s->locked = TRUE;
		return TRUE;
	}
	w = g_new(struct lock_waiter, 1);
	w->func = func;
	w->data = data;
	g_queue_push_tail(&s->lock_queue, w);
	return FALSE;
}

gboolean suspend_lock_cancel(struct suspend *s, suspend_locked_func func,
			     gboolean (*match)(gpointer data, gpointer key),
			     gpointer key, gpointer *data)
{
	for (GList *l = s->lock_queue.head; l; l = l->next) {
		struct lock_waiter *w = l->data;

		if (w->func == func && match(w->data, key)) {
			*data = w->data;
			g_queue_delete_link(&s->lock_queue, l);
			g_free(w);
			return TRUE;
		}
	}
	return FALSE;
}

gboolean suspend_in_progress(const struct suspend *s)
{
	return s->sleeping;
}

void suspend_unlock(struct suspend *s)
{
	struct lock_waiter *w = g_queue_pop_head(&s->lock_queue);

	g_return_if_fail(s->locked);
	if (!w) {
		s->locked = FALSE;
		return;
	}
	/* Hand the lock straight to the next caller. */
	w->func(w->data);
	g_free(w);
}

/* Every attempt ends here: it ends the handshake and counts in the stats. */
static void attempt_finished(struct suspend *s, int error)
{
	s->sleeping = FALSE;
	s->sleeping_func = NULL;
	wakeup_end_handshake(s->engine);
	record_earlier_failures(s);
	if (error) {
		record_failure(s, error, s->backend->failed_step);
		g_message("suspend to %s failed (%s): %s",
			  pm_state_label(s->state), s->stats.last_failed_step,
			  g_strerror(-error));
	} else {
		s->stats.success++;
		g_message("resumed from %s", pm_state_label(s->state));
	}
	record_wakeup(s, error);
	/* Once counted: a listener sees the new suspend_stats. */
	wakeup_notify_changed(s->engine, NULL);
	publish_attempt(s, PF_EVENT_ATTEMPT_END, &s->attempt, error,
			error ? s->stats.last_failed_step : "");
}

static void on_resumed(int error, gpointer data)
{
	struct suspend *s = data;
	backend_done_func done = s->done;

	s->done = NULL;
	if (!error)
		signal_wake_source(s);
	attempt_finished(s, error);
	done(error, s->done_data);
}

int suspend_enter(struct suspend *s, enum pm_state state,
		  backend_done_func done, gpointer data)
{
	int ret;

	g_return_val_if_fail(s->locked && !s->sleeping, -EBUSY);
	if (s->shutting_down)
		return -EIO;
	s->attempt = s->origin;
	s->attempt.state = state;
	s->origin = no_origin;
	publish_attempt(s, PF_EVENT_ATTEMPT_BEGIN, &s->attempt, 0, NULL);
	wakeup_reason_begin(s->reasons);
	/* The handshake's promise: if an event arrived since user space read
	 * wakeup_count, do not sleep (it would be lost).  The kernel finds
	 * it while freezing tasks, and says which sources were to blame. */
	if (wakeup_pending(s->engine)) {
		g_autoptr(GString) why = g_string_new(NULL);

		wakeup_describe_active(s->engine, why, WAKEUP_REASON_TEXT_MAX);
		wakeup_reason_log_abort(s->reasons, why->str);
		wakeup_reason_end(s->reasons, -1);
		wakeup_end_handshake(s->engine);
		record_failure(s, -EBUSY, "freeze");
		wakeup_notify_changed(s->engine, NULL);
		g_message("suspend to %s aborted: wakeup event pending",
			  pm_state_label(state));
		publish_attempt(s, PF_EVENT_ATTEMPT_END, &s->attempt, -EBUSY,
				"freeze");
		return -EBUSY;
	}
	if (s->settings.test_level != PM_TEST_NONE) {
		/* The kernel stops at the level's point and succeeds. */
		g_message("suspend to %s: test level %s, not sleeping",
			  pm_state_label(state),
			  pm_test_label(s->settings.test_level));
		wakeup_reason_end(s->reasons, -1);
		wakeup_end_handshake(s->engine);
		s->stats.success++;
		wakeup_notify_changed(s->engine, NULL);
		publish_attempt(s, PF_EVENT_ATTEMPT_END, &s->attempt, 0, "");
		return 0;
	}
	g_message("suspending to %s through %s", pm_state_label(state),
		  s->backend->ops->name);
	s->sleeping = TRUE;
	s->state = state;
	s->done = done;
	s->done_data = data;
	s->backend->failed_step = NULL; /* no step left from before */
	s->backend->freeze_timeout_ms = s->settings.freeze_timeout_ms;
	ret = s->backend->ops->suspend(s->backend, state, on_resumed, s);
	if (ret != PF_PENDING) {
		/* The backend failed before sleeping. */
		g_warn_if_fail(ret < 0);
		s->done = NULL;
		attempt_finished(s, ret);
	}
	return ret;
}

void suspend_abort(struct suspend *s)
{
	s->shutting_down = TRUE;
	if (s->sleeping && s->done) {
		backend_done_func done = s->done;

		/* The backend's late answer, if any, finds no one waiting:
		 * nothing runs the main loop after this. */
		s->done = NULL;
		s->sleeping = FALSE;
		s->sleeping_func = NULL;
		/* Its owner unlocks, which hands the lock to each queued
		 * caller in turn: they see shutting_down and give up. */
		done(-EIO, s->done_data);
	}
	g_warn_if_fail(g_queue_is_empty(&s->lock_queue));
}

gboolean suspend_shutting_down(const struct suspend *s)
{
	return s->shutting_down;
}

gboolean suspend_writer_frozen(struct suspend *s,
			       gboolean (*match)(gpointer data, gpointer key),
			       gpointer key, pid_t pid)
{
	struct backend *be = s->backend;

	return s->sleeping && s->sleeping_func &&
	       match(s->sleeping_data, key) && be->ops->freezes &&
	       be->ops->freezes(be, pid);
}

void suspend_set_origin(struct suspend *s, const char *by,
			const struct pf_caller *caller)
{
	s->origin = (struct attempt){ .by = by, .has_caller = caller != NULL };
	if (caller)
		s->origin.caller = *caller;
}

struct pm_settings *suspend_settings(struct suspend *s)
{
	return &s->settings;
}

const struct suspend_stats *suspend_get_stats(const struct suspend *s)
{
	return &s->stats;
}

void suspend_load_stats(struct suspend *s, const struct suspend_stats *stats)
{
	gssize i = find_step(stats->last_failed_step);

	/* The step names are static strings: keep pointing at ours. */
	s->stats = *stats;
	s->stats.last_failed_dev = "";
	s->stats.last_failed_step = i < 0 ? "" : steps[i];
}
