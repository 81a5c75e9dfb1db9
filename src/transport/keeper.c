/* keeper.c - the process that holds powerfs's FUSE connections while the
 * servers that serve them come and go.
 *
 * A container's /sys/power is a bind of powerfs's mount: if the process
 * holding the mount's /dev/fuse descriptor dies, every container keeps a
 * dead mount ("Transport endpoint is not connected") until it restarts.  So
 * the process the user (or systemd) starts mounts, keeps the descriptors,
 * and runs the server as a child, with the descriptors and a session file
 * (a memfd where the server keeps what a successor needs to take the
 * connection over: see take-over.c).  When the server crashes, the
 * keeper starts another at once; on SIGHUP it has the server hand over and
 * executes the binary on disk, itself included (a live upgrade); on
 * SIGTERM or SIGINT it has the server stop, then unmounts.
 *
 * The keeper never reads /dev/fuse, the session file or anything a client
 * wrote: it only holds, starts, forwards and waits.  Under systemd it also
 * puts the descriptors in the service's fd store, so that a crash of the
 * keeper itself is survived too (Restart= brings them back).
 *
 * Signals can come at any moment: a server starts with SIGUSR1, SIGUSR2
 * and SIGHUP blocked until it handles them (an upgrade asked for while it
 * starts waits for it), an upgrade asked for while a server dies is not
 * lost (the keeper then executes itself at once), and a mount that a
 * server has served is never given up for a server that dies before
 * serving: only a new mount is, at its very first start.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gio/gio.h>
#include <systemd/sd-daemon.h>

#include "powerfs/transport/mount.h"
#include "powerfs/transport/keeper.h"

/* A server gives up for good after this many crashes this close together. */
#define CRASHES_MAX 5
#define CRASH_WINDOW_US (10 * G_USEC_PER_SEC)

/* One connection: the /dev/fuse descriptor and its session file. */
struct conn {
	const char *name; /* fd store names: NAME-fuse, NAME-session */
	const char *mountpoint;
	struct pf_mount *mount; /* if the keeper mounted it */
	int fuse_fd, session_fd;
};

/* A fork that failed is tried again after this long, doubled each time. */
#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS 3200

struct keeper {
	const struct keeper_config *cfg;
	/* The main mount, /sys/class/wakeup, /sys/kernel/wakeup_reasons. */
	struct conn conns[3];
	guint n_conns;
	char *exe;	 /* the binary on disk, for upgrades */
	pid_t server;	 /* 0: none runs (a fork failed) */
	int ready_fd;	 /* read end: the server says it serves */
	gboolean ready;	 /* this keeper said READY=1 */
	gboolean served; /* a server served this mount (any keeper) */
	gboolean stopping, upgrading;
	gboolean reloading; /* RELOADING=1 said, READY=1 owed */
	gboolean crashed;   /* the last server died of a crash */
	gint64 retry_at;    /* monotonic: start a server then, or 0 */
	guint retry_ms;
	gint64 crashes[CRASHES_MAX];
};

static void inherit(int fd)
{
	int flags = fcntl(fd, F_GETFD);

	if (flags >= 0)
		fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
}

/* "F S F S": the connections handed from a keeper to the next, or to a
 * server (POWERFS_KEEPER_FDS, POWERFS_FDS). */
static char *fds_text(const struct keeper *k)
{
	GString *s = g_string_new(NULL);

	for (guint i = 0; i < k->n_conns; i++)
		g_string_append_printf(s, "%s%d %d", i ? " " : "",
				       k->conns[i].fuse_fd,
				       k->conns[i].session_fd);
	return g_string_free(s, FALSE);
}

gboolean keeper_parse_fds(const char *text, int *fds, guint n)
{
	g_auto(GStrv) words = g_strsplit(text, " ", -1);

	if (g_strv_length(words) != n)
		return FALSE;
	for (guint i = 0; i < n; i++) {
		guint64 v;

		if (!g_ascii_string_to_unsigned(words[i], 10, 3, G_MAXINT, &v,
						NULL) ||
		    fcntl((int)v, F_GETFD) < 0)
			return FALSE;
		fds[i] = (int)v;
	}
	return TRUE;
}

static void store_fd(int fd, const char *name)
{
	g_autofree char *msg = g_strdup_printf("FDSTORE=1\nFDNAME=%s", name);

	sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
}

/* The connections: from the keeper that executed us (an upgrade), from
 * systemd's fd store (a restart of the service), or new mounts. */
static gboolean get_connections(struct keeper *k, GError **error)
{
	const char *handed = g_getenv("POWERFS_KEEPER_FDS");
	g_auto(GStrv) names = NULL;
	int fds[2 * G_N_ELEMENTS(k->conns)];
	int n;

	if (handed) {
		if (!keeper_parse_fds(handed, fds, 2 * k->n_conns)) {
			g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
				    "POWERFS_KEEPER_FDS=%s: not our "
				    "connections",
				    handed);
			return FALSE;
		}
		for (guint i = 0; i < k->n_conns; i++) {
			k->conns[i].fuse_fd = fds[2 * i];
			k->conns[i].session_fd = fds[2 * i + 1];
		}
		g_unsetenv("POWERFS_KEEPER_FDS");
		g_message("%s: taking the connection over from the previous "
			  "keeper",
			  k->cfg->mountpoint);
		k->served = TRUE;
		return TRUE;
	}
	n = sd_listen_fds_with_names(1, &names);
	for (guint i = 0; i < k->n_conns; i++) {
		struct conn *c = &k->conns[i];
		g_autofree char *fuse_name =
			g_strconcat(c->name, "-fuse", NULL);
		g_autofree char *session_name =
			g_strconcat(c->name, "-session", NULL);

		c->fuse_fd = c->session_fd = -1;
		for (int j = 0; j < n; j++) {
			if (!g_strcmp0(names[j], fuse_name))
				c->fuse_fd = SD_LISTEN_FDS_START + j;
			else if (!g_strcmp0(names[j], session_name))
				c->session_fd = SD_LISTEN_FDS_START + j;
		}
		if (c->fuse_fd >= 0 && c->session_fd >= 0) {
			g_message("%s: taking the connection back from the "
				  "service manager",
				  c->mountpoint);
			k->served = TRUE;
			continue;
		}
		c->mount = pf_mount_new(c->mountpoint, k->cfg->mount_options,
					error);
		if (!c->mount)
			return FALSE;
		c->fuse_fd = pf_mount_fd(c->mount);
		c->session_fd = memfd_create("powerfs-session", MFD_CLOEXEC);
		if (c->session_fd < 0) {
			g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED,
				    "memfd_create: %s", g_strerror(errno));
			return FALSE;
		}
		/* Under systemd: the connection outlives the keeper too. */
		store_fd(c->fuse_fd, fuse_name);
		store_fd(c->session_fd, session_name);
	}
	return TRUE;
}

static void disconnect(struct keeper *k)
{
	for (guint i = 0; i < k->n_conns; i++) {
		struct conn *c = &k->conns[i];

		/* Nothing for a later start to take back. */
		sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s-fuse", c->name);
		sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s-session", c->name);

		if (c->mount)
			pf_mount_free(c->mount, TRUE);
		else if (c->fuse_fd >= 0)
			pf_mount_detach(c->mountpoint);
		c->mount = NULL;
	}
}

/* What a server, or the next keeper, needs to know about the mounts: the
 * keeper checked it all, and a look at a live mount with nobody serving it
 * would wait forever. */
static void set_mount_env(const struct keeper *k)
{
	g_setenv("POWERFS_MOUNTPOINT", k->cfg->mountpoint, TRUE);
	if (k->cfg->class_wakeup_dir)
		g_setenv("POWERFS_CLASS_WAKEUP_DIR", k->cfg->class_wakeup_dir,
			 TRUE);
	if (k->cfg->wakeup_reasons_dir)
		g_setenv("POWERFS_WAKEUP_REASONS_DIR",
			 k->cfg->wakeup_reasons_dir, TRUE);
	if (k->cfg->own_state_file)
		g_setenv("POWERFS_KEEPER_STATE_FILE", k->cfg->own_state_file,
			 TRUE);
}

/* The signals a server handles once it can: blocked from its fork on (a
 * blocked signal stays pending through execv). */
static void server_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGUSR1); /* the keeper died */
	sigaddset(set, SIGUSR2); /* hand over (an upgrade) */
	sigaddset(set, SIGHUP);
}

/* Starts a server: FALSE (errno set) if it cannot be. */
static gboolean start_server(struct keeper *k)
{
	g_autofree char *fds = fds_text(k);
	pid_t keeper = getpid();
	int ready[2];
	pid_t pid;

	if (pipe2(ready, O_CLOEXEC) < 0)
		return FALSE;
	/* The keeper's mask blocks the server's signals too (keeper_run()),
	 * so one sent right after fork() waits for the server to handle it. */
	if ((pid = fork()) < 0) {
		int err = errno;

		close(ready[0]);
		close(ready[1]);
		errno = err;
		return FALSE;
	}
	if (pid == 0) {
		g_autofree char *ready_fd = g_strdup_printf("%d", ready[1]);
		sigset_t mask;

		/* If the keeper dies, the server becomes the keeper: it
		 * takes SIGUSR1 once it can handle it (a pending signal
		 * survives execv). */
		server_signals(&mask);
		sigprocmask(SIG_SETMASK, &mask, NULL);
		prctl(PR_SET_PDEATHSIG, SIGUSR1);
		if (getppid() != keeper)
			kill(getpid(), SIGUSR1);
		for (guint i = 0; i < k->n_conns; i++) {
			inherit(k->conns[i].fuse_fd);
			inherit(k->conns[i].session_fd);
		}
		inherit(ready[1]);
		g_setenv("POWERFS_FDS", fds, TRUE);
		g_setenv("POWERFS_READY_FD", ready_fd, TRUE);
		/* What the request it was processing did (inflight.c). */
		if (k->crashed)
			g_setenv("POWERFS_SERVER_CRASHED", "1", TRUE);
		else
			g_unsetenv("POWERFS_SERVER_CRASHED");
		set_mount_env(k);
		g_unsetenv("NOTIFY_SOCKET"); /* the keeper speaks for us */
		/* The image the keeper runs, even if the file was replaced. */
		execv("/proc/self/exe", k->cfg->argv);
		fprintf(stderr, "powerfs: cannot run a server: %s\n",
			g_strerror(errno));
		_exit(127);
	}
	close(ready[1]);
	if (k->ready_fd >= 0)
		close(k->ready_fd);
	k->ready_fd = ready[0];
	k->server = pid;
	k->retry_at = 0;
	k->retry_ms = 0;
	return TRUE;
}

/* Starts a server, or else, on a mount that has served (clients may wait
 * in it), tries again later: FALSE if the keeper must end (*exit_status). */
static gboolean start_or_retry(struct keeper *k, int *exit_status)
{
	if (start_server(k))
		return TRUE;
	g_warning("cannot start a server: %s%s", g_strerror(errno),
		  k->served ? "; trying again, the mount stays" : "");
	if (!k->served) {
		*exit_status = 1;
		return FALSE;
	}
	k->retry_ms = k->retry_ms ? MIN(2 * k->retry_ms, RETRY_MAX_MS) :
				    RETRY_FIRST_MS;
	k->retry_at = g_get_monotonic_time() + k->retry_ms * 1000;
	return TRUE;
}

/* Executes the binary on disk as the new keeper, the connections handed
 * over; returns only if that fails. */
static void upgrade(struct keeper *k)
{
	g_autofree char *fds = fds_text(k);

	g_message("handing the mount over to %s", k->exe);
	for (guint i = 0; i < k->n_conns; i++) {
		inherit(k->conns[i].fuse_fd);
		inherit(k->conns[i].session_fd);
	}
	g_setenv("POWERFS_KEEPER_FDS", fds, TRUE);
	if (k->crashed)
		g_setenv("POWERFS_SERVER_CRASHED", "1", TRUE);
	set_mount_env(k);
	execv(k->exe, k->cfg->argv);
	g_warning("cannot run %s: %s; going on with this one", k->exe,
		  g_strerror(errno));
	g_unsetenv("POWERFS_KEEPER_FDS");
	g_unsetenv("POWERFS_SERVER_CRASHED");
}

/* Too many crashes too close together: the server cannot work here. */
static gboolean crashing(struct keeper *k)
{
	gint64 now = g_get_monotonic_time();

	memmove(k->crashes + 1, k->crashes,
		(CRASHES_MAX - 1) * sizeof(k->crashes[0]));
	k->crashes[0] = now;
	return k->crashes[CRASHES_MAX - 1] &&
	       now - k->crashes[CRASHES_MAX - 1] < CRASH_WINDOW_US;
}

/* An upgrade asked for: the binary on disk becomes the keeper, and starts
 * a server (READY=1 follows).  FALSE if the keeper must end. */
static gboolean upgrade_now(struct keeper *k, int *exit_status)
{
	k->upgrading = FALSE;
	upgrade(k);
	/* Still this binary: READY=1 once the next server serves. */
	k->reloading = TRUE;
	return k->server || start_or_retry(k, exit_status);
}

/* The server ended: go on with another, or end (TRUE, *exit_status). */
static gboolean server_ended(struct keeper *k, int status, int *exit_status)
{
	gboolean handed =
		WIFEXITED(status) && WEXITSTATUS(status) == KEEPER_HANDED_OVER;

	k->server = 0;
	/* SIGKILL comes from outside (an administrator, the OOM killer):
	 * only the server's own crashes can repeat themselves, on a request
	 * the kernel sends again and again. */
	k->crashed = WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL;
	if (k->upgrading && !k->stopping && (handed || WIFSIGNALED(status))) {
		/* Asked for an upgrade, the server is gone, however: the
		 * upgrade goes on. */
		if (!handed)
			g_warning("the server died (%s) during an upgrade: "
				  "upgrading now",
				  strsignal(WTERMSIG(status)));
		return !upgrade_now(k, exit_status);
	}
	if (WIFEXITED(status)) {
		*exit_status = WEXITSTATUS(status);
		return TRUE;
	}
	if (k->stopping && WTERMSIG(status) == SIGTERM) {
		/* Stopped while starting, before it could handle SIGTERM. */
		*exit_status = 0;
		return TRUE;
	}
	/* A new mount whose first server died before serving: nobody uses
	 * it yet, and the cause is likely to stay. */
	if (k->stopping || !k->served || (k->crashed && crashing(k))) {
		g_warning("the server died (%s) %s: giving up",
			  strsignal(WTERMSIG(status)),
			  k->stopping ? "while stopping" :
			  !k->served  ? "before serving" :
					"again and again");
		*exit_status = 1;
		return TRUE;
	}
	g_warning("the server died (%s): starting another; clients wait, "
		  "the mount stays",
		  strsignal(WTERMSIG(status)));
	return !start_or_retry(k, exit_status);
}

static void server_ready(struct keeper *k)
{
	char c;

	if (read(k->ready_fd, &c, 1) != 1)
		c = 1;
	close(k->ready_fd);
	k->ready_fd = -1;
	if (c != 0)
		return;
	k->served = TRUE;
	if (k->ready && !k->reloading)
		return;
	k->reloading = FALSE;
	if (!k->ready && k->cfg->on_ready)
		k->cfg->on_ready();
	k->ready = TRUE;
	sd_notifyf(0, "READY=1\nMAINPID=%d\nSTATUS=serving %s", (int)getpid(),
		   k->cfg->mountpoint);
}

/* SIGHUP, SIGTERM or SIGINT: FALSE if the keeper must end now. */
static gboolean on_signal(struct keeper *k, int sig, int *exit_status)
{
	if (sig == SIGHUP) {
		/* Have the server hand over, then run the binary on disk
		 * (at once if no server runs). */
		if (k->stopping)
			return TRUE;
		k->upgrading = TRUE;
		sd_notify(0, "RELOADING=1");
		if (!k->server)
			return upgrade_now(k, exit_status);
		kill(k->server, SIGUSR2);
		return TRUE;
	}
	k->stopping = TRUE;
	sd_notify(0, "STOPPING=1");
	if (!k->server) {
		*exit_status = 0;
		return FALSE;
	}
	kill(k->server, SIGTERM);
	return TRUE;
}

/* The next signal, or 0 after timeout_ms (-1: none) or when the ready
 * pipe has something.  Without signalfd (it failed), sigtimedwait() in
 * steps of 50 ms, the pipe looked at between them. */
static int next_signal(struct keeper *k, int sfd, const sigset_t *set,
		       int timeout_ms)
{
	struct pollfd fds[] = { { sfd, POLLIN, 0 },
				{ k->ready_fd, POLLIN, 0 } };
	struct signalfd_siginfo si;

	if (sfd < 0) {
		int step = timeout_ms < 0 ? 50 : MIN(timeout_ms, 50);
		struct timespec ts = { 0, step * 1000000L };
		int sig;

		sig = sigtimedwait(set, NULL, &ts);
		/* After: a server that said it serves and then died is
		 * seen to have served. */
		if (poll(&fds[1], 1, 0) > 0)
			server_ready(k);
		return sig > 0 ? sig : 0;
	}
	if (poll(fds, 2, timeout_ms) <= 0)
		return 0;
	if (fds[1].revents)
		server_ready(k);
	if ((fds[0].revents & POLLIN) &&
	    read(sfd, &si, sizeof(si)) == sizeof(si))
		return (int)si.ssi_signo;
	return 0;
}

/* The keeper's loop, in one function so that its steps read in the order
 * of the protocol described at the top of this file (start a server, wait
 * for its verdict and for signals, restart it or hand over, release): it
 * is longer than 80 lines for that reason. */
int keeper_run(const struct keeper_config *cfg)
{
	struct keeper k = { .cfg = cfg, .ready_fd = -1 };
	g_autoptr(GError) error = NULL;
	int exit_status = 0, sfd, status;
	sigset_t set, all;

	k.conns[k.n_conns++] = (struct conn){ .name = "powerfs",
					      .mountpoint = cfg->mountpoint };
	if (cfg->class_wakeup_dir)
		k.conns[k.n_conns++] =
			(struct conn){ .name = "powerfs-cw",
				       .mountpoint = cfg->class_wakeup_dir };
	if (cfg->wakeup_reasons_dir)
		k.conns[k.n_conns++] =
			(struct conn){ .name = "powerfs-wr",
				       .mountpoint = cfg->wakeup_reasons_dir };
	k.exe = g_file_read_link("/proc/self/exe", NULL);
	/* The last server crashed (said by the keeper that executed us). */
	k.crashed = g_getenv("POWERFS_SERVER_CRASHED") != NULL;
	g_unsetenv("POWERFS_SERVER_CRASHED");
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	/* The servers' signals too: blocked in a server from its fork on. */
	server_signals(&all);
	sigorset(&all, &all, &set);
	sigprocmask(SIG_BLOCK, &all, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0)
		g_warning("signalfd: %s; waiting for signals without it",
			  g_strerror(errno));
	if (!get_connections(&k, &error)) {
		g_printerr("powerfs: %s\n", error->message);
		exit_status = 2;
		goto out;
	}
	if (!start_or_retry(&k, &exit_status))
		goto out;
	for (;;) {
		gint64 now = g_get_monotonic_time();
		int timeout =
			k.retry_at ?
				(int)MAX(0, (k.retry_at - now + 999) / 1000) :
				-1;
		int sig = next_signal(&k, sfd, &set, timeout);

		if (k.retry_at && g_get_monotonic_time() >= k.retry_at &&
		    !k.server && !start_or_retry(&k, &exit_status))
			goto out;
		if (!sig)
			continue;
		if (sig != SIGCHLD) {
			if (!on_signal(&k, sig, &exit_status))
				goto out;
			continue;
		}
		while (k.server &&
		       waitpid(k.server, &status, WNOHANG) == k.server)
			if (server_ended(&k, status, &exit_status))
				goto out;
	}
out:
	if (cfg->release)
		cfg->release();
	disconnect(&k);
	if (k.ready)
		g_message("%s: no longer kept (exit status %d)",
			  cfg->mountpoint, exit_status);
	/* However the keeper ends, the mount goes: nothing restores this
	 * file (its name is this keeper's pid). */
	if (cfg->own_state_file) {
		g_autofree char *tmp =
			g_strconcat(cfg->own_state_file, ".tmp", NULL);

		unlink(cfg->own_state_file);
		unlink(tmp);
	}
	if (sfd >= 0)
		close(sfd);
	g_free(k.exe);
	return exit_status;
}
