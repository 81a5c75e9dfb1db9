/* backend-logind.c - suspend through systemd-logind (org.freedesktop.login1).
 *
 * SuspendWithFlags() and HibernateWithFlags() return once logind has queued
 * the sleep, so the result comes from the PrepareForSleep signal: true just
 * before the host sleeps, false after it resumed (or failed to sleep).  If
 * the sleep does not begin within the suspend timeout (logind refused to
 * start it, or a delay inhibitor held it up), the attempt fails with EBUSY.
 * Whether the host really slept, logind does not say: the host kernel's
 * suspend_stats do, read before and after each sleep.
 *
 * powerfs holds a "delay" inhibitor for sleep so that, whoever starts a
 * sleep, it can first answer the requests parked in the file system: no
 * client may sit inside a FUSE request while the host freezes its tasks.  It
 * lets go of the inhibitor once they are answered and takes it again after
 * resume.  With --inhibit-sleep it also holds a "block" inhibitor while any
 * wakeup source is active, so a container's wake locks keep the host awake.
 *
 * Every D-Bus call after startup is asynchronous: the main loop also serves
 * the file systems, and a slow logind must not stall their requests.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <gio/gio.h>
#include <gio/gunixfdlist.h>

#include "powerfs/engine/backend.h"
#include "powerfs/backends/host-power.h"
#include "powerfs/engine/suspend.h"

#define LOGIND_NAME "org.freedesktop.login1"
#define LOGIND_PATH "/org/freedesktop/login1"
#define LOGIND_MANAGER "org.freedesktop.login1.Manager"

/* SD_LOGIND_ROOT_CHECK_INHIBITORS (sd-login.h). */
#define ROOT_CHECK_INHIBITORS ((guint64)1 << 0)

#define DELAY_WHY "Answering clients waiting in powerfs before sleep"

/* Back-off between Inhibit attempts that logind refused for a moment. */
#define RETRY_FIRST_US (100 * 1000)
#define RETRY_MAX_US (3200 * 1000)

struct logind;

/* An inhibitor lock powerfs wants to hold, taken asynchronously. */
struct inhibitor {
	struct logind *li;
	const char *mode; /* "delay" or "block" */
	char *why;	  /* wanted while non-NULL (and logind is there) */
	int fd;
	gboolean pending; /* an Inhibit call is on its way */
	struct pf_timer *retry;
	gint64 backoff_us; /* 0 until logind refuses */
};

/* The host kernel's counters, read around each sleep. */
struct kernel_stats {
	gboolean valid;
	gint64 success, fail, last_failed_errno;
	char last_failed_step[32];
};

struct states_query;

struct logind {
	struct backend base;
	struct pf_clock *clock;
	GDBusConnection *bus;
	GCancellable *cancel; /* every call in flight, cancelled at free */
	guint prepare_sub;
	guint name_watch;
	gboolean present;
	struct states_query *query; /* asking for the states again */
	guint states;
	gboolean with_flags; /* logind has SuspendWithFlags */
	gint64 suspend_timeout_us;
	struct inhibitor delay, block;
	int stats_dir;		    /* the host kernel's suspend_stats, or -1 */
	struct kernel_stats before; /* at PrepareForSleep(true) */
	char failed_step[32];	    /* base.failed_step points here */
	char *wake_irq_name;	    /* base.wake_irq_name points here */
	char *host_dir;		    /* base.host_dir points here */
	/* Our own suspend in progress. */
	backend_done_func done;
	gpointer data;
	enum pm_state state;
	gboolean sleep_began;
	struct pf_timer *timeout;
};

static gboolean dbus_error_is(const GError *error, const char *name)
{
	g_autofree char *remote = g_dbus_error_get_remote_error(error);

	return remote && !strcmp(remote, name);
}

static int errno_from_dbus(const GError *error)
{
	static const struct {
		const char *name;
		int error;
	} map[] = {
		{ "org.freedesktop.DBus.Error.AccessDenied", -EPERM },
		{ "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired",
		  -EPERM },
		{ "org.freedesktop.login1.SleepVerbNotSupported", -EINVAL },
		{ "org.freedesktop.DBus.Error.NotSupported", -EINVAL },
		{ "org.freedesktop.login1.OperationInProgress", -EBUSY },
		/* Another user's block inhibitor, with the root check flag
		 * (systemd 257 and later; older ones say AccessDenied). */
		{ "org.freedesktop.login1.BlockedByInhibitorLock", -EBUSY },
	};

	for (gsize i = 0; i < G_N_ELEMENTS(map); i++)
		if (dbus_error_is(error, map[i].name))
			return map[i].error;
	return -EIO;
}

static void log_dbus_error(const char *what, GError *error)
{
	g_autofree char *name = g_dbus_error_get_remote_error(error);

	g_dbus_error_strip_remote_error(error);
	g_warning("logind %s failed: %s (%s)", what, error->message,
		  name ? name : "no D-Bus error name");
}

/* A call cancelled at free: its callback must not touch the backend. */
static gboolean cancelled(const GError *error)
{
	return g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
}

/* The inhibitor's fd, out of the reply's fd list.  Stolen, not duplicated:
 * the list's own copy would keep the lock alive after we close ours. */
static int steal_fd(GUnixFDList *fds, gint32 index, GError **error)
{
	g_autofree int *stolen = NULL;
	int n = 0, fd = -1;

	if (fds)
		stolen = g_unix_fd_list_steal_fds(fds, &n);
	for (int i = 0; i < n; i++) {
		if (i == index)
			fd = stolen[i];
		else
			close(stolen[i]);
	}
	if (fd < 0)
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "Inhibit returned no file descriptor");
	return fd;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* --- inhibitors ----------------------------------------------------------- */

static void inhibitor_update(struct inhibitor *inh);

static gboolean inhibitor_wanted(const struct inhibitor *inh)
{
	return inh->why && inh->li->present;
}

/* A refusal by policy or a verb logind lacks stays so: asking again would
 * only wake powerfs up for nothing.  Anything else (OperationInProgress
 * around a sleep, a timeout) passes, so it is retried. */
static gboolean refused_for_good(const GError *error)
{
	int ret = errno_from_dbus(error);

	return ret == -EPERM || ret == -EINVAL;
}

static void inhibitor_failed(struct inhibitor *inh, GError *error)
{
	g_autofree char *what = g_strdup_printf("Inhibit(%s)", inh->mode);

	if (!inhibitor_wanted(inh))
		return;
	if (refused_for_good(error)) {
		log_dbus_error(what, error);
		return;
	}
	if (!inh->backoff_us)
		log_dbus_error(what, error);
	else
		g_debug("logind %s refused again: %s", what, error->message);
	inh->backoff_us = inh->backoff_us ?
				  MIN(inh->backoff_us * 2, RETRY_MAX_US) :
				  RETRY_FIRST_US;
	pf_timer_arm(inh->retry,
		     pf_clock_now(inh->li->clock) + inh->backoff_us);
}

static void inhibitor_took(struct inhibitor *inh, int fd)
{
	if (inh->fd >= 0 || !inhibitor_wanted(inh)) {
		close(fd);
		return;
	}
	inh->fd = fd;
	if (inh->backoff_us)
		g_message("logind: holding the %s inhibitor at last (%s)",
			  inh->mode, inh->why);
	else
		g_debug("logind: holding the %s inhibitor (%s)", inh->mode,
			inh->why);
	inh->backoff_us = 0;
}

static void on_inhibit_reply(GObject *source, GAsyncResult *res, gpointer data)
{
	struct inhibitor *inh = data;
	g_autoptr(GError) error = NULL;
	g_autoptr(GUnixFDList) fds = NULL;
	g_autoptr(GVariant) reply = NULL;
	gint32 index;
	int fd = -1;

	reply = g_dbus_connection_call_with_unix_fd_list_finish(
		G_DBUS_CONNECTION(source), &fds, res, &error);
	if (cancelled(error))
		return;
	inh->pending = FALSE;
	if (reply) {
		g_variant_get(reply, "(h)", &index);
		fd = steal_fd(fds, index, &error);
	}
	if (fd < 0) {
		inhibitor_failed(inh, error);
		return;
	}
	inhibitor_took(inh, fd);
	inhibitor_update(inh); /* the wish may have changed meanwhile */
}

static void inhibitor_call(struct inhibitor *inh)
{
	struct logind *li = inh->li;

	inh->pending = TRUE;
	g_dbus_connection_call_with_unix_fd_list(
		li->bus, LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER, "Inhibit",
		g_variant_new("(ssss)", "sleep", "powerfs", inh->why,
			      inh->mode),
		G_VARIANT_TYPE("(h)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL,
		li->cancel, on_inhibit_reply, inh);
}

/* Bring the inhibitor in line with the wish.  No timer stays armed when
 * nothing is wanted: an idle powerfs does not wake up. */
static void inhibitor_update(struct inhibitor *inh)
{
	if (!inhibitor_wanted(inh)) {
		if (inh->fd >= 0)
			g_debug("logind: releasing the %s inhibitor",
				inh->mode);
		close_fd(&inh->fd);
		pf_timer_disarm(inh->retry);
		inh->backoff_us = 0;
		return;
	}
	if (inh->fd >= 0 || inh->pending || pf_timer_is_armed(inh->retry))
		return;
	inhibitor_call(inh);
}

static void inhibitor_retry(gpointer data)
{
	inhibitor_update(data);
}

/* Want the inhibitor with this reason, or (NULL) not at all.  One already
 * held keeps its old reason: changing it would need a second lock. */
static void inhibitor_want(struct inhibitor *inh, const char *why)
{
	g_free(inh->why);
	inh->why = g_strdup(why);
	inhibitor_update(inh);
}

/* logind refuses inhibitors while a sleep is under way: once it is over,
 * try at once rather than at the end of the back-off. */
static void inhibitor_retry_now(struct inhibitor *inh)
{
	pf_timer_disarm(inh->retry);
	inhibitor_update(inh);
}

static void inhibitor_init(struct inhibitor *inh, struct logind *li,
			   const char *mode)
{
	inh->li = li;
	inh->mode = mode;
	inh->fd = -1;
	inh->retry = pf_timer_new(li->clock, inhibitor_retry, inh);
}

static void inhibitor_clear(struct inhibitor *inh)
{
	close_fd(&inh->fd);
	pf_timer_free(inh->retry);
	g_free(inh->why);
}

/* --- which states logind offers ------------------------------------------- */

static const struct {
	const char *method;
	guint states;
} verbs[] = {
	{ "CanSuspend", PM_STATE_BIT(PM_FREEZE) | PM_STATE_BIT(PM_MEM) },
	{ "CanHibernate", PM_STATE_BIT(PM_DISK) },
};

static guint verb_states(gsize verb, GVariant *reply)
{
	const char *answer;

	g_variant_get(reply, "(&s)", &answer);
	/* "challenge" means allowed after authentication: possible. */
	if (!strcmp(answer, "yes") || !strcmp(answer, "challenge"))
		return verbs[verb].states;
	return 0;
}

/* At startup, when powerfs cannot serve anything yet, a blocking call is
 * fine. */
static guint query_states_sync(struct logind *li, GError **error)
{
	guint states = 0;

	for (gsize i = 0; i < G_N_ELEMENTS(verbs); i++) {
		g_autoptr(GVariant) reply = NULL;

		reply = g_dbus_connection_call_sync(
			li->bus, LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER,
			verbs[i].method, NULL, G_VARIANT_TYPE("(s)"),
			G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, NULL, error);
		if (!reply)
			return G_MAXUINT;
		states |= verb_states(i, reply);
	}
	return states;
}

/* Asking the states of a logind that came back, one verb after the other.
 * A query that logind's leaving or a newer query made stale is dropped
 * when its answer comes. */
struct states_query {
	struct logind *li;
	gsize verb;
	guint states;
};

static void logind_back(struct logind *li, guint states)
{
	g_message("logind is back");
	li->states = states;
	li->present = TRUE;
	li->with_flags = TRUE; /* it may be a newer logind */
	inhibitor_update(&li->delay);
	inhibitor_update(&li->block);
}

static void ask_verb(struct states_query *q);

static void on_verb_reply(GObject *source, GAsyncResult *res, gpointer data)
{
	g_autofree struct states_query *q = data;
	g_autoptr(GError) error = NULL;
	g_autoptr(GVariant) reply = NULL;

	reply = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), res,
					      &error);
	if (cancelled(error) || q->li->query != q)
		return;
	if (!reply) {
		q->li->query = NULL;
		log_dbus_error(verbs[q->verb].method, error);
		return;
	}
	q->states |= verb_states(q->verb, reply);
	if (++q->verb < G_N_ELEMENTS(verbs)) {
		ask_verb(g_steal_pointer(&q));
		return;
	}
	q->li->query = NULL;
	logind_back(q->li, q->states);
}

static void ask_verb(struct states_query *q)
{
	struct logind *li = q->li;

	g_dbus_connection_call(li->bus, LOGIND_NAME, LOGIND_PATH,
			       LOGIND_MANAGER, verbs[q->verb].method, NULL,
			       G_VARIANT_TYPE("(s)"),
			       G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, li->cancel,
			       on_verb_reply, q);
}

/* --- the host kernel's verdict -------------------------------------------- */

/* The directory is opened once, at start, before powerfs mounts anything:
 * powerfs may be mounted over /sys/power itself (in a container), and a
 * read of its own files from the main loop would never be answered. */
static int open_stats_dir(const char *path)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		g_message("logind: %s not readable (%s): every sleep logind "
			  "reports counts as a success",
			  path, g_strerror(errno));
	return fd;
}

/* sysfs files are small and answer at once: reading them in the main
 * loop is fine. */
static gboolean read_stat(int dir, const char *name, char *buf, gsize size)
{
	int fd = dir >= 0 ? openat(dir, name, O_RDONLY | O_CLOEXEC) : -1;
	gssize n;

	if (fd < 0)
		return FALSE;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return FALSE;
	buf[n] = '\0';
	g_strstrip(buf);
	return TRUE;
}

static gboolean read_stat_number(int dir, const char *name, gint64 *value)
{
	char buf[32];

	return read_stat(dir, name, buf, sizeof(buf)) &&
	       g_ascii_string_to_signed(buf, 10, G_MININT64, G_MAXINT64, value,
					NULL);
}

static void read_kernel_stats(int dir, struct kernel_stats *ks)
{
	ks->valid = read_stat_number(dir, "success", &ks->success) &&
		    read_stat_number(dir, "fail", &ks->fail) &&
		    read_stat_number(dir, "last_failed_errno",
				     &ks->last_failed_errno) &&
		    read_stat(dir, "last_failed_step", ks->last_failed_step,
			      sizeof(ks->last_failed_step));
}

/* How the sleep that just ended went, by the host kernel's counters: its
 * errno and step (*step) if it counted only failures, else 0.  Every failure
 * it counted is one for powerfs too: those before the last outcome go to
 * earlier_failures (systemd-sleep tries mem, then freeze, in one sleep).
 * Without readable counters, or if they did not move (the kernel does not
 * count hibernation), logind's word that the host resumed is all there is. */
static int kernel_verdict(struct logind *li, const char **step)
{
	struct kernel_stats after;
	gint64 err, failures;

	*step = NULL;
	li->base.earlier_failures = 0;
	if (!li->before.valid)
		return 0;
	li->before.valid = FALSE;
	read_kernel_stats(li->stats_dir, &after);
	if (!after.valid)
		return 0;
	failures = after.fail - li->before.fail;
	if (failures <= 0 || failures > G_MAXINT)
		return 0;
	g_strlcpy(li->failed_step, after.last_failed_step,
		  sizeof(li->failed_step));
	if (li->failed_step[0])
		*step = li->failed_step;
	err = after.last_failed_errno;
	err = err < 0 && err > -4096 ? err : -EIO;
	li->base.earlier_errno = (int)err;
	if (after.success > li->before.success) {
		li->base.earlier_failures = (guint)failures;
		return 0;
	}
	li->base.earlier_failures = (guint)failures - 1;
	return (int)err;
}

/* --- sleeping ------------------------------------------------------------- */

static void finish(struct logind *li, int error, const char *step)
{
	backend_done_func done = li->done;

	if (!done)
		return;
	li->done = NULL;
	li->sleep_began = FALSE;
	pf_timer_disarm(li->timeout);
	li->base.failed_step = step;
	done(error, li->data);
}

static void sleep_begins(struct logind *li)
{
	g_debug("logind: PrepareForSleep(true)");
	if (li->done) {
		li->sleep_began = TRUE;
		pf_timer_disarm(li->timeout);
	}
	/* While our delay inhibitor still holds the host awake. */
	read_kernel_stats(li->stats_dir, &li->before);
	if (li->base.listener)
		li->base.listener->sleeping(TRUE, li->base.listener->data);
	/* Everyone is answered: let the host go. */
	inhibitor_want(&li->delay, NULL);
}

static void sleep_ended(struct logind *li)
{
	const char *step;
	int error = kernel_verdict(li, &step);

	g_debug("logind: PrepareForSleep(false)");
	if (!error) {
		g_free(li->wake_irq_name);
		li->wake_irq_name = NULL;
		if (host_power_wakeup_irq(li->base.host_dir, &li->base.wake_irq,
					  &li->wake_irq_name))
			li->base.wake_irq_name = li->wake_irq_name;
	}
	inhibitor_want(&li->delay, DELAY_WHY);
	inhibitor_retry_now(&li->block);
	li->base.failed_step = step;
	if (li->base.listener)
		li->base.listener->resumed(error, li->base.listener->data);
	/* The attempt ends here even if logind's answer to our call is
	 * still to come: it finds no attempt and is only logged. */
	if (li->sleep_began)
		finish(li, error, step);
}

static void on_prepare_for_sleep(GDBusConnection *bus, const char *sender,
				 const char *path, const char *iface,
				 const char *signal, GVariant *params,
				 gpointer data)
{
	gboolean start;

	(void)bus, (void)sender, (void)path, (void)iface, (void)signal;
	g_variant_get(params, "(b)", &start);
	if (start)
		sleep_begins(data);
	else
		sleep_ended(data);
}

static void sleep_never_began(gpointer data)
{
	struct logind *li = data;

	g_warning("logind did not start the sleep within %" G_GINT64_FORMAT
		  " s",
		  li->suspend_timeout_us / G_USEC_PER_SEC);
	finish(li, -EBUSY, NULL);
}

static const char *sleep_verb(const struct logind *li)
{
	return li->state == PM_DISK ? "Hibernate" : "Suspend";
}

static void sleep_failed(struct logind *li, GError *error)
{
	int ret = errno_from_dbus(error);

	log_dbus_error(sleep_verb(li), error);
	if (!li->sleep_began)
		finish(li, ret, NULL);
}

static void on_sleep_reply(GObject *source, GAsyncResult *res, gpointer data)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GVariant) reply = NULL;

	reply = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), res,
					      &error);
	if (reply || cancelled(error))
		return; /* queued: PrepareForSleep tells the rest */
	sleep_failed(data, error);
}

static void call_sleep(struct logind *li)
{
	/* false: never ask the user to authenticate. */
	g_dbus_connection_call(
		li->bus, LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER,
		sleep_verb(li), g_variant_new("(b)", FALSE), NULL,
		G_DBUS_CALL_FLAGS_NONE, -1, li->cancel, on_sleep_reply, li);
}

/* A logind older than systemd 246 lacks the WithFlags methods: plain
 * Suspend(false) is the best it offers. */
static void on_sleep_with_flags_reply(GObject *source, GAsyncResult *res,
				      gpointer data)
{
	struct logind *li = data;
	g_autoptr(GError) error = NULL;
	g_autoptr(GVariant) reply = NULL;

	reply = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), res,
					      &error);
	if (reply || cancelled(error))
		return;
	if (!dbus_error_is(error, "org.freedesktop.DBus.Error.UnknownMethod")) {
		sleep_failed(li, error);
		return;
	}
	if (li->with_flags)
		g_message("logind has no %sWithFlags: other users' block "
			  "inhibitors do not stop powerfs's sleeps",
			  sleep_verb(li));
	li->with_flags = FALSE;
	if (li->done && !li->sleep_began)
		call_sleep(li);
}

/* Without SD_LOGIND_ROOT_CHECK_INHIBITORS, root (powerfs) would override
 * every other user's block inhibitor. */
static void call_sleep_with_flags(struct logind *li)
{
	g_autofree char *method =
		g_strconcat(sleep_verb(li), "WithFlags", NULL);

	g_dbus_connection_call(li->bus, LOGIND_NAME, LOGIND_PATH,
			       LOGIND_MANAGER, method,
			       g_variant_new("(t)", ROOT_CHECK_INHIBITORS),
			       NULL, G_DBUS_CALL_FLAGS_NONE, -1, li->cancel,
			       on_sleep_with_flags_reply, li);
}

static guint logind_states(struct backend *be)
{
	return ((struct logind *)be)->states;
}

static int logind_suspend(struct backend *be, enum pm_state state,
			  backend_done_func done, gpointer data)
{
	struct logind *li = (struct logind *)be;

	if (!li->present)
		return -EIO;
	li->done = done;
	li->data = data;
	li->state = state;
	li->sleep_began = FALSE;
	pf_timer_arm(li->timeout,
		     pf_clock_now(li->clock) + li->suspend_timeout_us);
	if (li->with_flags)
		call_sleep_with_flags(li);
	else
		call_sleep(li);
	return PF_PENDING;
}

static void logind_block_host_sleep(struct backend *be, const char *why)
{
	struct logind *li = (struct logind *)be;
	g_autofree char *name = NULL;
	g_autofree char *text = NULL;

	if (why) {
		/* Wake lock names are bytes; D-Bus strings are UTF-8. */
		name = g_utf8_make_valid(why, -1);
		text = g_strdup_printf("powerfs: held by %s", name);
	}
	inhibitor_want(&li->block, text);
}

/* --- logind on the bus ---------------------------------------------------- */

static void logind_appeared(GDBusConnection *bus, const char *name,
			    const char *owner, gpointer data)
{
	struct logind *li = data;
	struct states_query *q;

	(void)bus, (void)name, (void)owner;
	if (li->present)
		return;
	q = g_new0(struct states_query, 1);
	q->li = li;
	li->query = q; /* an older one is stale now */
	ask_verb(q);
}

static void logind_vanished(GDBusConnection *bus, const char *name,
			    gpointer data)
{
	struct logind *li = data;

	(void)bus, (void)name;
	li->query = NULL;
	if (!li->present)
		return;
	g_warning("logind left the bus: suspends fail until it returns");
	li->present = FALSE;
	inhibitor_update(&li->delay);
	inhibitor_update(&li->block);
	finish(li, -EIO, NULL);
}

static void logind_free(struct backend *be)
{
	struct logind *li = (struct logind *)be;

	g_cancellable_cancel(li->cancel);
	g_bus_unwatch_name(li->name_watch);
	g_dbus_connection_signal_unsubscribe(li->bus, li->prepare_sub);
	inhibitor_clear(&li->delay);
	inhibitor_clear(&li->block);
	pf_timer_free(li->timeout);
	if (li->stats_dir >= 0)
		close(li->stats_dir);
	g_free(li->host_dir);
	g_free(li->wake_irq_name);
	g_object_unref(li->cancel);
	g_object_unref(li->bus);
	g_free(li);
}

static const struct backend_ops logind_ops = {
	.name = "logind",
	.states = logind_states,
	.suspend = logind_suspend,
	.block_host_sleep = logind_block_host_sleep,
	.free = logind_free,
};

struct backend *backend_logind_new(struct pf_clock *clock,
				   guint suspend_timeout_s,
				   const char *host_dir, const char *stats_dir,
				   GError **error)
{
	g_autoptr(GDBusConnection) bus = NULL;
	struct logind *li;
	guint states;

	bus = g_bus_get_sync(G_BUS_TYPE_SYSTEM, NULL, error);
	if (!bus) {
		const char *addr = g_getenv("DBUS_SYSTEM_BUS_ADDRESS");

		g_prefix_error(error,
			       "--backend=logind talks to "
			       "systemd-logind over the system D-Bus, which "
			       "is not reachable at %s: ",
			       addr ? addr : "/run/dbus/system_bus_socket");
		return NULL;
	}
	li = g_new0(struct logind, 1);
	li->base.ops = &logind_ops;
	li->clock = clock;
	li->bus = g_steal_pointer(&bus);
	states = query_states_sync(li, error);
	if (states == G_MAXUINT) {
		g_prefix_error(error, "logind is not reachable: ");
		g_object_unref(li->bus);
		g_free(li);
		return NULL;
	}
	li->states = states;
	li->present = TRUE;
	li->with_flags = TRUE;
	li->cancel = g_cancellable_new();
	li->stats_dir = open_stats_dir(stats_dir);
	li->host_dir = g_strdup(host_dir);
	li->base.host_dir = li->host_dir;
	li->suspend_timeout_us = (gint64)suspend_timeout_s * G_USEC_PER_SEC;
	li->timeout = pf_timer_new(clock, sleep_never_began, li);
	inhibitor_init(&li->delay, li, "delay");
	inhibitor_init(&li->block, li, "block");
	li->prepare_sub = g_dbus_connection_signal_subscribe(
		li->bus, LOGIND_NAME, LOGIND_MANAGER, "PrepareForSleep",
		LOGIND_PATH, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
		on_prepare_for_sleep, li, NULL);
	li->name_watch = g_bus_watch_name_on_connection(
		li->bus, LOGIND_NAME, G_BUS_NAME_WATCHER_FLAGS_NONE,
		logind_appeared, logind_vanished, li, NULL);
	inhibitor_want(&li->delay, DELAY_WHY);
	return &li->base;
}
