/* server.h - the server role (server.c): builds the power core and its
 * backend and serves the connections from the GLib main loop. */
#ifndef POWERFS_SERVER_H
#define POWERFS_SERVER_H

struct pf_mount;

/* The connections the server serves: from its keeper, or mounted here. */
struct server_conns {
	int fuse_fd, session_fd, cw_fuse_fd, cw_session_fd;
	int wr_fuse_fd, wr_session_fd;
	struct pf_mount *mount, *cw_mount, *wr_mount; /* --no-keeper */
};

/* Started by a keeper: its connections (POWERFS_FDS), and where to say we
 * serve (POWERFS_READY_FD). */
void server_take_keepers_connections(struct server_conns *c);
/* --no-keeper: mounts here (exits on an error). */
void server_mount_here(struct server_conns *c, const char *mountpoint,
		       const char *class_wakeup_dir,
		       const char *wakeup_reasons_dir, const char *options);
/* Serves until SIGTERM/SIGINT, an unmount, or (from a keeper) SIGUSR2, a
 * hand-over, or SIGUSR1, the keeper's death, when this process executes
 * itself as the keeper with argv.  Returns the exit status. */
int server_run(const char *mountpoint, const char *class_wakeup_dir,
	       const char *wakeup_reasons_dir, struct server_conns *c,
	       char **argv);

#endif
