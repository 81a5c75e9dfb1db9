/* test-session.c - taking a connection over (src/transport/take-over.c,
 * readers.c and inflight.c), against a fake kernel.
 *
 * The "kernel" is this process: it holds one end of a SOCK_SEQPACKET
 * socket pair, which keeps message boundaries as /dev/fuse does, and the
 * session file (a memfd), as the keeper holds them.  Each server is a child
 * process serving the other end with pf_session_serve() and a main loop,
 * with a handler that reports every WRITE it processes through a pipe and
 * does what the written text says: "ok" answers, "park" never answers,
 * "hang" blocks inside the processing (the test then kills the server
 * there).  A kernel that sends requests again (FUSE_NOTIFY_RESEND, Linux
 * 6.9) is played by sending every unanswered request again, with the
 * resend bit, when a server asks; an older kernel by POWERFS_NO_RESEND in
 * the server's environment (a socket cannot refuse the notice).
 *
 * These are the crash cases a black-box test cannot aim at: a server that
 * dies between reading INIT and saving it, the order of a successor's
 * replays against a new request, a request that a server was processing
 * when it was killed, more requests waiting than a fixed record held.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/fuse.h>
#include <linux/seccomp.h>

#include <glib-unix.h>

#include "powerfs/transport/open-files.h"
#include "powerfs/transport/loop-lock.h"
#include "powerfs/transport/session.h"

#define RESEND_BIT (G_GUINT64_CONSTANT(1) << 63)
#define NOTIFY_RESEND 7
#define DEADLINE_MS 5000

/* --- the server (a child process) ----------------------------------------- */

static int report_fd = -1;
static struct pf_session *session;

static void say(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
	g_autofree char *line = NULL;
	va_list ap;

	va_start(ap, fmt);
	line = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (write(report_fd, line, strlen(line)) < 0)
		_exit(5);
}

static void srv_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	pf_session_init_conn(conn);
}

/* "CMD TAG": reports "write CMD TAG REPLAYING\n". */
static void srv_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		      size_t size, off_t off, struct fuse_file_info *fi)
{
	g_autofree char *text = g_strndup(buf, MIN(size, 64));
	g_auto(GStrv) words = g_strsplit(text, " ", 3);

	(void)ino, (void)off, (void)fi;
	say("write %s %s %d\n", words[0], words[1] ? words[1] : "-",
	    pf_session_replaying(session));
	if (!strcmp(words[0], "park"))
		return; /* never answered */
	if (!strcmp(words[0], "hang"))
		for (;;)
			pause(); /* killed in here */
	fuse_reply_write(req, size);
}

static struct pf_snapshot *srv_adopt(void *userdata, fuse_ino_t ino)
{
	(void)userdata, (void)ino;
	return g_malloc0(sizeof(struct pf_snapshot));
}

static gboolean srv_unmounted(gpointer loop)
{
	g_main_loop_quit(loop);
	return G_SOURCE_REMOVE;
}

/* The first poll of the server's loop sleeps with the loop lock let go, as
 * if the main thread lost the processor there: a reader that waits for the
 * lock gets it then. */
static GPollFunc real_poll;
static gboolean first_poll_done;

static gboolean never(gint fd, GIOCondition cond, gpointer data)
{
	(void)fd, (void)cond, (void)data;
	return G_SOURCE_CONTINUE;
}

static gint slow_first_poll(GPollFD *fds, guint nfds, gint timeout)
{
	if (!first_poll_done) {
		first_poll_done = TRUE;
		timeout = 200;
	}
	return real_poll(fds, nfds, timeout);
}

/* The server dies at its first pwrite(2): in pf_session_save_init(), just after the
 * reader read the INIT request. */
static void die_at_first_pwrite(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pwrite64, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { G_N_ELEMENTS(filter), filter };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		_exit(6);
}

enum server_flags {
	NO_RESEND = 1, /* POWERFS_NO_RESEND: an older kernel */
	CRASHED = 2,   /* the keeper saw the last server crash */
	SLOW_FIRST_POLL = 4,
	DIE_SAVING_INIT = 8,
	SMALL_ADDRESS_SPACE = 16,
};

static G_GNUC_NORETURN void server_main(int fd, int memfd, guint flags)
{
	static struct fuse_lowlevel_ops ops = {
		.init = srv_init,
		.write = srv_write,
	};
	g_autoptr(GError) error = NULL;
	GMainLoop *loop;

	if (flags & NO_RESEND)
		g_setenv("POWERFS_NO_RESEND", "1", TRUE);
	else
		g_unsetenv("POWERFS_NO_RESEND");
	if (flags & CRASHED)
		g_setenv("POWERFS_SERVER_CRASHED", "1", TRUE);
	else
		g_unsetenv("POWERFS_SERVER_CRASHED");
#ifndef __SANITIZE_ADDRESS__
	if (flags & SMALL_ADDRESS_SPACE) {
		struct rlimit rl = { 1u << 30, 1u << 30 };

		setrlimit(RLIMIT_AS, &rl);
	}
#endif
	loop = g_main_loop_new(NULL, FALSE);
	pf_loop_lock_init();
	/* Warnings are expected (an EIO, a dropped record); criticals are
	 * not (the suite's G_DEBUG=fatal-criticals). */
	g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
	if (flags & SLOW_FIRST_POLL) {
		int p[2];

		real_poll = g_main_context_get_poll_func(NULL);
		g_main_context_set_poll_func(NULL, slow_first_poll);
		/* A descriptor watched at high priority: GLib polls even when
		 * a high-priority idle is ready, so the first iteration lets
		 * the lock go before it dispatches anything. */
		if (pipe(p) < 0)
			_exit(7);
		g_unix_fd_add_full(G_PRIORITY_HIGH, p[0], G_IO_IN, never, NULL,
				   NULL);
	}
	if (flags & DIE_SAVING_INIT)
		die_at_first_pwrite();
	session = pf_session_serve(&ops, NULL, fd, memfd, "test", srv_adopt,
				   srv_unmounted, loop, &error);
	if (!session) {
		say("failed %s\n", error->message);
		_exit(3);
	}
	say("serving\n");
	g_main_loop_run(loop);
	_exit(0);
}

/* --- the kernel (this process) -------------------------------------------- */

struct kernel {
	int k, s; /* the kernel's end; the server's (kept) */
	int memfd;
	int reports; /* read end of the servers' reports */
	int report_w;
	int log_fd; /* the servers' stderr */
	pid_t server;
	gboolean resend;     /* plays a kernel that sends again */
	GTree *unanswered;   /* unique (no resend bit) -> GBytes */
	GHashTable *answers; /* unique (no resend bit) -> error + 1 */
	guint64 next_unique;
	GString *said;	   /* reports not consumed yet */
	guint32 max_write; /* from the INIT reply */
	guint notices;	   /* FUSE_NOTIFY_RESEND notices received */
};

static gint cmp_u64(gconstpointer a, gconstpointer b, gpointer data)
{
	guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;

	(void)data;
	return x < y ? -1 : x > y;
}

static struct kernel *kernel_new(gboolean resend)
{
	struct kernel *k = g_new0(struct kernel, 1);
	int sv[2], rp[2];

	g_assert_cmpint(
		socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), ==,
		0);
	g_assert_cmpint(pipe2(rp, O_CLOEXEC), ==, 0);
	k->k = sv[0];
	k->s = sv[1];
	k->reports = rp[0];
	k->report_w = rp[1];
	k->memfd = memfd_create("test-session", MFD_CLOEXEC);
	g_assert_cmpint(k->memfd, >=, 0);
	k->log_fd = memfd_create("test-session-log", MFD_CLOEXEC);
	k->resend = resend;
	k->unanswered = g_tree_new_full(cmp_u64, NULL, g_free,
					(GDestroyNotify)g_bytes_unref);
	k->answers = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
					   NULL);
	k->next_unique = 2;
	k->said = g_string_new(NULL);
	return k;
}

static void dump_log(struct kernel *k)
{
	char buf[8192];
	gssize n = pread(k->log_fd, buf, sizeof(buf) - 1, 0);

	if (n > 0) {
		buf[n] = '\0';
		g_printerr("--- servers' log ---\n%s", buf);
	}
}

static void start_server(struct kernel *k, guint flags)
{
	pid_t pid = fork();

	g_assert_cmpint(pid, >=, 0);
	if (pid == 0) {
		int fd = fcntl(k->s, F_DUPFD, 3);
		int memfd = fcntl(k->memfd, F_DUPFD, 3);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		report_fd = k->report_w;
		dup2(k->log_fd, 1);
		dup2(k->log_fd, 2);
		lseek(2, 0, SEEK_END);
		server_main(fd, memfd, flags);
	}
	k->server = pid;
}

static gboolean next_reply(struct kernel *k, struct fuse_out_header *out,
			   int ms);

/* A report line from the server, or NULL after the deadline; replies and
 * notices that come meanwhile are taken in. */
static char *next_report(struct kernel *k, int ms)
{
	gint64 end = g_get_monotonic_time() + ms * 1000;

	for (;;) {
		char *nl = strchr(k->said->str, '\n');
		struct pollfd p[2] = { { k->reports, POLLIN, 0 },
				       { k->k, POLLIN, 0 } };
		gint64 left = (end - g_get_monotonic_time()) / 1000;
		struct fuse_out_header out;
		char buf[4096];
		gssize n;

		if (nl) {
			char *line = g_strndup(k->said->str, nl - k->said->str);

			g_string_erase(k->said, 0, nl - k->said->str + 1);
			return line;
		}
		if (poll(p, 2, (int)MAX(left, 0)) <= 0)
			return NULL;
		if (p[1].revents)
			next_reply(k, &out, 0);
		if (!p[0].revents)
			continue;
		n = read(k->reports, buf, sizeof(buf));
		g_assert_cmpint(n, >, 0);
		g_string_append_len(k->said, buf, n);
	}
}

static void expect_report(struct kernel *k, const char *want)
{
	g_autofree char *line = next_report(k, DEADLINE_MS);

	if (g_strcmp0(line, want))
		dump_log(k);
	g_assert_cmpstr(line, ==, want);
}

static void no_report(struct kernel *k, int ms)
{
	g_autofree char *line = next_report(k, ms);

	g_assert_cmpstr(line, ==, NULL);
}

static void send_raw(struct kernel *k, const void *req, gsize len)
{
	g_assert_cmpint(send(k->k, req, len, 0), ==, (gssize)len);
}

/* Queues a request with a new id; it is unanswered until a reply comes. */
static guint64 send_request(struct kernel *k, guint32 opcode, const void *arg,
			    gsize arg_len)
{
	gsize len = sizeof(struct fuse_in_header) + arg_len;
	g_autofree unsigned char *req = g_malloc0(len);
	struct fuse_in_header *h = (void *)req;
	guint64 unique = k->next_unique;

	k->next_unique += 2;
	*h = (struct fuse_in_header){ .len = len,
				      .opcode = opcode,
				      .unique = unique,
				      .nodeid = 1,
				      .uid = 0,
				      .gid = 0,
				      .pid = 1 };
	memcpy(req + sizeof(*h), arg, arg_len);
	g_tree_insert(k->unanswered, g_memdup2(&unique, sizeof(unique)),
		      g_bytes_new(req, len));
	send_raw(k, req, len);
	return unique;
}

static guint64 send_write(struct kernel *k, const char *text, gsize pad)
{
	gsize n = strlen(text) + pad;
	g_autofree unsigned char *arg =
		g_malloc0(sizeof(struct fuse_write_in) + n);
	struct fuse_write_in *w = (void *)arg;

	w->size = n;
	memcpy(arg + sizeof(*w), text, strlen(text));
	memset(arg + sizeof(*w) + strlen(text), ' ', pad);
	return send_request(k, FUSE_WRITE, arg, sizeof(*w) + n);
}

static gboolean resend_one(gpointer key, gpointer value, gpointer data)
{
	struct kernel *k = data;
	gsize len = g_bytes_get_size(value);
	g_autofree unsigned char *req =
		g_memdup2(g_bytes_get_data(value, NULL), len);

	(void)key;
	((struct fuse_in_header *)req)->unique |= RESEND_BIT;
	send_raw(k, req, len);
	return FALSE;
}

/* The next reply (or notice) from a server: its header, and for an INIT
 * reply the max_write it negotiated.  FALSE after the deadline. */
static gboolean next_reply(struct kernel *k, struct fuse_out_header *out,
			   int ms)
{
	unsigned char buf[65536];
	struct pollfd p = { k->k, POLLIN, 0 };
	gssize n;

	if (poll(&p, 1, ms) <= 0)
		return FALSE;
	n = recv(k->k, buf, sizeof(buf), 0);
	g_assert_cmpint(n, >=, (gssize)sizeof(*out));
	memcpy(out, buf, sizeof(*out));
	if (!out->unique) {
		/* A notice: resend, the way the kernel does.  (It sends
		 * what the server has read; the tests send nothing between
		 * a server's start and its notice, which it sends before
		 * it reads anything but INIT.) */
		if (out->error == NOTIFY_RESEND) {
			k->notices++;
			if (k->resend)
				g_tree_foreach(k->unanswered, resend_one, k);
		}
		return TRUE;
	}
	if (n >= (gssize)(sizeof(*out) + sizeof(struct fuse_init_out)) &&
	    g_tree_lookup(k->unanswered,
			  &(guint64){ out->unique & ~RESEND_BIT })) {
		GBytes *req = g_tree_lookup(
			k->unanswered, &(guint64){ out->unique & ~RESEND_BIT });
		const struct fuse_in_header *h = g_bytes_get_data(req, NULL);

		if (h->opcode == FUSE_INIT)
			k->max_write =
				((struct fuse_init_out *)(buf + sizeof(*out)))
					->max_write;
	}
	/* The kernel takes the first answer; later ones fail (ENOENT). */
	if (g_tree_remove(k->unanswered,
			  &(guint64){ out->unique & ~RESEND_BIT }))
		g_hash_table_insert(
			k->answers,
			g_memdup2(&(guint64){ out->unique & ~RESEND_BIT },
				  sizeof(guint64)),
			GINT_TO_POINTER(out->error + 1));
	return TRUE;
}

/* Waits for the answer to request unique: its error (0 or -errno). */
static gint32 answer_of(struct kernel *k, guint64 unique)
{
	gint64 end = g_get_monotonic_time() + DEADLINE_MS * 1000;
	struct fuse_out_header out;
	gpointer err;

	while (!(err = g_hash_table_lookup(k->answers, &unique))) {
		if (g_get_monotonic_time() > end) {
			dump_log(k);
			g_error("no answer to request %" G_GUINT64_FORMAT,
				unique);
		}
		next_reply(k, &out, 50);
	}
	return GPOINTER_TO_INT(err) - 1;
}

/* Replies that came meanwhile (notices included) are taken in. */
static void drain_replies(struct kernel *k)
{
	struct fuse_out_header out;

	while (next_reply(k, &out, 0))
		;
}

static gboolean answered(struct kernel *k, guint64 unique)
{
	drain_replies(k);
	return g_hash_table_contains(k->answers, &unique);
}

static guint64 send_init(struct kernel *k)
{
	struct fuse_init_in in = {
		.major = FUSE_KERNEL_VERSION,
		.minor = 38,
		.max_readahead = 65536,
		.flags = FUSE_MAX_PAGES,
	};

	return send_request(k, FUSE_INIT, &in, sizeof(in));
}

/* SIGKILL, as from outside (an administrator, a test). */
static void kill_server(struct kernel *k)
{
	int status;

	kill(k->server, SIGKILL);
	g_assert_cmpint(waitpid(k->server, &status, 0), ==, k->server);
	k->server = 0;
	/* What it said before it died is in k->said, or still in the pipe. */
}

static void stop_server(struct kernel *k)
{
	if (k->server)
		kill_server(k);
}

static void kernel_free(struct kernel *k)
{
	stop_server(k);
	close(k->k);
	close(k->s);
	close(k->memfd);
	close(k->reports);
	close(k->report_w);
	close(k->log_fd);
	g_tree_unref(k->unanswered);
	g_hash_table_unref(k->answers);
	g_string_free(k->said, TRUE);
	g_free(k);
}

/* A connection's first server, serving; INIT answered. */
static struct kernel *connected(gboolean resend, guint flags)
{
	struct kernel *k = kernel_new(resend);
	guint64 init = send_init(k);

	start_server(k, flags);
	expect_report(k, "serving");
	g_assert_cmpint(answer_of(k, init), ==, 0);
	/* The server asks the kernel which path it offers right after
	 * INIT: that notice comes before anything else is sent. */
	if (!(flags & NO_RESEND)) {
		gint64 end = g_get_monotonic_time() + DEADLINE_MS * 1000;
		struct fuse_out_header out;

		while (!k->notices && g_get_monotonic_time() < end)
			next_reply(k, &out, 50);
		g_assert_cmpuint(k->notices, ==, 1);
	}
	return k;
}

/* --- the tests ------------------------------------------------------------ */

/* The first server reads INIT and dies before it saved it: the successor
 * must find INIT and answer it (the kernel never sends it again), then
 * serve. */
static void test_init_read_not_saved(void)
{
	struct kernel *k = kernel_new(FALSE);
	guint64 init = send_init(k), w;
	int status;

	start_server(k, NO_RESEND | DIE_SAVING_INIT);
	g_assert_cmpint(waitpid(k->server, &status, 0), ==, k->server);
	g_assert_true(WIFSIGNALED(status));
	g_assert_cmpint(WTERMSIG(status), ==, SIGSYS);
	k->server = 0;
	g_assert_false(answered(k, init));
	/* It may have said "serving" before its reader read INIT. */
	for (char *line; (line = next_report(k, 0));)
		g_free(line);

	start_server(k, NO_RESEND);
	expect_report(k, "serving");
	g_assert_cmpint(answer_of(k, init), ==, 0);
	w = send_write(k, "ok 1", 0);
	expect_report(k, "write ok 1 0");
	g_assert_cmpint(answer_of(k, w), ==, 0);
	kernel_free(k);
}

/* INIT's reply asks for writes of at most two pages: powerfs takes at most
 * a page of a write, and its read buffers are sized from the page size, not
 * from libfuse's 256 pages. */
static void test_small_max_write(void)
{
	struct kernel *k = connected(FALSE, NO_RESEND);

	g_assert_cmpuint(k->max_write, ==, 2 * sysconf(_SC_PAGESIZE));
	kernel_free(k);
}

/* A successor processes every request it found before a new one, even if
 * its main thread is slow to run its first loop iteration (the new request
 * is already queued when it starts). */
static void test_replays_come_first(void)
{
	struct kernel *k = connected(FALSE, NO_RESEND);
	guint64 left, fresh;

	left = send_write(k, "park 1", 0);
	expect_report(k, "write park 1 0");
	kill_server(k);
	fresh = send_write(k, "ok 2", 0);
	start_server(k, NO_RESEND | SLOW_FIRST_POLL);
	expect_report(k, "serving");
	expect_report(k, "write park 1 1");
	expect_report(k, "write ok 2 0");
	g_assert_cmpint(answer_of(k, fresh), ==, 0);
	g_assert_false(answered(k, left));
	kernel_free(k);
}

/* A request whose processing was cut short by SIGKILL from outside,
 * server after server, is processed again each time: a kill -9 is not the
 * request's fault.  On both paths. */
static void test_kills_are_not_the_requests_fault(gconstpointer data)
{
	gboolean resend = GPOINTER_TO_INT(data);
	guint flags = resend ? 0 : NO_RESEND;
	struct kernel *k = connected(resend, flags);
	guint64 w = send_write(k, "hang 1", 0);

	expect_report(k, "write hang 1 0");
	for (guint i = 0; i < 4; i++) {
		kill_server(k);
		start_server(k, flags);
		expect_report(k, "serving");
		expect_report(k, "write hang 1 1");
	}
	g_assert_false(answered(k, w));
	kernel_free(k);
}

/* A request whose processing crashed three servers in turn is answered
 * EIO by the fourth without being processed again: on both paths (the
 * kernel that sends requests again would otherwise send it to every new
 * server until the keeper gives up). */
static void test_crash_limit(gconstpointer data)
{
	gboolean resend = GPOINTER_TO_INT(data);
	guint flags = resend ? 0 : NO_RESEND;
	struct kernel *k = connected(resend, flags);
	guint64 w = send_write(k, "hang 1", 0), other;

	expect_report(k, "write hang 1 0");
	for (guint i = 0; i < 2; i++) {
		kill_server(k); /* as if it crashed */
		start_server(k, flags | CRASHED);
		expect_report(k, "serving");
		expect_report(k, "write hang 1 1");
	}
	kill_server(k);
	start_server(k, flags | CRASHED);
	expect_report(k, "serving");
	g_assert_cmpint(answer_of(k, w), ==, -EIO);
	other = send_write(k, "ok 2", 0);
	expect_report(k, "write ok 2 0");
	g_assert_cmpint(answer_of(k, other), ==, 0);
	kernel_free(k);
}

/* More requests wait than a fixed record held (1,024), and one is larger
 * than a slot was (a write of almost two pages): a successor on a kernel
 * that cannot send them again processes every one. */
static void test_every_waiting_request_survives(void)
{
	struct kernel *k = connected(FALSE, NO_RESEND);
	const guint n = 1100;
	guint seen = 0;

	for (guint i = 0; i < n; i++) {
		g_autofree char *text = g_strdup_printf("park %u", i);

		send_write(k, text, 0);
		g_free(next_report(k, DEADLINE_MS));
		/* Replies and notices must not fill the socket. */
		if (i % 64 == 0)
			drain_replies(k);
	}
	send_write(k, "park big", 2 * sysconf(_SC_PAGESIZE) - 16);
	expect_report(k, "write park big 0");
	kill_server(k);
	start_server(k, NO_RESEND);
	expect_report(k, "serving");
	for (;;) {
		g_autofree char *line = next_report(k, 2000);

		if (!line)
			break;
		g_assert_true(g_str_has_prefix(line, "write park "));
		g_assert_true(g_str_has_suffix(line, " 1"));
		seen++;
	}
	g_assert_cmpuint(seen, ==, n + 1);
	kernel_free(k);
}

/* On a kernel that sends requests again, a server keeps no copy of them:
 * a successor that then takes the path of older kernels (which it would
 * not, here) finds nothing to process again. */
static void test_no_copies_on_a_resending_kernel(void)
{
	struct kernel *k = connected(TRUE, 0);
	guint64 w = send_write(k, "park 1", 0);

	expect_report(k, "write park 1 0");
	kill_server(k);
	start_server(k, NO_RESEND);
	expect_report(k, "serving");
	no_report(k, 500);
	g_assert_false(answered(k, w));
	kernel_free(k);
}

/* The INIT request's size in the session file is not trusted: a damaged
 * one (4 GiB) makes the take-over fail with a message, not an allocation
 * of that size. */
static void test_damaged_init_record(void)
{
	struct kernel *k = connected(FALSE, NO_RESEND);
	guint32 huge[2] = { 0xfffffff0u, 0xfffffff0u };
	g_autofree char *line = NULL;
	int status;

	kill_server(k);
	g_assert_cmpint(pwrite(k->memfd, huge, sizeof(huge), 0), ==,
			sizeof(huge));
	start_server(k, NO_RESEND | SMALL_ADDRESS_SPACE);
	line = next_report(k, DEADLINE_MS);
	g_assert_cmpint(waitpid(k->server, &status, 0), ==, k->server);
	k->server = 0;
	if (!WIFEXITED(status))
		dump_log(k);
	g_assert_true(WIFEXITED(status));
	g_assert_cmpint(WEXITSTATUS(status), ==, 3);
	g_assert_nonnull(line);
	g_assert_true(g_str_has_prefix(line, "failed "));
	kernel_free(k);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	signal(SIGPIPE, SIG_IGN);
	g_test_add_func("/session/init-read-not-saved",
			test_init_read_not_saved);
	g_test_add_func("/session/small-max-write", test_small_max_write);
	g_test_add_func("/session/replays-come-first", test_replays_come_first);
	g_test_add_data_func("/session/kills-are-not-the-requests-fault/replay",
			     GINT_TO_POINTER(FALSE),
			     test_kills_are_not_the_requests_fault);
	g_test_add_data_func("/session/kills-are-not-the-requests-fault/resend",
			     GINT_TO_POINTER(TRUE),
			     test_kills_are_not_the_requests_fault);
	g_test_add_data_func("/session/crash-limit/replay",
			     GINT_TO_POINTER(FALSE), test_crash_limit);
	g_test_add_data_func("/session/crash-limit/resend",
			     GINT_TO_POINTER(TRUE), test_crash_limit);
	g_test_add_func("/session/every-waiting-request-survives",
			test_every_waiting_request_survives);
	g_test_add_func("/session/no-copies-on-a-resending-kernel",
			test_no_copies_on_a_resending_kernel);
	g_test_add_func("/session/damaged-init-record",
			test_damaged_init_record);
	return g_test_run();
}
