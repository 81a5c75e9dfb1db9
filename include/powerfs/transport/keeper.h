/* keeper.h - the process that holds the FUSE connections while servers
 * come and go (see keeper.c). */
#ifndef POWERFS_KEEPER_H
#define POWERFS_KEEPER_H

#include <glib.h>

/* A server's exit status when it stopped to let a successor take over. */
#define KEEPER_HANDED_OVER 75

struct keeper_config {
	char **argv;		   /* powerfs's command line, for its servers */
	const char *mountpoint;	   /* real path */
	const char *mount_options; /* "-o" syntax, may be NULL */
	const char *class_wakeup_dir;	/* real path, may be NULL */
	const char *wakeup_reasons_dir; /* real path, may be NULL */
	const char *own_state_file; /* made for us: removed at a clean end */
	void (*on_ready)(void);	    /* the first server serves */
	/* Undoes what a server leaves behind that must not outlive all of
	 * them (a frozen container), once none will come any more. */
	void (*release)(void);
};

/* Mounts (or takes the connections back), runs servers until the mount is
 * done with; returns the exit status. */
int keeper_run(const struct keeper_config *cfg);

/* "FUSE SESSION [FUSE SESSION]...": n descriptors that are open. */
gboolean keeper_parse_fds(const char *text, int *fds, guint n);

#endif
