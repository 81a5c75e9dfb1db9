/* server.c - the server role: builds the power core, its backend and the
 * records asked for, serves the connections (from the keeper, or mounted
 * here with --no-keeper) from the GLib main loop, and at the end saves the
 * state, or hands over to a successor.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <gio/gio.h>
#include <glib-unix.h>
#include <systemd/sd-daemon.h>

#include "powerfs/config.h"
#include "powerfs/engine/power.h"
#include "powerfs/records/journal.h"
#include "powerfs/records/log.h"
#include "powerfs/records/metrics.h"
#include "powerfs/records/state-file.h"
#include "powerfs/server.h"
#include "powerfs/status.h"
#include "powerfs/sysfs/class-wakeup.h"
#include "powerfs/sysfs/fs.h"
#include "powerfs/transport/keeper.h"
#include "powerfs/transport/loop-lock.h"
#include "powerfs/transport/mount.h"

/* logind, for the backends that follow the host's sleeps through it; NULL
 * and error if it cannot be reached. */
static struct backend *make_logind(struct pf_clock *clock, GError **error)
{
	const char *host = config.host_power ? config.host_power : "/sys/power";
	g_autofree char *stats =
		config.host_suspend_stats ?
			g_strdup(config.host_suspend_stats) :
			g_build_filename(host, "suspend_stats", NULL);

	return backend_logind_new(clock, config.suspend_timeout, host, stats,
				  error);
}

/* --backend=freeze:CGROUP: logind where it runs, to follow the host's
 * sleeps and for --inhibit-sleep, which cannot do without it. */
static struct backend *make_freeze(struct pf_clock *clock, const char *dir)
{
	g_autoptr(GError) error = NULL;
	struct backend *host = make_logind(clock, &error);
	struct backend *be;

	if (!host && config.inhibit_sleep)
		status_fail(1, "--inhibit-sleep: %s", error->message);
	if (!host)
		g_message("the host's sleeps are not followed: %s",
			  error->message);
	g_clear_error(&error);
	be = backend_freeze_new(clock, dir, host, &error);
	if (!be) {
		if (host)
			host->ops->free(host);
		usage_error("--backend=freeze: %s", error->message);
	}
	return be;
}

static struct backend *make_backend(struct pf_clock *clock)
{
	const char *name = config.backend ? config.backend : "simulate";
	g_autoptr(GError) error = NULL;
	struct backend *be;

	if (g_str_has_prefix(name, "freeze:"))
		return make_freeze(clock, name + strlen("freeze:"));
	if (g_str_has_prefix(name, "sysfs:")) {
		g_autofree char *real = realpath(name + strlen("sysfs:"), NULL);

		be = real ? backend_sysfs_new(clock, real, &error) : NULL;
		if (!be)
			usage_error("--backend=%s: %s", name,
				    error ? error->message : g_strerror(errno));
		return be;
	}
	if (!strcmp(name, "logind")) {
		be = make_logind(clock, &error);
		if (!be)
			status_fail(1, "%s", error->message);
		return be;
	}
	return backend_simulate_new(clock, config.simulate_sleep_ms,
				    config_simulate_states());
}

/* --inhibit-sleep: while a wakeup source is active, logind may not sleep. */
static void block_sleep_while_active(struct pf_event *ev, gpointer data)
{
	struct power *pw = data;
	const struct wakeup_source *ws = wakeup_first_active(pw->engine);

	(void)ev;
	pw->backend->ops->block_host_sleep(pw->backend,
					   ws ? wakeup_source_name(ws) : NULL);
}

/* How the server's loop ended. */
static enum { RUNNING, STOPPED, UNMOUNTED, HANDING_OVER, KEEPING } ending;

/* A signal that ends the server's loop, and how. */
struct loop_end {
	int how;
	GLogLevelFlags level;
	const char *message;
};

static const struct loop_end stopped = { STOPPED, G_LOG_LEVEL_MESSAGE,
					 "terminating" };
static const struct loop_end handing_over = { HANDING_OVER, G_LOG_LEVEL_MESSAGE,
					      "handing over to a successor" };
static const struct loop_end keeping = {
	KEEPING, G_LOG_LEVEL_WARNING,
	"the keeper died: this server becomes the keeper"
};

static GMainLoop *server_loop;

static gboolean end_loop_on_signal(gpointer data)
{
	const struct loop_end *end = data;

	if (end->level == G_LOG_LEVEL_WARNING)
		g_warning("%s", end->message);
	else
		g_message("%s", end->message);
	ending = end->how;
	g_main_loop_quit(server_loop);
	return G_SOURCE_CONTINUE;
}

static gboolean ignore_hup(gpointer data)
{
	(void)data;
	g_warning(
		"SIGHUP ignored: %s",
		config.no_keeper ?
			"without a keeper (--no-keeper) nothing can take over" :
			"upgrades go through the keeper, powerfs's parent");
	return G_SOURCE_CONTINUE;
}

static gboolean quit_on_unmount(gpointer loop)
{
	ending = UNMOUNTED;
	g_main_loop_quit(loop);
	return G_SOURCE_REMOVE;
}

/* The mount ended: unmounted (fusermount3 -u), or its connection aborted
 * (/sys/fs/fuse/connections/N/abort), which leaves it dead in place and is
 * a failure, so that a service manager restarts powerfs. */
static int exit_status_at_the_end(const char *mountpoint)
{
	struct statfs sfs;

	if (statfs(mountpoint, &sfs) < 0 && errno == ENOTCONN) {
		g_warning("%s: the connection was aborted", mountpoint);
		return 1;
	}
	return 0;
}

/* The keeper died: this process executes itself as the keeper, with the
 * connections it was serving, and the keeper starts a new server. */
static void become_keeper(char **argv)
{
	sigset_t keepers;

	/* The keeper's signals wait for it to handle them (keeper_run()):
	 * a SIGHUP or SIGTERM must not end it while it starts. */
	sigemptyset(&keepers);
	sigaddset(&keepers, SIGHUP);
	sigaddset(&keepers, SIGTERM);
	sigaddset(&keepers, SIGINT);
	sigaddset(&keepers, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &keepers, NULL);
	g_setenv("POWERFS_KEEPER_FDS", g_getenv("POWERFS_FDS"), TRUE);
	g_unsetenv("POWERFS_FDS");
	g_unsetenv("POWERFS_READY_FD");
	execv("/proc/self/exe", argv);
	g_critical("cannot become the keeper: %s", g_strerror(errno));
}

/* What a server runs. */
struct server {
	GMainLoop *loop;
	struct power *pw;
	struct pf_owners *owners;
	struct pf_fs *fs, *wr;
	struct pf_class_wakeup *cw;
	struct state_file *sf;
	struct journal *journal;
	struct pf_metrics *metrics;
};

/* The core, its backend, and the journal first, so that it records the
 * start. */
static void build_core(struct server *sv)
{
	g_autoptr(GError) error = NULL;
	struct pf_clock *clock = pf_clock_new_monotonic();
	struct power_options popts = {
		.wakelock_limit = config.wakelock_limit,
		.wakelock_gc_seconds = config.wakelock_gc_seconds,
		.check_capability = !config.no_capability_check,
		.trusted_userns_owners = config.trusted_userns_owners,
	};

	sv->pw = power_new(clock, make_backend(clock), &popts);
	if (config.journal) {
		sv->journal = journal_open(config.journal, config.journal_size,
					   sv->pw, &error);
		if (!sv->journal)
			status_fail(1, "%s", error->message);
		journal_start(sv->journal, sv->pw->backend->ops->name,
			      suspend_valid_states(sv->pw->suspend));
	}
	if (config.inhibit_sleep)
		pf_events_subscribe(sv->pw->events,
				    PF_EVENT_BIT(PF_EVENT_ACTIVITY),
				    block_sleep_while_active, sv->pw);
}

/* Serves the main mount and those asked for (exits on an error). */
static void serve_mounts(struct server *sv, const char *mountpoint,
			 const char *class_wakeup_dir,
			 const char *wakeup_reasons_dir,
			 const struct server_conns *c)
{
	g_autoptr(GError) error = NULL;
	const struct pf_attr *attrs;
	guint n_attrs;

	attrs = pf_attrs(&n_attrs);
	sv->owners = pf_owners_new();
	sv->fs = pf_fs_serve(sv->pw, attrs, n_attrs, sv->owners, c->fuse_fd,
			     c->session_fd, mountpoint, config.debug,
			     quit_on_unmount, sv->loop, &error);
	if (!sv->fs) {
		power_free(sv->pw);
		status_fail(1, "%s", error->message);
	}
	if (class_wakeup_dir) {
		sv->cw = pf_class_wakeup_serve(sv->pw->engine, c->cw_fuse_fd,
					       c->cw_session_fd,
					       class_wakeup_dir, &error);
		if (!sv->cw) {
			pf_fs_free(sv->fs, FALSE);
			power_free(sv->pw);
			status_fail(1, "%s", error->message);
		}
	}
	if (wakeup_reasons_dir) {
		attrs = pf_attrs_wakeup_reasons(&n_attrs);
		sv->wr =
			pf_fs_serve(sv->pw, attrs, n_attrs, NULL, c->wr_fuse_fd,
				    c->wr_session_fd, wakeup_reasons_dir,
				    config.debug, NULL, NULL, &error);
		if (!sv->wr) {
			pf_class_wakeup_free(sv->cw);
			pf_fs_free(sv->fs, FALSE);
			power_free(sv->pw);
			status_fail(1, "%s", error->message);
		}
	}
}

/* The records that outlive a server: owners, state, metrics. */
static void restore(struct server *sv)
{
	/* Before the state file: owners saved by a previous run win. */
	if (config.owner)
		pf_owners_chown_writable(sv->owners, config.owner_uid,
					 config.owner_gid);
	/* Restored before the loop serves the first request. */
	if (config.state_file) {
		sv->sf = state_file_open(config.state_file, sv->pw, sv->owners);
		pf_fs_set_before_reply(sv->fs, (wakeup_func)state_file_flush,
				       sv->sf);
	}
	journal_restored(sv->journal);
	/* After the restore: the first file holds the restored numbers. */
	if (config.metrics_dir)
		sv->metrics = pf_metrics_open(config.metrics_dir, sv->pw);
}

static void handle_signals(struct server *sv)
{
	sigset_t handled;

	server_loop = sv->loop;
	g_unix_signal_add(SIGTERM, end_loop_on_signal, (gpointer)&stopped);
	g_unix_signal_add(SIGINT, end_loop_on_signal, (gpointer)&stopped);
	g_unix_signal_add(SIGHUP, ignore_hup, NULL);
	if (g_getenv("POWERFS_FDS")) {
		g_unix_signal_add(SIGUSR2, end_loop_on_signal,
				  (gpointer)&handing_over);
		g_unix_signal_add(SIGUSR1, end_loop_on_signal,
				  (gpointer)&keeping);
	}
	/* Blocked by the keeper until now (see keeper.c): an upgrade asked
	 * for, or the keeper's death, while we started is handled now. */
	sigemptyset(&handled);
	sigaddset(&handled, SIGUSR1);
	sigaddset(&handled, SIGUSR2);
	sigaddset(&handled, SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, &handled, NULL);
}

/* A hand-over, or the keeper's death: the requests in progress stay
 * unanswered (the kernel sends them again to the successor, which
 * restores this state). */
static G_GNUC_NORETURN void hand_over(struct server *sv, char **argv)
{
	state_file_close(sv->sf);
	journal_stop(sv->journal);
	journal_close(sv->journal);
	/* The successor writes the file again at its start. */
	pf_metrics_close(sv->metrics, FALSE);
	pf_log_flush();
	if (ending == KEEPING)
		become_keeper(argv);
	_exit(KEEPER_HANDED_OVER);
}

int server_run(const char *mountpoint, const char *class_wakeup_dir,
	       const char *wakeup_reasons_dir, struct server_conns *c,
	       char **argv)
{
	struct server sv = { 0 };
	int status = 0;

	build_core(&sv);
	sv.loop = g_main_loop_new(NULL, FALSE);
	pf_loop_lock_init();
	serve_mounts(&sv, mountpoint, class_wakeup_dir, wakeup_reasons_dir, c);
	/* Every session has read it (pf_session_serve()): not for a keeper
	 * this process may become. */
	g_unsetenv("POWERFS_SERVER_CRASHED");
	restore(&sv);
	handle_signals(&sv);
	status_ready(config.foreground);
	/* Under systemd (Type=notify) without a keeper, which otherwise
	 * speaks for us: the mount is live now. */
	sd_notifyf(0, "READY=1\nSTATUS=serving %s", mountpoint);
	g_main_loop_run(sv.loop);

	/* Take no request from here on, on either mount: nothing changes
	 * after the state is saved, and no state write starts a suspend. */
	pf_class_wakeup_stop(sv.cw);
	if (sv.wr)
		pf_fs_stop(sv.wr);
	pf_fs_stop(sv.fs);
	if (ending == HANDING_OVER || ending == KEEPING)
		hand_over(&sv, argv);
	sd_notify(0, "STOPPING=1");
	/* The attempt in progress ends, the requests waiting on it get
	 * their error, and the state is saved before the mounts go. */
	suspend_abort(sv.pw->suspend);
	state_file_close(sv.sf);
	/* Nothing serves these numbers any more. */
	pf_metrics_close(sv.metrics, TRUE);
	pf_class_wakeup_free(sv.cw);
	pf_fs_free(sv.wr, FALSE);
	pf_fs_free(sv.fs, FALSE);
	pf_owners_free(sv.owners);
	/* Only a dead connection may be looked at: a live one would wait
	 * for us. */
	if (ending == UNMOUNTED)
		status = exit_status_at_the_end(mountpoint);
	pf_mount_free(c->wr_mount, TRUE);
	pf_mount_free(c->cw_mount, TRUE);
	pf_mount_free(c->mount, TRUE);
	journal_stop(sv.journal);
	journal_close(sv.journal);
	power_free(sv.pw);
	g_main_loop_unref(sv.loop);
	g_message("exiting");
	return status;
}

void server_take_keepers_connections(struct server_conns *c)
{
	gboolean cw = g_getenv("POWERFS_CLASS_WAKEUP_DIR") != NULL;
	gboolean wr = g_getenv("POWERFS_WAKEUP_REASONS_DIR") != NULL;
	int fds[6];
	guint n = 2 + 2 * cw + 2 * wr, i = 2;
	guint64 ready;

	if (!keeper_parse_fds(g_getenv("POWERFS_FDS"), fds, n) ||
	    !g_ascii_string_to_unsigned(g_getenv("POWERFS_READY_FD"), 10, 3,
					G_MAXINT, &ready, NULL))
		status_fail(1, "POWERFS_FDS/POWERFS_READY_FD: not a keeper's");
	/* In the keeper's order: the main mount, then the others given. */
	*c = (struct server_conns){ .fuse_fd = fds[0],
				    .session_fd = fds[1],
				    .cw_fuse_fd = -1,
				    .cw_session_fd = -1,
				    .wr_fuse_fd = -1,
				    .wr_session_fd = -1 };
	if (cw) {
		c->cw_fuse_fd = fds[i++];
		c->cw_session_fd = fds[i++];
	}
	if (wr) {
		c->wr_fuse_fd = fds[i++];
		c->wr_session_fd = fds[i++];
	}
	status_set_fd((int)ready);
}

void server_mount_here(struct server_conns *c, const char *mountpoint,
		       const char *class_wakeup_dir,
		       const char *wakeup_reasons_dir, const char *options)
{
	g_autoptr(GError) error = NULL;

	*c = (struct server_conns){ .fuse_fd = -1,
				    .session_fd = -1,
				    .cw_fuse_fd = -1,
				    .cw_session_fd = -1,
				    .wr_fuse_fd = -1,
				    .wr_session_fd = -1 };
	c->mount = pf_mount_new(mountpoint, options, &error);
	if (!c->mount)
		status_fail(EXIT_USAGE, "%s", error->message);
	c->fuse_fd = pf_mount_fd(c->mount);
	if (class_wakeup_dir) {
		c->cw_mount = pf_mount_new(class_wakeup_dir, options, &error);
		if (!c->cw_mount) {
			pf_mount_free(c->mount, TRUE);
			status_fail(EXIT_USAGE, "--class-wakeup: %s",
				    error->message);
		}
		c->cw_fuse_fd = pf_mount_fd(c->cw_mount);
	}
	if (wakeup_reasons_dir) {
		c->wr_mount = pf_mount_new(wakeup_reasons_dir, options, &error);
		if (!c->wr_mount) {
			pf_mount_free(c->cw_mount, TRUE);
			pf_mount_free(c->mount, TRUE);
			status_fail(EXIT_USAGE, "--wakeup-reasons: %s",
				    error->message);
		}
		c->wr_fuse_fd = pf_mount_fd(c->wr_mount);
	}
}
