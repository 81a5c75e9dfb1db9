/* main.c - powerfs: the /sys/power wake-lock and autosleep interface, served
 * from user space through FUSE.
 *
 * Only wiring: parses the command line (config.c) and checks it.  Without
 * -f it forks first and the parent returns once the mount is live, with
 * the exit status if it failed (status.c).  Then the same binary plays one
 * of two parts: the keeper (keeper-role.c, transport/keeper.c), which
 * mounts and holds the connections and runs the server as its child; or,
 * started by the keeper (POWERFS_FDS in its environment), the server
 * (server.c), which builds the power core and its backend and serves the
 * connections from the GLib main loop until SIGTERM/SIGINT, an unmount, or
 * SIGUSR2 (hand over to a successor).  With --no-keeper one process does
 * both.
 */
#include <string.h>
#include <sys/prctl.h>
#include <glib.h>

#include "powerfs/config.h"
#include "powerfs/keeper-role.h"
#include "powerfs/records/log.h"
#include "powerfs/server.h"
#include "powerfs/status.h"
#include "powerfs/transport/loop-hold.h"

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

/* A fresh start: checked, then (without -f) in the background, served
 * here (--no-keeper) or kept. */
static int start(char ***argv, const char *mount_options)
{
	g_autofree char *mountpoint = NULL;
	g_autofree char *class_wakeup_dir = NULL;
	g_autofree char *wakeup_reasons_dir = NULL;
	struct server_conns c;

	config_check(*argv, &mountpoint, &class_wakeup_dir,
		     &wakeup_reasons_dir);
	if (!config.foreground) {
		status_daemonize();
		/* Errors that stop the start still reach the terminal
		 * through status_fail(); the rest goes where a daemon's logs
		 * go. */
		pf_log_setup(config.debug, TRUE);
		g_setenv("POWERFS_SYSLOG", "1", TRUE);
	}
	if (!config.no_keeper)
		return keeper_role_run(argv, mountpoint, mount_options,
				       class_wakeup_dir, wakeup_reasons_dir);
	server_mount_here(&c, mountpoint, class_wakeup_dir, wakeup_reasons_dir,
			  mount_options);
	return server_run(mountpoint, class_wakeup_dir, wakeup_reasons_dir, &c,
			  *argv);
}

int main(int argc, char **argv)
{
	g_auto(GStrv) given = g_strdupv(argv);
	g_autofree char *mount_options = NULL;
	struct server_conns c;
	int status;

	keep_command_name(argv[0]);
	config_parse(&argc, &argv);
	pf_log_setup(config.debug, g_getenv("POWERFS_SYSLOG") != NULL);
	if (config.debug)
		pf_loop_hold_enable();
	mount_options = config.mount_options ?
				g_strjoinv(",", config.mount_options) :
				NULL;
	if (g_getenv("POWERFS_FDS")) {
		/* A server: the keeper checked all this, and a look at our
		 * own mount now would wait for ourselves. */
		server_take_keepers_connections(&c);
		status = server_run(g_getenv("POWERFS_MOUNTPOINT"),
				    g_getenv("POWERFS_CLASS_WAKEUP_DIR"),
				    g_getenv("POWERFS_WAKEUP_REASONS_DIR"), &c,
				    given);
	} else if (!keeper_role_resume(&given, mount_options, &status)) {
		status = start(&given, mount_options);
	}
	config_free();
	pf_log_flush();
	return status;
}
