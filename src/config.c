/* config.c - the command line: the options into one struct config, and
 * the checks a start makes before anything is mounted (a mount point we
 * can mount on, files outside our own mount, a backend that exists).
 * What only building the backend can tell (logind reachable, a directory
 * readable) is checked by the server, which builds it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <gio/gunixmounts.h>

#include "powerfs/config.h"
#include "powerfs/engine/suspend.h"
#include "powerfs/records/journal.h"
#include "powerfs/status.h"
#include "powerfs/transport/mount.h"

struct config config = {
	.suspend_timeout = 30,
	.simulate_sleep_ms = 1000,
	.wakelock_limit = 100,
	.wakelock_gc_seconds = 300,
	.journal_size = JOURNAL_DEFAULT_SIZE,
};

static const GOptionEntry entries[] = {
	{ "foreground", 'f', 0, G_OPTION_ARG_NONE, &config.foreground,
	  "Stay in the foreground (log to stderr)", NULL },
	{ "debug", 'd', 0, G_OPTION_ARG_NONE, &config.debug,
	  "Log every request and decision", NULL },
	{ "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &config.mount_options,
	  "FUSE mount options, e.g. allow_other (repeatable)", "OPTS" },
	{ "backend", 0, 0, G_OPTION_ARG_STRING, &config.backend,
	  "How to suspend: simulate (default), logind, sysfs:DIR, or "
	  "freeze:CGROUP (a container's own sleep)",
	  "NAME" },
	{ "suspend-timeout", 0, 0, G_OPTION_ARG_INT, &config.suspend_timeout,
	  "logind: fail a suspend with EBUSY if the sleep has not begun "
	  "after this long (default 30)",
	  "SECONDS" },
	{ "inhibit-sleep", 0, 0, G_OPTION_ARG_NONE, &config.inhibit_sleep,
	  "logind, freeze: hold a logind block inhibitor while any wakeup "
	  "source is active",
	  NULL },
	{ "host-power", 0, 0, G_OPTION_ARG_FILENAME, &config.host_power,
	  "logind, freeze: the host kernel's /sys/power, which names the IRQ "
	  "that woke the host (and whose settings logind shows; default "
	  "/sys/power)",
	  "DIR" },
	{ "host-suspend-stats", 0, 0, G_OPTION_ARG_FILENAME,
	  &config.host_suspend_stats,
	  "logind, freeze: read the host kernel's suspend statistics from DIR "
	  "(default the --host-power directory's suspend_stats)",
	  "DIR" },
	{ "simulate-sleep-ms", 0, 0, G_OPTION_ARG_INT,
	  &config.simulate_sleep_ms,
	  "Length of a simulated suspend; a wakeup event ends it early "
	  "(default 1000)",
	  "N" },
	{ "simulate-states", 0, 0, G_OPTION_ARG_STRING, &config.simulate_states,
	  "States the simulated backend offers (default \"freeze mem disk\")",
	  "LIST" },
	{ "wakelock-limit", 0, 0, G_OPTION_ARG_INT, &config.wakelock_limit,
	  "Maximum number of wake locks, 0 = unlimited (default 100)", "N" },
	{ "wakelock-gc-seconds", 0, 0, G_OPTION_ARG_INT,
	  &config.wakelock_gc_seconds,
	  "Idle time after which unused wake locks are collected "
	  "(default 300)",
	  "N" },
	{ "no-capability-check", 0, 0, G_OPTION_ARG_NONE,
	  &config.no_capability_check,
	  "Let any writer the file modes allow use wake_lock and wake_unlock "
	  "(no CAP_BLOCK_SUSPEND needed)",
	  NULL },
	{ "trust-userns-owner", 0, 0, G_OPTION_ARG_STRING_ARRAY,
	  &config.trust_userns_owner,
	  "Also count CAP_BLOCK_SUSPEND held in user namespaces created by "
	  "host uid UID, e.g. a rootless container runtime's (repeatable)",
	  "UID" },
	{ "class-wakeup", 0, 0, G_OPTION_ARG_FILENAME, &config.class_wakeup,
	  "Also serve /sys/class/wakeup-style statistics on DIR", "DIR" },
	{ "wakeup-reasons", 0, 0, G_OPTION_ARG_FILENAME, &config.wakeup_reasons,
	  "Also serve Android's /sys/kernel/wakeup_reasons (why and how long "
	  "the last suspend) on DIR",
	  "DIR" },
	{ "owner", 0, 0, G_OPTION_ARG_STRING, &config.owner,
	  "Give the files that take writes (state, wakeup_count, autosleep, "
	  "wake_lock, wake_unlock and the settings) to UID:GID at start",
	  "UID:GID" },
	{ "state-file", 0, 0, G_OPTION_ARG_FILENAME, &config.state_file,
	  "Keep wake locks, settings and statistics in PATH across restarts",
	  "PATH" },
	{ "journal", 0, 0, G_OPTION_ARG_FILENAME, &config.journal,
	  "Record every lock, release, expiry, handshake, autosleep change "
	  "and suspend attempt in PATH (JSON Lines, for powerfs-report)",
	  "PATH" },
	{ "journal-size", 0, 0, G_OPTION_ARG_INT64, &config.journal_size,
	  "Rotate the journal to PATH.1 when it reaches BYTES "
	  "(default 8388608)",
	  "BYTES" },
	{ "metrics-dir", 0, 0, G_OPTION_ARG_FILENAME, &config.metrics_dir,
	  "Write the statistics for Prometheus to DIR/powerfs.prom (for "
	  "node_exporter's textfile collector)",
	  "DIR" },
	{ "no-keeper", 0, 0, G_OPTION_ARG_NONE, &config.no_keeper,
	  "Serve in the process that mounts (a crash then ends the mount)",
	  NULL },
	{ "version", 0, 0, G_OPTION_ARG_NONE, &config.version,
	  "Print the version and exit", NULL },
	{ G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &config.args,
	  NULL, NULL },
	{ NULL }
};

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
				    "--simulate-states",
				    words[i]);
		states |= PM_STATE_BIT(s);
	}
	return states;
}

/* The backend options, checked before anything is mounted; what can only
 * be known by building the backend (logind reachable, DIR readable) is
 * checked by the server, which builds it. */
static void check_backend_options(const char *mountpoint)
{
	const char *name = config.backend ? config.backend : "simulate";
	gboolean follows_logind =
		!strcmp(name, "logind") || g_str_has_prefix(name, "freeze:");

	if (config.inhibit_sleep && !follows_logind)
		usage_error("--inhibit-sleep needs --backend=logind or "
			    "--backend=freeze:CGROUP");
	if (config.host_suspend_stats && !follows_logind)
		usage_error("--host-suspend-stats needs --backend=logind or "
			    "--backend=freeze:CGROUP");
	if (config.host_power && !follows_logind)
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
				    "itself (a loop)",
				    dir);
		return;
	}
	if (!strcmp(name, "simulate"))
		config_simulate_states();
	else if (!strcmp(name, "sysfs"))
		usage_error("--backend=sysfs needs the directory to write the "
			    "state to: --backend=sysfs:DIR");
	else if (strcmp(name, "logind"))
		usage_error("unknown backend \"%s\" (simulate, logind or "
			    "sysfs:DIR)",
			    name);
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
			    "(unmount it first: fusermount3 -u %s)",
			    path, path);
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
			    "point %s",
			    option, path, mountpoint);
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
		usage_error("--journal: %s is inside the mount point %s", path,
			    mountpoint);
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
		usage_error("--journal: %s is not a regular file", path);
	fd = open(path,
		  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
			  O_NONBLOCK,
		  0600);
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

	if (g_path_is_absolute(config.journal))
		return;
	cwd = g_get_current_dir();
	abs = g_build_filename(cwd, config.journal, NULL);
	for (guint i = 1; argv[i] && strcmp(argv[i], "--"); i++) {
		if (g_str_has_prefix(argv[i], "--journal=")) {
			g_free(argv[i]);
			argv[i] = g_strconcat("--journal=", abs, NULL);
		} else if (!strcmp(argv[i], "--journal") && argv[i + 1]) {
			g_free(argv[++i]);
			argv[i] = g_strdup(abs);
		}
	}
	g_free(config.journal);
	config.journal = abs;
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

		if (!g_ascii_string_to_unsigned(uids[i], 10, 0, G_MAXUINT32 - 1,
						&u, NULL))
			usage_error("--trust-userns-owner wants a numeric "
				    "UID, not \"%s\"",
				    uids[i]);
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

void config_parse(int *argc, char ***argv)
{
	g_autoptr(GOptionContext) ctx = g_option_context_new("MOUNTPOINT");
	g_autoptr(GError) error = NULL;

	g_set_print_handler(print_ascii);
	g_option_context_set_summary(
		ctx,
		"Serve the Linux /sys/power wake-lock and autosleep interface "
		"(wake_lock, wake_unlock,\nwakeup_count, state, autosleep, "
		"wakeup_sources, suspend_stats/) on MOUNTPOINT.");
	g_option_context_set_description(
		ctx, "Unmount with fusermount3 -u MOUNTPOINT or SIGTERM.  "
		     "See powerfs(1).");
	g_option_context_add_main_entries(ctx, entries, NULL);
	if (!g_option_context_parse(ctx, argc, argv, &error))
		usage_error("%s", error->message);
	if (config.version) {
		printf("powerfs %s\n", POWERFS_VERSION);
		exit(0);
	}
	if (!config.args || !config.args[0])
		usage_error("missing MOUNTPOINT");
	if (config.args[1])
		usage_error("unexpected argument \"%s\"", config.args[1]);
	if (config.simulate_sleep_ms < 0)
		usage_error("--simulate-sleep-ms must be 0 or more");
	if (config.wakelock_limit < 0)
		usage_error("--wakelock-limit must be 0 or more");
	if (config.suspend_timeout <= 0)
		usage_error("--suspend-timeout must be 1 or more");
	if (config.wakelock_gc_seconds < 0)
		usage_error("--wakelock-gc-seconds must be 0 or more");
	if (config.journal_size < JOURNAL_MIN_SIZE)
		usage_error("--journal-size must be %d or more",
			    JOURNAL_MIN_SIZE);
	if (config.owner)
		parse_owner(config.owner, &config.owner_uid, &config.owner_gid);
	if (config.trust_userns_owner) {
		if (config.no_capability_check)
			usage_error("--trust-userns-owner means nothing with "
				    "--no-capability-check");
		config.trusted_userns_owners =
			parse_trusted_owners(config.trust_userns_owner);
	}
}

guint config_simulate_states(void)
{
	return parse_states(config.simulate_states ? config.simulate_states :
						     "freeze mem disk");
}

void config_check(char **argv, char **mountpoint, char **class_wakeup_dir,
		  char **wakeup_reasons_dir)
{
	char *mp = check_mountpoint(config.args[0]);

	*mountpoint = mp;
	check_backend_options(mp);
	*class_wakeup_dir =
		config.class_wakeup ?
			check_extra_dir("class-wakeup", config.class_wakeup, mp,
					NULL) :
			NULL;
	*wakeup_reasons_dir =
		config.wakeup_reasons ?
			check_extra_dir("wakeup-reasons", config.wakeup_reasons,
					mp, *class_wakeup_dir) :
			NULL;
	if (config.state_file)
		check_state_file(config.state_file, mp);
	if (config.journal) {
		check_journal(config.journal, mp);
		absolute_journal(argv);
	}
	if (config.metrics_dir) {
		g_autofree char *real =
			check_metrics_dir(config.metrics_dir, mp);

		give_real_metrics_dir(argv, real);
		g_free(config.metrics_dir);
		config.metrics_dir = g_steal_pointer(&real);
	}
}

void config_check_files(const char *mountpoint)
{
	if (config.state_file)
		check_state_file(config.state_file, mountpoint);
	if (config.journal)
		check_journal(config.journal, mountpoint);
}

void config_free(void)
{
	g_strfreev(config.mount_options);
	g_strfreev(config.args);
	g_strfreev(config.trust_userns_owner);
	if (config.trusted_userns_owners)
		g_array_unref(config.trusted_userns_owners);
	g_free(config.backend);
	g_free(config.class_wakeup);
	g_free(config.wakeup_reasons);
	g_free(config.host_power);
	g_free(config.host_suspend_stats);
	g_free(config.simulate_states);
	g_free(config.state_file);
	g_free(config.journal);
	g_free(config.metrics_dir);
	g_free(config.owner);
}
