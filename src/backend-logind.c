/* backend-logind.c - suspend through systemd-logind (org.freedesktop.login1).
 *
 * Suspend() and Hibernate() return once logind has queued the sleep, so the
 * result comes from the PrepareForSleep signal: true just before the host
 * sleeps, false after it resumed.  If the sleep does not begin within the
 * suspend timeout (logind refused to start it, or a delay inhibitor held
 * it up), the attempt fails with EBUSY.
 *
 * powerfs holds a "delay" inhibitor for sleep so that, whoever starts a
 * sleep, it can first answer the requests parked in the file system: no
 * client may sit inside a FUSE request while the host freezes its tasks.  It
 * lets go of the inhibitor once they are answered and takes it again after
 * resume.  With --inhibit-sleep it also holds a "block" inhibitor while any
 * wakeup source is active, so a container's wake locks keep the host awake.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <gio/gio.h>
#include <gio/gunixfdlist.h>

#include "powerfs/backend.h"
#include "powerfs/suspend.h"

#define LOGIND_NAME "org.freedesktop.login1"
#define LOGIND_PATH "/org/freedesktop/login1"
#define LOGIND_MANAGER "org.freedesktop.login1.Manager"

struct logind {
	struct backend base;
	struct pf_clock *clock;
	GDBusConnection *bus;
	guint prepare_sub;
	guint name_watch;
	gboolean present;
	guint states;
	gint64 suspend_timeout_us;
	int delay_fd;
	/* The block inhibitor of --inhibit-sleep. */
	char *block_why;	/* wanted while non-NULL */
	int block_fd;
	gboolean block_pending;	/* an Inhibit call is on its way */
	/* Our own suspend in progress. */
	backend_done_func done;
	gpointer data;
	gboolean sleep_began;
	struct pf_timer *timeout;
};

static int errno_from_dbus(const GError *error)
{
	g_autofree char *name = g_dbus_error_get_remote_error(error);

	if (!name)
		return -EIO;
	if (!strcmp(name, "org.freedesktop.DBus.Error.AccessDenied") ||
	    !strcmp(name, "org.freedesktop.DBus.Error."
				"InteractiveAuthorizationRequired"))
		return -EPERM;
	if (!strcmp(name, "org.freedesktop.login1.SleepVerbNotSupported") ||
	    !strcmp(name, "org.freedesktop.DBus.Error.NotSupported"))
		return -EINVAL;
	if (!strcmp(name, "org.freedesktop.login1.OperationInProgress"))
		return -EBUSY;
	return -EIO;
}

static void log_dbus_error(const char *what, GError *error)
{
	g_autofree char *name = g_dbus_error_get_remote_error(error);

	g_dbus_error_strip_remote_error(error);
	g_warning("logind %s failed: %s (%s)", what, error->message,
		  name ? name : "no D-Bus error name");
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

static int take_inhibitor(struct logind *li, const char *why,
			  const char *mode, GError **error)
{
	g_autoptr(GUnixFDList) fds = NULL;
	g_autoptr(GVariant) reply = NULL;
	gint32 index;

	reply = g_dbus_connection_call_with_unix_fd_list_sync(
		li->bus, LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER, "Inhibit",
		g_variant_new("(ssss)", "sleep", "powerfs", why, mode),
		G_VARIANT_TYPE("(h)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL, &fds,
		NULL, error);
	if (!reply)
		return -1;
	g_variant_get(reply, "(h)", &index);
	return steal_fd(fds, index, error);
}

static void take_delay_inhibitor(struct logind *li)
{
	g_autoptr(GError) error = NULL;

	if (li->delay_fd >= 0)
		return;
	li->delay_fd = take_inhibitor(
		li, "Answering clients waiting in powerfs before sleep",
		"delay", &error);
	if (li->delay_fd < 0)
		log_dbus_error("Inhibit(delay)", error);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static guint query_states(struct logind *li, GError **error)
{
	static const struct {
		const char *method;
		guint states;
	} verbs[] = {
		{ "CanSuspend", PM_STATE_BIT(PM_FREEZE) | PM_STATE_BIT(PM_MEM) },
		{ "CanHibernate", PM_STATE_BIT(PM_DISK) },
	};
	guint states = 0;

	for (gsize i = 0; i < G_N_ELEMENTS(verbs); i++) {
		g_autoptr(GVariant) reply = NULL;
		const char *answer;

		reply = g_dbus_connection_call_sync(
			li->bus, LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER,
			verbs[i].method, NULL, G_VARIANT_TYPE("(s)"),
			G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, NULL, error);
		if (!reply)
			return G_MAXUINT;
		g_variant_get(reply, "(&s)", &answer);
		/* "challenge" means allowed after authentication: possible. */
		if (!strcmp(answer, "yes") || !strcmp(answer, "challenge"))
			states |= verbs[i].states;
	}
	return states;
}

static void finish(struct logind *li, int error)
{
	backend_done_func done = li->done;

	if (!done)
		return;
	li->done = NULL;
	li->sleep_began = FALSE;
	pf_timer_disarm(li->timeout);
	done(error, li->data);
}

static void on_prepare_for_sleep(GDBusConnection *bus, const char *sender,
				 const char *path, const char *iface,
				 const char *signal, GVariant *params,
				 gpointer data)
{
	struct logind *li = data;
	gboolean start;

	(void)bus, (void)sender, (void)path, (void)iface, (void)signal;
	g_variant_get(params, "(b)", &start);
	if (start) {
		g_debug("logind: PrepareForSleep(true)");
		if (li->done) {
			li->sleep_began = TRUE;
			pf_timer_disarm(li->timeout);
		}
		if (li->base.listener)
			li->base.listener->sleeping(li->base.listener->data);
		/* Everyone is answered: let the host go. */
		close_fd(&li->delay_fd);
	} else {
		g_debug("logind: PrepareForSleep(false)");
		take_delay_inhibitor(li);
		if (li->base.listener)
			li->base.listener->resumed(0, li->base.listener->data);
		if (li->sleep_began)
			finish(li, 0);
	}
}

static void sleep_never_began(gpointer data)
{
	struct logind *li = data;

	g_warning("logind did not start the sleep within %" G_GINT64_FORMAT
		  " s",
		  li->suspend_timeout_us / G_USEC_PER_SEC);
	finish(li, -EBUSY);
}

static void on_suspend_reply(GObject *source, GAsyncResult *res,
			     gpointer data)
{
	struct logind *li = data;
	g_autoptr(GError) error = NULL;
	g_autoptr(GVariant) reply = NULL;
	int ret;

	reply = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), res,
					      &error);
	if (reply)
		return;	/* queued: PrepareForSleep tells the rest */
	if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
		return;
	ret = errno_from_dbus(error);
	log_dbus_error("Suspend", error);
	if (!li->sleep_began)
		finish(li, ret);
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
	li->sleep_began = FALSE;
	pf_timer_arm(li->timeout,
		     pf_clock_now(li->clock) + li->suspend_timeout_us);
	g_dbus_connection_call(li->bus, LOGIND_NAME, LOGIND_PATH,
			       LOGIND_MANAGER,
			       state == PM_DISK ? "Hibernate" : "Suspend",
			       g_variant_new("(b)", FALSE), NULL,
			       G_DBUS_CALL_FLAGS_NONE, -1, NULL,
			       on_suspend_reply, li);
	return PF_PENDING;
}

static void block_update(struct logind *li);

static void on_block_reply(GObject *source, GAsyncResult *res, gpointer data)
{
	struct logind *li = data;
	g_autoptr(GError) error = NULL;
	g_autoptr(GUnixFDList) fds = NULL;
	g_autoptr(GVariant) reply = NULL;
	gint32 index;
	int fd;

	li->block_pending = FALSE;
	reply = g_dbus_connection_call_with_unix_fd_list_finish(
		G_DBUS_CONNECTION(source), &fds, res, &error);
	if (!reply) {
		log_dbus_error("Inhibit(block)", error);
		return;
	}
	g_variant_get(reply, "(h)", &index);
	fd = steal_fd(fds, index, &error);
	if (fd < 0) {
		log_dbus_error("Inhibit(block)", error);
		return;
	}
	if (li->block_fd < 0) {
		li->block_fd = fd;
		g_debug("logind: holding a block inhibitor (%s)",
			li->block_why ? li->block_why : "no longer wanted");
	} else {
		close(fd);
	}
	block_update(li);	/* the wish may have changed meanwhile */
}

/* Bring the block inhibitor in line with the wish. */
static void block_update(struct logind *li)
{
	if (!li->block_why) {
		if (li->block_fd >= 0)
			g_debug("logind: releasing the block inhibitor");
		close_fd(&li->block_fd);
		return;
	}
	if (li->block_fd >= 0 || li->block_pending || !li->present)
		return;
	li->block_pending = TRUE;
	g_dbus_connection_call_with_unix_fd_list(
		li->bus, LOGIND_NAME, LOGIND_PATH, LOGIND_MANAGER, "Inhibit",
		g_variant_new("(ssss)", "sleep", "powerfs", li->block_why,
			      "block"),
		G_VARIANT_TYPE("(h)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL, NULL,
		on_block_reply, li);
}

void backend_logind_block_sleep(struct backend *be, const char *why)
{
	struct logind *li = (struct logind *)be;

	g_free(li->block_why);
	li->block_why = why ? g_strdup_printf("powerfs: held by %s", why) :
			      NULL;
	block_update(li);
}

static void logind_appeared(GDBusConnection *bus, const char *name,
			    const char *owner, gpointer data)
{
	struct logind *li = data;
	g_autoptr(GError) error = NULL;
	guint states;

	(void)bus, (void)name, (void)owner;
	if (li->present)
		return;
	states = query_states(li, &error);
	if (states == G_MAXUINT) {
		log_dbus_error("CanSuspend", error);
		return;
	}
	g_message("logind is back");
	li->states = states;
	li->present = TRUE;
	take_delay_inhibitor(li);
	block_update(li);
}

static void logind_vanished(GDBusConnection *bus, const char *name,
			    gpointer data)
{
	struct logind *li = data;

	(void)bus, (void)name;
	if (!li->present)
		return;
	g_warning("logind left the bus: suspends fail until it returns");
	li->present = FALSE;
	close_fd(&li->delay_fd);
	close_fd(&li->block_fd);
	finish(li, -EIO);
}

static void logind_free(struct backend *be)
{
	struct logind *li = (struct logind *)be;

	g_bus_unwatch_name(li->name_watch);
	g_dbus_connection_signal_unsubscribe(li->bus, li->prepare_sub);
	close_fd(&li->delay_fd);
	close_fd(&li->block_fd);
	pf_timer_free(li->timeout);
	g_free(li->block_why);
	g_object_unref(li->bus);
	g_free(li);
}

static const struct backend_ops logind_ops = {
	.name = "logind",
	.states = logind_states,
	.suspend = logind_suspend,
	.free = logind_free,
};

struct backend *backend_logind_new(struct pf_clock *clock,
				   guint suspend_timeout_s, GError **error)
{
	g_autoptr(GDBusConnection) bus = NULL;
	struct logind *li;
	guint states;

	bus = g_bus_get_sync(G_BUS_TYPE_SYSTEM, NULL, error);
	if (!bus)
		return NULL;
	li = g_new0(struct logind, 1);
	li->base.ops = &logind_ops;
	li->clock = clock;
	li->bus = g_steal_pointer(&bus);
	li->delay_fd = li->block_fd = -1;
	li->suspend_timeout_us = (gint64)suspend_timeout_s * G_USEC_PER_SEC;
	states = query_states(li, error);
	if (states == G_MAXUINT) {
		g_prefix_error(error, "logind is not reachable: ");
		g_object_unref(li->bus);
		g_free(li);
		return NULL;
	}
	li->states = states;
	li->present = TRUE;
	li->timeout = pf_timer_new(clock, sleep_never_began, li);
	li->prepare_sub = g_dbus_connection_signal_subscribe(
		li->bus, LOGIND_NAME, LOGIND_MANAGER, "PrepareForSleep",
		LOGIND_PATH, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
		on_prepare_for_sleep, li, NULL);
	li->name_watch = g_bus_watch_name_on_connection(
		li->bus, LOGIND_NAME, G_BUS_NAME_WATCHER_FLAGS_NONE,
		logind_appeared, logind_vanished, li, NULL);
	take_delay_inhibitor(li);
	return &li->base;
}
