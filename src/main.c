/* main.c - powerfs: the /sys/power wake-lock and autosleep interface, served
 * from user space through FUSE.
 *
 * Parses the command line and checks it.  Without -f it forks first and the
 * parent returns once the mount is live, with the exit status if it failed.
 * Then the same binary plays one of two parts: the keeper (keeper.c),
 * which mounts and holds the connections and runs the server as its child;
 * or, started by the keeper (POWERFS_FDS in its environment), the server,
 * which builds the power core and its backend and serves the connections
 * from the GLib main loop until SIGTERM/SIGINT, an unmount, or SIGUSR2 (hand
 * over to a successor).  With --no-keeper one process does both.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <gio/gio.h>
#include <gio/gunixmounts.h>
#include <glib-unix.h>
#include <systemd/sd-daemon.h>

#include "powerfs/sysfs/class-wakeup.h"
#include "powerfs/sysfs/fs.h"
#include "powerfs/transport/mount.h"
#include "powerfs/transport/loop-lock.h"
#include "powerfs/transport/session.h"
#include "powerfs/transport/keeper.h"
#include "powerfs/records/log.h"
#include "powerfs/records/journal.h"
#include "powerfs/records/metrics.h"
#include "powerfs/transport/loop-hold.h"
#include "powerfs/engine/power.h"
#include "powerfs/records/state-file.h"

#define EXIT_USAGE 2

static struct {
	gboolean foreground;
	gboolean debug;
	gboolean version;
	gchar **mount_options;
	gchar *backend;
	gint simulate_sleep_ms;
	gchar *simulate_states;
	gint wakelock_limit;
	gint wakelock_gc_seconds;
	gboolean no_capability_check;
	gchar **trust_userns_owner;
	gint suspend_timeout;
	gboolean inhibit_sleep;
	gchar *host_power;
	gchar *host_suspend_stats;
	gchar *class_wakeup;
	gchar *wakeup_reasons;
	gchar *state_file;
	gchar *journal;
	gint64 journal_size;
	gchar *metrics_dir;
	gchar *owner;
	gboolean no_keeper;
	gchar **args;
} opt = {
	.suspend_timeout = 30,
	.simulate_sleep_ms = 1000,
	.wakelock_limit = 100,
	.wakelock_gc_seconds = 300,
	.journal_size = JOURNAL_DEFAULT_SIZE,
};

static const GOptionEntry entries[] = {
	{ "foreground", 'f', 0, G_OPTION_ARG_NONE, &opt.foreground,
	  "Stay in the foreground (log to stderr)", NULL },
	{ "debug", 'd', 0, G_OPTION_ARG_NONE, &opt.debug,
	  "Log every request and decision", NULL },
	{ "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &opt.mount_options,
	  "FUSE mount options, e.g. allow_other (repeatable)", "OPTS" },
	{ "backend", 0, 0, G_OPTION_ARG_STRING, &opt.backend,
	  "How to suspend: simulate (default), logind, sysfs:DIR, or "
	  "freeze:CGROUP (a container's own sleep)", "NAME" },
	{ "suspend-timeout", 0, 0, G_OPTION_ARG_INT, &opt.suspend_timeout,
	  "logind: fail a suspend with EBUSY if the sleep has not begun "
	  "after this long (default 30)", "SECONDS" },
	{ "inhibit-sleep", 0, 0, G_OPTION_ARG_NONE, &opt.inhibit_sleep,
	  "logind, freeze: hold a logind block inhibitor while any wakeup "
	  "source is active", NULL },
	{ "host-power", 0, 0, G_OPTION_ARG_FILENAME, &opt.host_power,
	  "logind, freeze: the host kernel's /sys/power, which names the IRQ "
	  "that woke the host (and whose settings logind shows; default "
	  "/sys/power)", "DIR" },
	{ "host-suspend-stats", 0, 0, G_OPTION_ARG_FILENAME,
	  &opt.host_suspend_stats,
	  "logind, freeze: read the host kernel's suspend statistics from DIR "
	  "(default the --host-power directory's suspend_stats)", "DIR" },
	{ "simulate-sleep-ms", 0, 0, G_OPTION_ARG_INT, &opt.simulate_sleep_ms,
	  "Length of a simulated suspend; a wakeup event ends it early "
	  "(default 1000)", "N" },
	{ "simulate-states", 0, 0, G_OPTION_ARG_STRING, &opt.simulate_states,
	  "States the simulated backend offers (default \"freeze mem disk\")",
	  "LIST" },
	{ "wakelock-limit", 0, 0, G_OPTION_ARG_INT, &opt.wakelock_limit,
	  "Maximum number of wake locks, 0 = unlimited (default 100)", "N" },
	{ "wakelock-gc-seconds", 0, 0, G_OPTION_ARG_INT,
	  &opt.wakelock_gc_seconds,
	  "Idle time after which unused wake locks are collected "
	  "(default 300)", "N" },
	{ "no-capability-check", 0, 0, G_OPTION_ARG_NONE,
	  &opt.no_capability_check,
	  "Let any writer the file modes allow use wake_lock and wake_unlock "
	  "(no CAP_BLOCK_SUSPEND needed)", NULL },
	{ "trust-userns-owner", 0, 0, G_OPTION_ARG_STRING_ARRAY,
	  &opt.trust_userns_owner,
	  "Also count CAP_BLOCK_SUSPEND held in user namespaces created by "
	  "host uid UID, e.g. a rootless container runtime's (repeatable)",
	  "UID" },
	{ "class-wakeup", 0, 0, G_OPTION_ARG_FILENAME, &opt.class_wakeup,
	  "Also serve /sys/class/wakeup-style statistics on DIR", "DIR" },
	{ "wakeup-reasons", 0, 0, G_OPTION_ARG_FILENAME, &opt.wakeup_reasons,
	  "Also serve Android's /sys/kernel/wakeup_reasons (why and how long "
	  "the last suspend) on DIR", "DIR" },
	{ "owner", 0, 0, G_OPTION_ARG_STRING, &opt.owner,
	  "Give the files that take writes (state, wakeup_count, autosleep, "
	  "wake_lock, wake_unlock and the settings) to UID:GID at start",
	  "UID:GID" },
	{ "state-file", 0, 0, G_OPTION_ARG_FILENAME, &opt.state_file,
	  "Keep wake locks, settings and statistics in PATH across restarts",
	  "PATH" },
	{ "journal", 0, 0, G_OPTION_ARG_FILENAME, &opt.journal,
	  "Record every lock, release, expiry, handshake, autosleep change "
	  "and suspend attempt in PATH (JSON Lines, for powerfs-report)",
	  "PATH" },
	{ "journal-size", 0, 0, G_OPTION_ARG_INT64, &opt.journal_size,
	  "Rotate the journal to PATH.1 when it reaches BYTES "
	  "(default 8388608)", "BYTES" },
	{ "metrics-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt.metrics_dir,
	  "Write the statistics for Prometheus to DIR/powerfs.prom (for "
	  "node_exporter's textfile collector)", "DIR" },
	{ "no-keeper", 0, 0, G_OPTION_ARG_NONE, &opt.no_keeper,
	  "Serve in the process that mounts (a crash then ends the mount)",
	  NULL },
	{ "version", 0, 0, G_OPTION_ARG_NONE, &opt.version,
	  "Print the version and exit", NULL },
	{ G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &opt.args,
	  NULL, NULL },
	{ NULL }
};

static uid_t owner_uid;
static gid_t owner_gid;
static GArray *trusted_userns_owners;	/* uid_t */

/* Where our verdict on the start goes: without -f, the parent waiting for
 * it; in a server, the keeper.  One byte: 0 (serving) or the exit status. */
static int ready_fd = -1;

static void report_status(guchar status)
{
	if (ready_fd < 0)
		return;
	if (write(ready_fd, &status, 1) != 1)
		perror("powerfs: reporting to the parent");
	close(ready_fd);
	ready_fd = -1;
}

/* One line on stderr, then exit with code (reported to a waiting parent). */
static G_GNUC_PRINTF(2, 3) void fail(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("powerfs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	report_status(code);
	exit(code);
}

#define usage_error(...) fail(EXIT_USAGE, __VA_ARGS__)

static guint parse_states(const char *list)
{
	g_auto(GStrv) words = g_strsplit_set(list, " ,", -1);
	guint states = 0;

	for (guint i = 0; words[i]; i++) {
		enum pm_state s;

		if (!*words[i])
			continue;
		for (s = PM_FREEZE; s < PM_NR_STATES; s++)
			if (!strcmp(words[i], pm_state_label(s)))
				break;
		if (s == PM_NR_STATES)
			usage_error("unknown sleep state \"%s\" in "
				    "--simulate-states", words[i]);
		states |= PM_STATE_BIT(s);
	}
	return states;
}

/* The backend options, checked before anything is mounted; what can only
 * be known by building the backend (logind reachable, DIR readable) is
 * checked by the server, which builds it. */
static void check_backend_options(const char *mountpoint)
{
	const char *name = opt.backend ? opt.backend : "simulate";
	gboolean follows_logind = !strcmp(name, "logind") ||
				  g_str_has_prefix(name, "freeze:");

	if (opt.inhibit_sleep && !follows_logind)
		usage_error("--inhibit-sleep needs --backend=logind or "
			    "--backend=freeze:CGROUP");
	if (opt.host_suspend_stats && !follows_logind)
		usage_error("--host-suspend-stats needs --backend=logind or "
			    "--backend=freeze:CGROUP");
	if (opt.host_power && !follows_logind)
		usage_error("--host-power needs --backend=logind or "
			    "--backend=freeze:CGROUP");
	if (g_str_has_prefix(name, "freeze:")) {
		g_autoptr(GError) error = NULL;

		if (!backend_freeze_check(name + strlen("freeze:"), &error))
			usage_error("--backend=freeze: %s", error->message);
		return;
	}
	if (g_str_has_prefix(name, "sysfs:")) {
		const char *dir = name + strlen("sysfs:");
		g_autofree char *real = realpath(dir, NULL);

		if (!real)
			usage_error("--backend=sysfs: %s: %s", dir,
				    g_strerror(errno));
		if (!strcmp(real, mountpoint))
			usage_error("--backend=sysfs: %s is the mount point "
				    "itself (a loop)", dir);
		return;
	}
	if (!strcmp(name, "simulate"))
		parse_states(opt.simulate_states ? opt.simulate_states :
						   "freeze mem disk");
	else if (!strcmp(name, "sysfs"))
		usage_error("--backend=sysfs needs the directory to write the "
			    "state to: --backend=sysfs:DIR");
	else if (strcmp(name, "logind"))
		usage_error("unknown backend \"%s\" (simulate, logind or "
			    "sysfs:DIR)", name);
}

/* logind, for the backends that follow the host's sleeps through it; NULL
 * and error if it cannot be reached. */
static struct backend *make_logind(struct pf_clock *clock, GError **error)
{
	const char *host = opt.host_power ? opt.host_power : "/sys/power";
	g_autofree char *stats = opt.host_suspend_stats ?
		g_strdup(opt.host_suspend_stats) :
		g_build_filename(host, "suspend_stats", NULL);

	return backend_logind_new(clock, opt.suspend_timeout, host, stats,
				  error);
}

/* --backend=freeze:CGROUP: logind where it runs, to follow the host's
 * sleeps and for --inhibit-sleep, which cannot do without it. */
static struct backend *make_freeze(struct pf_clock *clock, const char *dir)
{
	g_autoptr(GError) error = NULL;
	struct backend *host = make_logind(clock, &error);
	struct backend *be;

	if (!host && opt.inhibit_sleep)
		fail(1, "--inhibit-sleep: %s", error->message);
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
	const char *name = opt.backend ? opt.backend : "simulate";
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
			fail(1, "%s", error->message);
		return be;
	}
	return backend_simulate_new(clock, opt.simulate_sleep_ms,
				    parse_states(opt.simulate_states ?
							 opt.simulate_states :
							 "freeze mem disk"));
}

/* The mount point must be a directory we can mount on.  A dead powerfs
 * leaves its mount answering ENOTCONN: lift it off first.  stat() may still
 * answer from attributes the kernel cached; statfs() always asks the
 * server, so a dead mount cannot hide (and mounts stacked on one another
 * come off one by one). */
/* Is the topmost mount on path a powerfs that answers? */
static gboolean serving_powerfs(const char *path)
{
	GList *mounts = g_unix_mounts_get(NULL);
	const char *type = NULL;
	gboolean powerfs;

	for (GList *l = mounts; l; l = l->next)
		if (!strcmp(g_unix_mount_get_mount_path(l->data), path))
			type = g_unix_mount_get_fs_type(l->data);
	powerfs = !g_strcmp0(type, "fuse.powerfs");
	g_list_free_full(mounts, (GDestroyNotify)g_unix_mount_free);
	return powerfs;
}

static char *check_mountpoint(const char *path)
{
	struct statfs sfs;
	struct stat st;
	char *real;

	for (int i = 0; i < 16 && statfs(path, &sfs) < 0 && errno == ENOTCONN;
	     i++) {
		g_message("%s: removing a stale mount", path);
		if (!pf_mount_detach(path))
			usage_error("%s: stale mount that cannot be removed",
				    path);
	}
	if (stat(path, &st) < 0)
		usage_error("cannot mount on %s: %s", path, g_strerror(errno));
	if (!S_ISDIR(st.st_mode))
		usage_error("cannot mount on %s: %s", path,
			    g_strerror(ENOTDIR));
	real = realpath(path, NULL);
	if (!real)
		usage_error("cannot mount on %s: %s", path, g_strerror(errno));
	/* A second powerfs on top would hide the first one's locks and
	 * leave two daemons; the first must go first. */
	if (serving_powerfs(real))
		usage_error("cannot mount on %s: a powerfs serves it already "
			    "(unmount it first: fusermount3 -u %s)", path,
			    path);
	return real;
}

/* --class-wakeup=DIR, --wakeup-reasons=DIR: mount points like the main
 * one, neither inside nor above it or each other (mounting inside our own
 * mount would wait for ourselves). */
static gboolean path_within(const char *path, const char *dir)
{
	gsize n = strlen(dir);

	return !strncmp(path, dir, n) &&
	       (path[n] == '\0' || path[n] == '/' || dir[n - 1] == '/');
}

static char *check_extra_dir(const char *option, const char *path,
			     const char *mountpoint, const char *other)
{
	char *real = check_mountpoint(path);

	if (path_within(real, mountpoint) || path_within(mountpoint, real))
		usage_error("--%s: cannot mount on %s: it overlaps the mount "
			    "point %s", option, path, mountpoint);
	if (other && (path_within(real, other) || path_within(other, real)))
		usage_error("--%s: cannot mount on %s: it overlaps %s", option,
			    path, other);
	return real;
}

/* --state-file=PATH must be somewhere we can write, outside our own mount
 * (reading or writing it would wait for ourselves), and a regular file if
 * it exists (a FIFO would block the start).  A symbolic link is never read
 * or written through (state-file.c opens with O_NOFOLLOW and replaces it);
 * it is accepted when it leads to a regular file or nowhere. */
static void check_state_file(const char *path, const char *mountpoint)
{
	g_autofree char *dir = g_path_get_dirname(path);
	g_autofree char *real_dir = realpath(dir, NULL);
	struct stat st;

	if (!real_dir)
		usage_error("--state-file: %s: %s", dir, g_strerror(errno));
	if (path_within(real_dir, mountpoint))
		usage_error("--state-file: %s is inside the mount point %s",
			    path, mountpoint);
	if (access(real_dir, W_OK | X_OK) < 0)
		usage_error("--state-file: cannot write in %s: %s", dir,
			    g_strerror(errno));
	if ((lstat(path, &st) == 0 && !S_ISREG(st.st_mode) &&
	     !S_ISLNK(st.st_mode)) ||
	    (stat(path, &st) == 0 && !S_ISREG(st.st_mode)))
		usage_error("--state-file: %s is not a regular file", path);
}

/* --journal=PATH: the same rules as the state file, and no symbolic link
 * (the journal is opened with O_NOFOLLOW).  Opened once here, creating it,
 * so that any other reason it cannot be written stops the start now. */
static void check_journal(const char *path, const char *mountpoint)
{
	g_autofree char *dir = g_path_get_dirname(path);
	g_autofree char *real_dir = realpath(dir, NULL);
	struct stat st;
	int fd;

	if (!real_dir)
		usage_error("--journal: %s: %s", dir, g_strerror(errno));
	if (path_within(real_dir, mountpoint))
		usage_error("--journal: %s is inside the mount point %s",
			    path, mountpoint);
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
		usage_error("--journal: %s is not a regular file", path);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
			O_NOFOLLOW | O_NONBLOCK, 0600);
	if (fd < 0)
		usage_error("--journal: %s: %s", path, g_strerror(errno));
	close(fd);
}

/* A relative --journal becomes absolute in the arguments the keeper
 * starts its servers with: a server started later (after a crash) runs
 * in "/". */
static void absolute_journal(char **argv)
{
	g_autofree char *cwd = NULL;
	char *abs;

	if (g_path_is_absolute(opt.journal))
		return;
	cwd = g_get_current_dir();
	abs = g_build_filename(cwd, opt.journal, NULL);
	for (guint i = 1; argv[i] && strcmp(argv[i], "--"); i++) {
		if (g_str_has_prefix(argv[i], "--journal=")) {
			g_free(argv[i]);
			argv[i] = g_strconcat("--journal=", abs, NULL);
		} else if (!strcmp(argv[i], "--journal") && argv[i + 1]) {
			g_free(argv[++i]);
			argv[i] = g_strdup(abs);
		}
	}
	g_free(opt.journal);
	opt.journal = abs;
}

/* --metrics-dir=DIR must be a directory we can write in, outside our own
 * mount (a write there would wait for ourselves).  Its real path is what
 * the server uses: a daemon works from "/". */
static char *check_metrics_dir(const char *dir, const char *mountpoint)
{
	g_autofree char *real = realpath(dir, NULL);
	struct stat st;

	if (!real || stat(real, &st) < 0)
		usage_error("--metrics-dir: %s: %s", dir, g_strerror(errno));
	if (!S_ISDIR(st.st_mode))
		usage_error("--metrics-dir: %s is not a directory", dir);
	if (path_within(real, mountpoint))
		usage_error("--metrics-dir: %s is inside the mount point %s",
			    dir, mountpoint);
	if (access(real, W_OK | X_OK) < 0)
		usage_error("--metrics-dir: cannot write in %s: %s", dir,
			    g_strerror(errno));
	return g_steal_pointer(&real);
}

/* The server started by the keeper parses the same arguments: give it the
 * real path of --metrics-dir (given as "--metrics-dir=DIR" or
 * "--metrics-dir DIR", before any "--"). */
static void give_real_metrics_dir(char **argv, const char *real)
{
	for (guint i = 1; argv[i] && strcmp(argv[i], "--"); i++) {
		if (g_str_has_prefix(argv[i], "--metrics-dir=")) {
			g_free(argv[i]);
			argv[i] = g_strconcat("--metrics-dir=", real, NULL);
		} else if (!strcmp(argv[i], "--metrics-dir") && argv[i + 1]) {
			g_free(argv[i + 1]);
			argv[i + 1] = g_strdup(real);
			i++;
		}
	}
}

/* --owner=UID:GID, numeric: the ids as the host sees them (a container's
 * root is an ordinary uid on the host). */
static void parse_owner(const char *text, uid_t *uid, gid_t *gid)
{
	g_auto(GStrv) ids = g_strsplit(text, ":", -1);
	guint64 u, g;

	if (g_strv_length(ids) != 2 ||
	    !g_ascii_string_to_unsigned(ids[0], 10, 0, G_MAXUINT32 - 1, &u,
					NULL) ||
	    !g_ascii_string_to_unsigned(ids[1], 10, 0, G_MAXUINT32 - 1, &g,
					NULL))
		usage_error("--owner wants numeric UID:GID, not \"%s\"", text);
	*uid = (uid_t)u;
	*gid = (gid_t)g;
}

/* --trust-userns-owner=UID, numeric, as the host sees it. */
static GArray *parse_trusted_owners(gchar **uids)
{
	GArray *owners = g_array_new(FALSE, FALSE, sizeof(uid_t));

	for (guint i = 0; uids[i]; i++) {
		guint64 u;
		uid_t uid;

		if (!g_ascii_string_to_unsigned(uids[i], 10, 0,
						G_MAXUINT32 - 1, &u, NULL))
			usage_error("--trust-userns-owner wants a numeric "
				    "UID, not \"%s\"", uids[i]);
		uid = (uid_t)u;
		g_array_append_val(owners, uid);
	}
	return owners;
}

/* --help goes through g_print(), which turns the ellipsis of GLib's
 * "[OPTION…]" into "?" in an ASCII locale: print it as three dots. */
static void print_ascii(const char *text)
{
	g_auto(GStrv) parts = g_strsplit(text, "\u2026", -1);
	g_autofree char *joined = g_strjoinv("...", parts);

	fputs(joined, stdout);
}

static void parse_options(int *argc, char ***argv)
{
	g_autoptr(GOptionContext) ctx = g_option_context_new("MOUNTPOINT");
	g_autoptr(GError) error = NULL;

	g_set_print_handler(print_ascii);
	g_option_context_set_summary(ctx,
		"Serve the Linux /sys/power wake-lock and autosleep interface "
		"(wake_lock, wake_unlock,\nwakeup_count, state, autosleep, "
		"wakeup_sources, suspend_stats/) on MOUNTPOINT.");
	g_option_context_set_description(ctx,
		"Unmount with fusermount3 -u MOUNTPOINT or SIGTERM.  "
		"See powerfs(1).");
	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, argc, argv, &error))
		usage_error("%s", error->message);
	if (opt.version) {
		printf("powerfs %s\n", POWERFS_VERSION);
		exit(0);
	}
	if (!opt.args || !opt.args[0])
		usage_error("missing MOUNTPOINT");
	if (opt.args[1])
		usage_error("unexpected argument \"%s\"", opt.args[1]);
	if (opt.simulate_sleep_ms < 0)
		usage_error("--simulate-sleep-ms must be 0 or more");
	if (opt.wakelock_limit < 0)
		usage_error("--wakelock-limit must be 0 or more");
	if (opt.suspend_timeout <= 0)
		usage_error("--suspend-timeout must be 1 or more");
	if (opt.wakelock_gc_seconds < 0)
		usage_error("--wakelock-gc-seconds must be 0 or more");
	if (opt.journal_size < JOURNAL_MIN_SIZE)
		usage_error("--journal-size must be %d or more",
			    JOURNAL_MIN_SIZE);
	if (opt.owner)
		parse_owner(opt.owner, &owner_uid, &owner_gid);
	if (opt.trust_userns_owner) {
		if (opt.no_capability_check)
			usage_error("--trust-userns-owner means nothing with "
				    "--no-capability-check");
		trusted_userns_owners =
			parse_trusted_owners(opt.trust_userns_owner);
	}
}

/* Fork; the parent waits for the child's verdict and exits with it.  This
 * happens before any thread exists (GDBus starts one). */
static void daemonize(void)
{
	int fds[2];
	pid_t pid;
	guchar status = 1;

	if (pipe2(fds, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		perror("powerfs: fork");
		exit(1);
	}
	if (pid > 0) {
		close(fds[1]);
		if (read(fds[0], &status, 1) != 1)
			status = 1;
		_exit(status);
	}
	close(fds[0]);
	setsid();
	ready_fd = fds[1];
}

static void report_ready(void)
{
	int null;

	if (ready_fd < 0)
		return;
	report_status(0);
	if (opt.foreground)
		return;
	if (chdir("/") < 0)
		g_warning("chdir /: %s", g_strerror(errno));
	null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
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

/* The keeper's last word, once no server will come back: a container
 * that its last server left asleep wakes. */
static void release_backend(void)
{
	const char *name = opt.backend ? opt.backend : "";

	if (g_str_has_prefix(name, "freeze:") &&
	    backend_freeze_release(name + strlen("freeze:")))
		g_warning("%s: thawed, as no server will come back",
			  name + strlen("freeze:"));
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
static const struct loop_end handing_over = {
	HANDING_OVER, G_LOG_LEVEL_MESSAGE, "handing over to a successor" };
static const struct loop_end keeping = {
	KEEPING, G_LOG_LEVEL_WARNING,
	"the keeper died: this server becomes the keeper" };

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
	g_warning("SIGHUP ignored: %s", opt.no_keeper ?
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

/* The connections the server serves: from its keeper, or mounted here. */
struct conns {
	int fuse_fd, session_fd, cw_fuse_fd, cw_session_fd;
	int wr_fuse_fd, wr_session_fd;
	struct pf_mount *mount, *cw_mount, *wr_mount;	/* --no-keeper */
};

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
static char **server_argv;

static void become_keeper(void)
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
	execv("/proc/self/exe", server_argv);
	g_critical("cannot become the keeper: %s", g_strerror(errno));
}

static int serve(const char *mountpoint, const char *class_wakeup_dir,
		 const char *wakeup_reasons_dir, struct conns *c)
{
	g_autoptr(GError) error = NULL;
	g_autoptr(GMainLoop) loop = NULL;
	struct pf_class_wakeup *cw = NULL;
	struct pf_fs *wr = NULL;
	struct state_file *sf = NULL;
	struct journal *journal = NULL;
	struct pf_metrics *metrics = NULL;
	struct power_options popts;
	struct pf_clock *clock;
	struct power *pw;
	const struct pf_attr *attrs;
	guint n_attrs;
	struct pf_fs *fs;
	struct pf_owners *owners;
	sigset_t handled;
	int status = 0;

	clock = pf_clock_new_monotonic();
	popts = (struct power_options){
		.wakelock_limit = opt.wakelock_limit,
		.wakelock_gc_seconds = opt.wakelock_gc_seconds,
		.check_capability = !opt.no_capability_check,
		.trusted_userns_owners = trusted_userns_owners,
	};
	pw = power_new(clock, make_backend(clock), &popts);
	if (opt.journal) {
		journal = journal_open(opt.journal, opt.journal_size, pw,
				       &error);
		if (!journal)
			fail(1, "%s", error->message);
		journal_start(journal, pw->backend->ops->name,
			      suspend_valid_states(pw->suspend));
	}
	if (opt.inhibit_sleep)
		pf_events_subscribe(pw->events,
				    PF_EVENT_BIT(PF_EVENT_ACTIVITY),
				    block_sleep_while_active, pw);

	loop = g_main_loop_new(NULL, FALSE);
	pf_loop_lock_init();
	attrs = pf_attrs(&n_attrs);
	owners = pf_owners_new();
	fs = pf_fs_serve(pw, attrs, n_attrs, owners, c->fuse_fd,
			 c->session_fd, mountpoint, opt.debug, quit_on_unmount,
			 loop, &error);
	if (!fs) {
		power_free(pw);
		fail(1, "%s", error->message);
	}
	if (class_wakeup_dir) {
		cw = pf_class_wakeup_serve(pw->engine, c->cw_fuse_fd,
					   c->cw_session_fd, class_wakeup_dir,
					   &error);
		if (!cw) {
			pf_fs_free(fs, FALSE);
			power_free(pw);
			fail(1, "%s", error->message);
		}
	}
	if (wakeup_reasons_dir) {
		attrs = pf_wakeup_reasons_attrs(&n_attrs);
		wr = pf_fs_serve(pw, attrs, n_attrs, NULL, c->wr_fuse_fd,
				 c->wr_session_fd, wakeup_reasons_dir,
				 opt.debug, NULL, NULL, &error);
		if (!wr) {
			pf_class_wakeup_free(cw);
			pf_fs_free(fs, FALSE);
			power_free(pw);
			fail(1, "%s", error->message);
		}
	}
	/* Every session has read it (session.c, pf_session_serve()): not for a keeper
	 * this process may become. */
	g_unsetenv("POWERFS_SERVER_CRASHED");
	/* Before the state file: owners saved by a previous run win. */
	if (opt.owner)
		pf_owners_chown_writable(owners, owner_uid, owner_gid);
	/* Restored before the loop serves the first request. */
	if (opt.state_file) {
		sf = state_file_open(opt.state_file, pw, owners);
		pf_fs_set_before_reply(fs, (wakeup_func)state_file_flush, sf);
	}
	journal_restored(journal);
	/* After the restore: the first file holds the restored numbers. */
	if (opt.metrics_dir)
		metrics = pf_metrics_open(opt.metrics_dir, pw);
	server_loop = loop;
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
	report_ready();
	/* Under systemd (Type=notify) without a keeper, which otherwise
	 * speaks for us: the mount is live now. */
	sd_notifyf(0, "READY=1\nSTATUS=serving %s", mountpoint);
	g_main_loop_run(loop);

	/* Take no request from here on, on either mount: nothing changes
	 * after the state is saved, and no state write starts a suspend. */
	pf_class_wakeup_stop(cw);
	if (wr)
		pf_fs_stop(wr);
	pf_fs_stop(fs);
	if (ending == HANDING_OVER || ending == KEEPING) {
		/* The requests in progress stay unanswered: the kernel sends
		 * them again to the successor, which restores this state. */
		state_file_close(sf);
		journal_stop(journal);
		journal_close(journal);
		/* The successor writes the file again at its start. */
		pf_metrics_close(metrics, FALSE);
		pf_log_flush();
		if (ending == KEEPING)
			become_keeper();
		_exit(KEEPER_HANDED_OVER);
	}
	sd_notify(0, "STOPPING=1");
	/* The attempt in progress ends, the requests waiting on it get
	 * their error, and the state is saved before the mounts go. */
	suspend_abort(pw->suspend);
	state_file_close(sf);
	/* Nothing serves these numbers any more. */
	pf_metrics_close(metrics, TRUE);
	pf_class_wakeup_free(cw);
	pf_fs_free(wr, FALSE);
	pf_fs_free(fs, FALSE);
	pf_owners_free(owners);
	/* Only a dead connection may be looked at: a live one would wait
	 * for us. */
	if (ending == UNMOUNTED)
		status = exit_status_at_the_end(mountpoint);
	pf_mount_free(c->wr_mount, TRUE);
	pf_mount_free(c->cw_mount, TRUE);
	pf_mount_free(c->mount, TRUE);
	journal_stop(journal);
	journal_close(journal);
	power_free(pw);
	g_message("exiting");
	return status;
}

/* Started by a keeper: its connections, and where to say we serve. */
static void take_keepers_connections(struct conns *c)
{
	gboolean cw = g_getenv("POWERFS_CLASS_WAKEUP_DIR") != NULL;
	gboolean wr = g_getenv("POWERFS_WAKEUP_REASONS_DIR") != NULL;
	int fds[6];
	guint n = 2 + 2 * cw + 2 * wr, i = 2;
	guint64 ready;

	if (!keeper_parse_fds(g_getenv("POWERFS_FDS"), fds, n) ||
	    !g_ascii_string_to_unsigned(g_getenv("POWERFS_READY_FD"), 10, 3,
					G_MAXINT, &ready, NULL))
		fail(1, "POWERFS_FDS/POWERFS_READY_FD: not a keeper's");
	/* In the keeper's order: the main mount, then the others given. */
	*c = (struct conns){ fds[0], fds[1], -1, -1, -1, -1, NULL, NULL,
			     NULL };
	if (cw) {
		c->cw_fuse_fd = fds[i++];
		c->cw_session_fd = fds[i++];
	}
	if (wr) {
		c->wr_fuse_fd = fds[i++];
		c->wr_session_fd = fds[i++];
	}
	ready_fd = (int)ready;
}

static void mount_here(struct conns *c, const char *mountpoint,
		       const char *class_wakeup_dir,
		       const char *wakeup_reasons_dir, const char *options)
{
	g_autoptr(GError) error = NULL;

	*c = (struct conns){ -1, -1, -1, -1, -1, -1, NULL, NULL, NULL };
	c->mount = pf_mount_new(mountpoint, options, &error);
	if (!c->mount)
		fail(EXIT_USAGE, "%s", error->message);
	c->fuse_fd = pf_mount_fd(c->mount);
	if (class_wakeup_dir) {
		c->cw_mount = pf_mount_new(class_wakeup_dir, options, &error);
		if (!c->cw_mount) {
			pf_mount_free(c->mount, TRUE);
			fail(EXIT_USAGE, "--class-wakeup: %s", error->message);
		}
		c->cw_fuse_fd = pf_mount_fd(c->cw_mount);
	}
	if (wakeup_reasons_dir) {
		c->wr_mount = pf_mount_new(wakeup_reasons_dir, options,
					   &error);
		if (!c->wr_mount) {
			pf_mount_free(c->cw_mount, TRUE);
			pf_mount_free(c->mount, TRUE);
			fail(EXIT_USAGE, "--wakeup-reasons: %s",
			     error->message);
		}
		c->wr_fuse_fd = pf_mount_fd(c->wr_mount);
	}
}

/* Without --state-file, the keeper keeps the state where its servers find
 * it after a crash: a file of its own, removed at a clean end. */
static char *own_state_file(void)
{
	const char *handed = g_getenv("POWERFS_KEEPER_STATE_FILE");
	g_autofree char *dir = NULL, *tmp = NULL;
	char *path;

	if (handed)
		return g_strdup(handed);
	dir = access("/run", W_OK) == 0 ?
		      g_strdup("/run/powerfs") :
		      g_build_filename(g_get_user_runtime_dir(), "powerfs",
				       NULL);
	if (g_mkdir_with_parents(dir, 0700) < 0)
		fail(1, "%s: %s", dir, g_strerror(errno));
	path = g_strdup_printf("%s/%d.state", dir, (int)getpid());
	/* A file there is a dead keeper's whose pid this one reuses (a
	 * SIGKILL leaves it): its locks are a stranger's, not ours. */
	tmp = g_strconcat(path, ".tmp", NULL);
	unlink(path);
	unlink(tmp);
	return path;
}

/* Under systemd: is the mount's connection in the service's fd store?  The
 * unit must then name the mount point by its real, absolute path. */
static gboolean in_fd_store(const char *mountpoint)
{
	g_auto(GStrv) names = NULL;
	int n = sd_listen_fds_with_names(0, &names);

	for (int i = 0; i < n; i++)
		if (!g_strcmp0(names[i], "powerfs-fuse")) {
			if (!g_path_is_absolute(mountpoint) ||
			    (opt.class_wakeup &&
			     !g_path_is_absolute(opt.class_wakeup)) ||
			    (opt.wakeup_reasons &&
			     !g_path_is_absolute(opt.wakeup_reasons)))
				usage_error("restarted with a connection in "
					    "the fd store: the mount points "
					    "must be absolute paths");
			return TRUE;
		}
	return FALSE;
}

static void keeper_ready(void)
{
	report_ready();
}

/* A keeper starts its server, and a server whose keeper died becomes the
 * keeper, by executing /proc/self/exe, which the kernel names "exe": that
 * is what ps, top, pgrep -x and /proc/PID/comm would show.  Such a process
 * takes back the name the command was started with. */
static void keep_command_name(const char *argv0)
{
	g_autofree char *comm = NULL;
	g_autofree char *name = g_path_get_basename(argv0);

	if (g_file_get_contents("/proc/self/comm", &comm, NULL, NULL) &&
	    !strcmp(g_strchomp(comm), "exe"))
		prctl(PR_SET_NAME, name);
}

int main(int argc, char **argv)
{
	g_auto(GStrv) given = g_strdupv(argv);
	g_autofree char *mountpoint = NULL;
	g_autofree char *mount_options = NULL;
	g_autofree char *class_wakeup_dir = NULL;
	g_autofree char *wakeup_reasons_dir = NULL;
	g_autofree char *state_file = NULL;
	struct keeper_config kc;
	struct conns c;
	int status;

	keep_command_name(argv[0]);
	parse_options(&argc, &argv);
	pf_log_setup(opt.debug, g_getenv("POWERFS_SYSLOG") != NULL);
	if (opt.debug)
		pf_loop_hold_enable();
	mount_options = opt.mount_options ?
				g_strjoinv(",", opt.mount_options) : NULL;
	server_argv = given;
	if (g_getenv("POWERFS_FDS")) {
		/* A server: the keeper checked all this, and a look at our
		 * own mount now would wait for ourselves. */
		take_keepers_connections(&c);
		status = serve(g_getenv("POWERFS_MOUNTPOINT"),
			       g_getenv("POWERFS_CLASS_WAKEUP_DIR"),
			       g_getenv("POWERFS_WAKEUP_REASONS_DIR"), &c);
		goto out;
	}
	if (in_fd_store(opt.args[0])) {
		/* Restarted by systemd, which kept the connection: the mount
		 * is live with nobody serving it, so it is not looked at. */
		mountpoint = g_strdup(opt.args[0]);
		class_wakeup_dir = g_strdup(opt.class_wakeup);
		wakeup_reasons_dir = g_strdup(opt.wakeup_reasons);
		if (opt.state_file)
			check_state_file(opt.state_file, mountpoint);
		if (opt.journal)
			check_journal(opt.journal, mountpoint);
		goto keep;
	}
	if (g_getenv("POWERFS_KEEPER_FDS")) {
		/* A keeper taking over from the previous one (an upgrade, or
		 * its server when it died): the same, checked mounts, and
		 * the same process; the mounts have nobody serving them. */
		mountpoint = g_strdup(g_getenv("POWERFS_MOUNTPOINT"));
		class_wakeup_dir = g_strdup(g_getenv("POWERFS_CLASS_WAKEUP_DIR"));
		wakeup_reasons_dir =
			g_strdup(g_getenv("POWERFS_WAKEUP_REASONS_DIR"));
		state_file = g_strdup(g_getenv("POWERFS_KEEPER_STATE_FILE"));
		goto keep;
	}
	mountpoint = check_mountpoint(opt.args[0]);
	check_backend_options(mountpoint);
	if (opt.class_wakeup)
		class_wakeup_dir = check_extra_dir("class-wakeup",
						   opt.class_wakeup,
						   mountpoint, NULL);
	if (opt.wakeup_reasons)
		wakeup_reasons_dir = check_extra_dir("wakeup-reasons",
						     opt.wakeup_reasons,
						     mountpoint,
						     class_wakeup_dir);
	if (opt.state_file)
		check_state_file(opt.state_file, mountpoint);
	if (opt.journal) {
		check_journal(opt.journal, mountpoint);
		absolute_journal(given);
	}
	if (opt.metrics_dir) {
		g_autofree char *real = check_metrics_dir(opt.metrics_dir,
							  mountpoint);

		give_real_metrics_dir(given, real);
		g_free(opt.metrics_dir);
		opt.metrics_dir = g_steal_pointer(&real);
	}
	if (!opt.foreground) {
		daemonize();
		/* Errors that stop the start still reach the terminal
		 * through fail(); the rest goes where a daemon's logs go. */
		pf_log_setup(opt.debug, TRUE);
		g_setenv("POWERFS_SYSLOG", "1", TRUE);
	}
	if (opt.no_keeper) {
		mount_here(&c, mountpoint, class_wakeup_dir,
			   wakeup_reasons_dir, mount_options);
		status = serve(mountpoint, class_wakeup_dir,
			       wakeup_reasons_dir, &c);
		goto out;
	}
	if (!opt.state_file) {
		g_autofree char *arg = NULL;
		guint n = g_strv_length(given);

		state_file = own_state_file();
		arg = g_strconcat("--state-file=", state_file, NULL);
		/* Before the mount point, which may follow a "--". */
		given = g_renew(char *, given, n + 2);
		memmove(given + 2, given + 1, n * sizeof(char *));
		given[1] = g_steal_pointer(&arg);
	}
keep:
	g_unsetenv("POWERFS_MOUNTPOINT");
	g_unsetenv("POWERFS_CLASS_WAKEUP_DIR");
	g_unsetenv("POWERFS_WAKEUP_REASONS_DIR");
	g_unsetenv("POWERFS_KEEPER_STATE_FILE");
	kc = (struct keeper_config){
		.argv = given,
		.mountpoint = mountpoint,
		.mount_options = mount_options,
		.class_wakeup_dir = class_wakeup_dir,
		.wakeup_reasons_dir = wakeup_reasons_dir,
		.own_state_file = state_file,
		.on_ready = keeper_ready,
		.release = release_backend,
	};
	status = keeper_run(&kc);
	if (status && !opt.foreground)
		report_status(status);
out:
	g_strfreev(opt.mount_options);
	g_strfreev(opt.args);
	g_strfreev(opt.trust_userns_owner);
	if (trusted_userns_owners)
		g_array_unref(trusted_userns_owners);
	g_free(opt.backend);
	g_free(opt.class_wakeup);
	g_free(opt.wakeup_reasons);
	g_free(opt.host_power);
	g_free(opt.host_suspend_stats);
	g_free(opt.simulate_states);
	g_free(opt.state_file);
	g_free(opt.journal);
	g_free(opt.metrics_dir);
	g_free(opt.owner);
	pf_log_flush();
	return status;
}
