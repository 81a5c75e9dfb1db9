/* bench-floor.c - the do-nothing FUSE server scripts/bench compares powerfs
 * with: the cost of the FUSE round trip itself, nothing else.
 *
 * Same libfuse (3.x low-level API), same mount options, same open flags
 * (direct_io, no keep_cache), same init choices and the same attributes
 * and cache timeouts as powerfs, so the kernel sends both the same requests.
 * It serves one request at a time with the plain single-threaded
 * fuse_session_loop() on a blocking /dev/fuse fd, or (--mt) with libfuse's
 * own multithreaded loop, fuse_session_loop_mt(), whose idle workers are
 * already blocked in read(2) when the next request comes: the fastest
 * do-nothing server this libfuse makes, and the floor that counts.
 * --mt-clone adds clone_fd (one cloned /dev/fuse fd per worker).
 * --capget (with any loop) makes each write do the one thing the kernel's
 * contract asks of every server of wake_lock: read the writer's
 * capabilities (capget(2) of the requesting thread), as the kernel checks
 * CAP_BLOCK_SUSPEND at each write (tests/oracle, case d1).  The answer is
 * not used: that floor measures what the check costs, nothing else.
 *
 * Every write returns its length and does nothing.  Reads return "0\n",
 * except wakeup_sources, which returns a canned table of
 * --sources=N rows in powerfs's format (generated once at start), so a read
 * of it costs the transfer and nothing else.
 *
 * --poll drives the session the way powerfs's main loop does instead: the
 * fd set O_NONBLOCK, poll(2) until it is readable, then one
 * fuse_session_receive_buf() + fuse_session_process_buf().  That variant is
 * an information row of the bench: what polling itself costs.
 *
 * Usage: bench-floor [--sources=N] [--poll|--mt|--mt-clone] [--capget] MOUNTPOINT   (foreground;
 * SIGTERM or fusermount3 -u to stop).  Built and run by scripts/bench.
 */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <linux/capability.h>
#include <linux/fuse.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CACHE_SECONDS 3600.0

struct file {
	const char *name;
	mode_t mode;
	off_t size;
};

/* ino = index + 2 (1 is the root) */
static const struct file files[] = {
	{ "state", S_IFREG | 0644, 4096 },
	{ "wakeup_count", S_IFREG | 0644, 4096 },
	{ "autosleep", S_IFREG | 0644, 4096 },
	{ "wake_lock", S_IFREG | 0644, 4096 },
	{ "wake_unlock", S_IFREG | 0644, 4096 },
	{ "wakeup_sources", S_IFREG | 0444, 0 },
};
#define N_FILES (sizeof(files) / sizeof(files[0]))
#define SOURCES_INO (N_FILES + 1)

static struct timespec mounted_at;
static char *sources;
static size_t sources_len;

static void make_sources(unsigned rows)
{
	size_t cap = 256 + (size_t)rows * 160, len = 0;

	sources = malloc(cap);
	if (!sources)
		abort();
	len += snprintf(sources + len, cap - len,
		"name\t\tactive_count\tevent_count\twakeup_count\t"
		"expire_count\tactive_since\ttotal_time\tmax_time\t"
		"last_change\tprevent_suspend_time\n");
	for (unsigned i = 0; i < rows; i++) {
		char name[32];

		snprintf(name, sizeof(name), "bench-%u", i);
		len += snprintf(sources + len, cap - len,
			"%-12s\t%lu\t\t%lu\t\t%lu\t\t%lu\t\t%lld\t\t%lld\t\t"
			"%lld\t\t%lld\t\t%lld\n", name, 1UL, 1UL, 0UL, 0UL,
			123456LL, 123456LL, 123456LL, 1234567890LL, 0LL);
	}
	sources_len = len;
}

static int fill_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else if (ino >= 2 && ino < N_FILES + 2) {
		st->st_mode = files[ino - 2].mode;
		st->st_nlink = 1;
		st->st_size = files[ino - 2].size;
	} else {
		return -1;
	}
	st->st_blksize = 4096;
	st->st_atim = st->st_mtim = st->st_ctim = mounted_at;
	return 0;
}

static void fl_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

static void fl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = {
		.attr_timeout = CACHE_SECONDS,
		.entry_timeout = CACHE_SECONDS,
	};

	if (parent == FUSE_ROOT_ID)
		for (size_t i = 0; i < N_FILES; i++)
			if (!strcmp(files[i].name, name)) {
				e.ino = i + 2;
				fill_stat(e.ino, &e.attr);
				fuse_reply_entry(req, &e);
				return;
			}
	fuse_reply_err(req, ENOENT);
}

static void fl_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (fill_stat(ino, &st) < 0)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &st, CACHE_SECONDS);
}

static void fl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	(void)attr, (void)to_set;
	fl_getattr(req, ino, fi);
}

static void fl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino == FUSE_ROOT_ID) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY && ino == SOURCES_INO) {
		fuse_reply_err(req, EACCES);
		return;
	}
	/* The flags powerfs answers with (libfuse 3.14 has no field for
	 * FOPEN_PARALLEL_DIRECT_WRITES, so the reply is written here too). */
	struct fuse_open_out out = {
		.fh = 1,
		.open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES,
	};

	fuse_reply_buf(req, (const char *)&out, sizeof(out));
}

static void fl_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	(void)ino, (void)fi;
	fuse_reply_err(req, 0);
}

static void fl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	const char *data = "0\n";
	size_t len = 2;

	(void)fi;
	if (ino == SOURCES_INO) {
		data = sources;
		len = sources_len;
	}
	if ((size_t)off >= len)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, data + off,
			       size < len - off ? size : len - off);
}

static int check_capability;

static void fl_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)off, (void)fi;
	if (check_capability) {
		struct __user_cap_header_struct hdr = {
			.version = _LINUX_CAPABILITY_VERSION_3,
			.pid = fuse_req_ctx(req)->pid,
		};
		struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

		syscall(SYS_capget, &hdr, data);
	}
	fuse_reply_write(req, size);
}

static const struct fuse_lowlevel_ops ops = {
	.init = fl_init,
	.lookup = fl_lookup,
	.getattr = fl_getattr,
	.setattr = fl_setattr,
	.open = fl_open,
	.release = fl_release,
	.read = fl_read,
	.write = fl_write,
};

/* One request per readiness, as powerfs's GLib fd watch does. */
static int poll_loop(struct fuse_session *se)
{
	struct fuse_buf buf = { .mem = NULL };
	int fd = fuse_session_fd(se), res = 0;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (!fuse_session_exited(se)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			res = -errno;
			break;
		}
		res = fuse_session_receive_buf(se, &buf);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0)
			break;
		fuse_session_process_buf(se, &buf);
	}
	free(buf.mem);
	fuse_session_reset(se);
	return res < 0 ? res : 0;
}

int main(int argc, char **argv)
{
	char *fuse_argv[] = { argv[0], "-o",
		"default_permissions,fsname=benchfloor,subtype=benchfloor",
		NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
	const char *mountpoint = NULL;
	unsigned rows = 0;
	int use_poll = 0, use_mt = 0, clone_fd = 0;
	struct fuse_session *se;
	int ret;

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--sources=", 10))
			rows = (unsigned)strtoul(argv[i] + 10, NULL, 10);
		else if (!strcmp(argv[i], "--poll"))
			use_poll = 1;
		else if (!strcmp(argv[i], "--mt"))
			use_mt = 1;
		else if (!strcmp(argv[i], "--mt-clone"))
			use_mt = clone_fd = 1;
		else if (!strcmp(argv[i], "--capget"))
			check_capability = 1;
		else
			mountpoint = argv[i];
	}
	if (!mountpoint) {
		fprintf(stderr, "usage: %s [--sources=N] [--poll|--mt|--mt-clone] "
			"[--capget] MOUNTPOINT\n",
			argv[0]);
		return 2;
	}
	clock_gettime(CLOCK_REALTIME, &mounted_at);
	make_sources(rows);
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) != 0 ||
	    fuse_session_mount(se, mountpoint) != 0) {
		fuse_session_destroy(se);
		return 1;
	}
	if (use_mt) {
		/* libfuse's defaults (fuse_main's), clone_fd as asked. */
		struct fuse_loop_config cfg = {
			.clone_fd = clone_fd,
			.max_idle_threads = 10,
		};

		ret = fuse_session_loop_mt(se, &cfg);
	} else {
		ret = use_poll ? poll_loop(se) : fuse_session_loop(se);
	}
	fuse_remove_signal_handlers(se);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	free(sources);
	return ret < 0 ? 1 : 0;
}
