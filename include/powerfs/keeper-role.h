/* keeper-role.h - the keeper role (keeper-role.c): this process mounts and
 * keeps the connections, and runs the servers as its children
 * (transport/keeper.c does the keeping). */
#ifndef POWERFS_KEEPER_ROLE_H
#define POWERFS_KEEPER_ROLE_H

#include <glib.h>

/* A keeper that finds its mounts live with nobody serving them: restarted
 * by systemd with the connection in its fd store, or a keeper taking over
 * from the previous one (POWERFS_KEEPER_FDS).  FALSE if neither; else
 * keeps them and sets *status. */
gboolean keeper_role_resume(char ***argv, const char *mount_options,
			    int *status);
/* A fresh start, checked: mounts and keeps.  Without --state-file the
 * keeper makes one for its servers, named in *argv (which may move). */
int keeper_role_run(char ***argv, const char *mountpoint,
		    const char *mount_options, const char *class_wakeup_dir,
		    const char *wakeup_reasons_dir);

#endif
