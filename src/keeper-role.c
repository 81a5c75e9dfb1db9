/* keeper-role.c - the keeper role: this process mounts (or takes the
 * connections back) and keeps them while its servers come and go
 * (transport/keeper.c).  Here: what the keeper needs from the command
 * line and the environment, and the state file it keeps for its servers
 * when none was given.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "powerfs/config.h"
#include "powerfs/engine/backend.h"
#include "powerfs/keeper-role.h"
#include "powerfs/status.h"
#include "powerfs/transport/keeper.h"

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
		status_fail(1, "%s: %s", dir, g_strerror(errno));
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
			    (config.class_wakeup &&
			     !g_path_is_absolute(config.class_wakeup)) ||
			    (config.wakeup_reasons &&
			     !g_path_is_absolute(config.wakeup_reasons)))
				usage_error("restarted with a connection in "
					    "the fd store: the mount points "
					    "must be absolute paths");
			return TRUE;
		}
	return FALSE;
}

static void keeper_ready(void)
{
	status_ready(config.foreground);
}

/* The keeper's last word, once no server will come back: a container
 * that its last server left asleep wakes. */
static void release_backend(void)
{
	const char *name = config.backend ? config.backend : "";

	if (g_str_has_prefix(name, "freeze:") &&
	    backend_freeze_release(name + strlen("freeze:")))
		g_warning("%s: thawed, as no server will come back",
			  name + strlen("freeze:"));
}

/* Runs the keeper; its servers get argv. */
static int keep(char **argv, const char *mountpoint, const char *mount_options,
		const char *class_wakeup_dir, const char *wakeup_reasons_dir,
		const char *state_file)
{
	struct keeper_config kc;
	int status;

	g_unsetenv("POWERFS_MOUNTPOINT");
	g_unsetenv("POWERFS_CLASS_WAKEUP_DIR");
	g_unsetenv("POWERFS_WAKEUP_REASONS_DIR");
	g_unsetenv("POWERFS_KEEPER_STATE_FILE");
	kc = (struct keeper_config){
		.argv = argv,
		.mountpoint = mountpoint,
		.mount_options = mount_options,
		.class_wakeup_dir = class_wakeup_dir,
		.wakeup_reasons_dir = wakeup_reasons_dir,
		.own_state_file = state_file,
		.on_ready = keeper_ready,
		.release = release_backend,
	};
	status = keeper_run(&kc);
	if (status && !config.foreground)
		status_report(status);
	return status;
}

gboolean keeper_role_resume(char ***argv, const char *mount_options,
			    int *status)
{
	g_autofree char *state_file = NULL;

	if (in_fd_store(config.args[0])) {
		/* Restarted by systemd, which kept the connection: the mount
		 * is live with nobody serving it, so it is not looked at. */
		config_check_files(config.args[0]);
		*status =
			keep(*argv, config.args[0], mount_options,
			     config.class_wakeup, config.wakeup_reasons, NULL);
		return TRUE;
	}
	if (!g_getenv("POWERFS_KEEPER_FDS"))
		return FALSE;
	/* A keeper taking over from the previous one (an upgrade, or its
	 * server when it died): the same, checked mounts, and the same
	 * process; the mounts have nobody serving them.  keep() clears the
	 * environment these come from. */
	{
		g_autofree char *mountpoint =
			g_strdup(g_getenv("POWERFS_MOUNTPOINT"));
		g_autofree char *cw =
			g_strdup(g_getenv("POWERFS_CLASS_WAKEUP_DIR"));
		g_autofree char *wr =
			g_strdup(g_getenv("POWERFS_WAKEUP_REASONS_DIR"));

		state_file = g_strdup(g_getenv("POWERFS_KEEPER_STATE_FILE"));
		*status = keep(*argv, mountpoint, mount_options, cw, wr,
			       state_file);
	}
	return TRUE;
}

int keeper_role_run(char ***argv, const char *mountpoint,
		    const char *mount_options, const char *class_wakeup_dir,
		    const char *wakeup_reasons_dir)
{
	g_autofree char *state_file = NULL;
	char **given = *argv;

	if (!config.state_file) {
		g_autofree char *arg = NULL;
		guint n = g_strv_length(given);

		state_file = own_state_file();
		arg = g_strconcat("--state-file=", state_file, NULL);
		/* Before the mount point, which may follow a "--". */
		given = g_renew(char *, given, n + 2);
		memmove(given + 2, given + 1, n * sizeof(char *));
		given[1] = g_steal_pointer(&arg);
		*argv = given;
	}
	return keep(given, mountpoint, mount_options, class_wakeup_dir,
		    wakeup_reasons_dir, state_file);
}
