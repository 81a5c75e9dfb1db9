/* pfs: exact-syscall probe for the /sys/power oracle.  Every call is reported
 * strace-style: `write("foo\n", 4) = 4` or `= -1 EINVAL (Invalid argument)`.
 * Arguments are C-escaped (\n \t \r \\ \0 \xHH); output bytes are shown the same way.
 *
 *   pfs w FILE DATA...        open O_WRONLY once, one write() per DATA on that fd
 *   pfs wa FILE DATA...       like w but O_WRONLY|O_APPEND
 *   pfs wn FILE N CH [TAIL]   one write() of N copies of CH (then TAIL appended)
 *   pfs r FILE [OFF [COUNT]]  open O_RDONLY, pread() COUNT (default 65536) bytes at OFF
 *   pfs rs FILE CHUNK         read() repeatedly in CHUNK-byte calls until 0/error
 *   pfs rl FILE WFILE DATA    read 2 bytes of FILE, write DATA to WFILE, read the rest of FILE
 *                             on the same fd, lseek(0), read again
 *   pfs rr FILE               read() twice on one fd without seeking, then lseek 0 + read
 *   pfs ra FILE SECS [restart] read() with alarm(SECS) and a SIGALRM handler
 *                             (SA_RESTART if 'restart'); prints result and elapsed ms
 *   pfs ran FILE SECS         like ra, but the fd is opened O_NONBLOCK
 *   pfs poll FILE [MS]        poll() for POLLIN|POLLPRI|POLLOUT, print revents
 *   pfs rw FILE               open O_RDWR, read(), write the bytes read back on the same fd
 *   pfs ms                    print CLOCK_MONOTONIC in ms
 *   pfs o FILE FLAGS          just open (FLAGS: r, w, rw) and report
 *   pfs as UID GID GROUPS CAPS PROG ARGS...  exec PROG as UID:GID (GROUPS: a,b or -),
 *                             keeping CAPS (cap numbers a,b or -) as ambient capabilities
 *   pfs drop CAPS PROG ARGS...  exec PROG with CAPS (numbers) dropped from every set
 *
 * Added for tests/oracle (read paths, blocking, concurrent writers):
 *   pfs seq FILE FLAGS OP...  open FILE once with FLAGS (r|w|rw, optionally followed by
 *                             ,direct ,nonblock ,append) and run each OP on that fd:
 *       read:N           read() N bytes            pread:N@OFF   pread() N bytes at OFF
 *       readv:A,B,C      readv() into iovecs of A, B, C bytes
 *       sf:N[@OFF]       sendfile() N bytes into a pipe (NULL offset, or &OFF), show what
 *                        the pipe got and the offset afterwards
 *       sff:N[@OFF]      sendfile() N bytes into a fresh tmpfs file ($T/pfs.out, $T
 *                        default /tmp), show what the file got
 *       sp:N[@OFF]       splice() N bytes from the fd into a pipe
 *       cfr:N[@OFF]:PATH copy_file_range() N bytes to PATH (opened O_WRONLY; created,
 *                        truncated and shown afterwards if it is under the scratch
 *                        directory $T, default /tmp)
 *       seek:WHENCE:OFF  lseek(); WHENCE set|cur|end|data|hole; OFF accepts 0x.. and 1<<K
 *       pos              lseek(fd, 0, SEEK_CUR)
 *       fstat            st_size st_blocks st_blksize st_mode
 *       mmap:shared|private:LEN   mmap(PROT_READ), then read the mapped bytes (SIGBUS caught)
 *       wr:DATA          write() DATA on this fd (escapes as for w)
 *       w:PATH:DATA      open PATH O_WRONLY, write DATA, close (e.g. take a lock in between)
 *       sleep:MS         wait MS milliseconds
 *       times            fstat(): which of atime, mtime, ctime moved since the previous
 *                        `times` of this seq (the first one says which of them are equal)
 *       fdlink           readlink("/proc/self/fd/N") of the fd
 *       same:PATH        stat(PATH) against fstat(fd): "same", or the fields that differ
 *                        (ino, dev, mode, nlink, uid, gid, size, atime, mtime, ctime)
 *       sh:CMD           run `sh -c CMD` (another process; sh from PATH) and wait for it
 *       eff:-N, eff:+N   remove capability N from this thread's effective set, or put
 *                        it back (from the permitted set), with capset(2)
 *   pfs blk METHOD FILE [restart|norestart]
 *                             a blocking read of FILE through METHOD (read, pread@OFF,
 *                             sendfile, sendfile@OFF, splice, splice@OFF) of 4096 bytes;
 *                             a SIGUSR1 handler is installed (SA_RESTART with 'restart');
 *                             prints `pid=N` first, then the result, elapsed ms and the
 *                             handler's count. Send it signals from outside.
 *   pfs wt FILE DATA [MS[,restart]|h[,restart]]  one write() of DATA, timed (CLOCK_MONOTONIC
 *                             ms at start and end); with MS, a SIGUSR1 handler (SA_RESTART
 *                             if ',restart') and a timer that sends SIGUSR1 MS ms after the
 *                             start; with h, the handler only (signal it from outside)
 *   pfs rloop FILE N          up to N read() attempts on fresh fds, retrying at once after
 *                             an error; each attempt printed with start/end ms
 *   pfs st FILE...            stat(): size, blocks, blksize, mode, uid, gid
 *   pfs stx FILE...           stat(): nlink, mode, uid, gid, size
 *   pfs inw FILE MS CMD       an inotify watch on FILE (every event), then `sh -c CMD` in
 *                             a child process; once it exited, the events that came within
 *                             MS ms, one line each (IN_OPEN, IN_ACCESS, ...)
 *   pfs cat FILE...           the raw bytes, read with read(2) (busybox cat uses sendfile)
 *   pfs vtproc TTY HOLD_MS    (reference VM only) put the virtual console TTY (/dev/tty1,
 *                             the foreground one) in VT_PROCESS mode: a suspend's console
 *                             switch (pm_prepare_console) then waits until this process
 *                             acknowledges with VT_RELDISP, which it does HOLD_MS ms after
 *                             the release signal. That keeps a state writer inside the
 *                             kernel, holding its locks, BEFORE tasks are frozen. Runs until
 *                             killed; prints one line per event.
 *   pfs tfd CLOCKID MS        (freeze:CGROUP's alarms) a timerfd on clock CLOCKID
 *                             (8 CLOCK_REALTIME_ALARM, 9 CLOCK_BOOTTIME_ALARM, 7
 *                             CLOCK_BOOTTIME) armed MS ms away, and its fdinfo lines
 *                             clockid/ticks/it_value: once armed, once disarmed, armed
 *                             again and expired unread, then after its read()
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/ioctl.h>
#include <linux/vt.h>
#include <sys/inotify.h>
#include <sys/wait.h>

/* pfs as UID GID GROUPS CAPS PROG ARGS...  run PROG as UID/GID with supplementary GROUPS
 *     (comma list, or - for none) keeping CAPS (comma list of cap numbers, or -) as ambient caps.
 * pfs drop CAPS PROG ARGS...  (as root) drop CAPS from bounding/inheritable/permitted/effective, exec. */
static void caps_set(unsigned long long mask_keep_eff, int clear_only, unsigned long long drop)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	syscall(SYS_capget, &h, d);
	for (int i = 0; i < 2; i++) {
		unsigned int keep = (unsigned int)(mask_keep_eff >> (32 * i));
		unsigned int dr = (unsigned int)(drop >> (32 * i));
		if (clear_only) {
			d[i].effective &= ~dr; d[i].permitted &= ~dr; d[i].inheritable &= ~dr;
		} else {
			d[i].effective = keep; d[i].permitted = keep; d[i].inheritable = keep;
		}
	}
	if (syscall(SYS_capset, &h, d)) { perror("capset"); exit(126); }
}
static unsigned long long capmask(const char *s)
{
	unsigned long long m = 0;
	if (!strcmp(s, "-")) return 0;
	char *c = strdup(s), *t;
	for (t = strtok(c, ","); t; t = strtok(NULL, ",")) m |= 1ULL << atoi(t);
	return m;
}
static int do_as(char **argv)
{
	uid_t u = atoi(argv[0]); gid_t g = atoi(argv[1]);
	gid_t gl[64]; int ng = 0;
	if (strcmp(argv[2], "-")) {
		char *c = strdup(argv[2]), *t;
		for (t = strtok(c, ","); t; t = strtok(NULL, ",")) gl[ng++] = atoi(t);
	}
	unsigned long long keep = capmask(argv[3]);
	prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0);
	if (setgroups(ng, gl) || setresgid(g, g, g) || setresuid(u, u, u)) { perror("setid"); return 126; }
	caps_set(keep, 0, 0);
	for (int c = 0; c < 64; c++)
		if (keep & (1ULL << c) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0)) { perror("ambient"); return 126; }
	execvp(argv[4], argv + 4);
	perror("exec");
	return 127;
}
static int do_drop(char **argv)
{
	unsigned long long drop = capmask(argv[0]);
	for (int c = 0; c < 64; c++)
		if (drop & (1ULL << c)) prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
	caps_set(0, 1, drop);
	execvp(argv[1], argv + 1);
	perror("exec");
	return 127;
}

static void show(const char *b, long n)
{
	putchar('"');
	for (long i = 0; i < n; i++) {
		unsigned char c = b[i];
		if (c == '\n') fputs("\\n", stdout);
		else if (c == '\t') fputs("\\t", stdout);
		else if (c == '\r') fputs("\\r", stdout);
		else if (c == '\f') fputs("\\f", stdout);
		else if (c == '\v') fputs("\\v", stdout);
		else if (c == '\\') fputs("\\\\", stdout);
		else if (c == '"') fputs("\\\"", stdout);
		else if (c < 32 || c >= 127) printf("\\x%02x", c);
		else putchar(c);
	}
	putchar('"');
}

static void showtrunc(const char *b, long n)
{
	if (n > 400) {
		show(b, 40);
		printf("...(%ld bytes)...", n);
		show(b + n - 20, 20);
	} else
		show(b, n);
}

static long unesc(const char *s, char *out)
{
	long n = 0;
	while (*s) {
		if (*s != '\\') { out[n++] = *s++; continue; }
		s++;
		switch (*s) {
		case 'n': out[n++] = '\n'; s++; break;
		case 't': out[n++] = '\t'; s++; break;
		case 'r': out[n++] = '\r'; s++; break;
		case 'f': out[n++] = '\f'; s++; break;
		case 'v': out[n++] = '\v'; s++; break;
		case '0': out[n++] = '\0'; s++; break;
		case '\\': out[n++] = '\\'; s++; break;
		case 'x': {
			char h[3] = {s[1], s[2], 0};
			out[n++] = (char)strtol(h, NULL, 16);
			s += 3;
			break;
		}
		default: out[n++] = '\\'; break;
		}
	}
	return n;
}

static void res(long r)
{
	if (r < 0)
		printf(" = -1 %s (%s)\n", strerrorname_np(errno), strerror(errno));
	else
		printf(" = %ld\n", r);
}

static int xopen(const char *f, int fl)
{
	int fd = open(f, fl);
	if (fd < 0) {
		printf("open(%s, %s)", f, (fl & O_ACCMODE) == O_RDONLY ? "O_RDONLY" :
		       (fl & O_ACCMODE) == O_WRONLY ? "O_WRONLY" : "O_RDWR");
		res(-1);
		fflush(stdout);
		exit(1);
	}
	return fd;
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static void on_alrm(int s) { (void)s; }

/* ---- additions for tests/oracle ---- */

static long long parse_off(const char *s)
{
	if (!strncmp(s, "1<<", 3)) return 1LL << atoi(s + 3);
	return strtoll(s, NULL, 0);
}

static void showres_data(long r, const char *b)
{
	if (r >= 0) { printf(" = %ld ", r); showtrunc(b, r); putchar('\n'); }
	else res(r);
}

static long drain_pipe(int rfd, char *b, long cap)
{
	long tot = 0;
	int fl = fcntl(rfd, F_GETFL);
	fcntl(rfd, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		long r = read(rfd, b + tot, cap - tot);
		if (r <= 0) break;
		tot += r;
	}
	fcntl(rfd, F_SETFL, fl);
	return tot;
}

static const char *tmp_out(void)
{
	static char p[4096];
	const char *t = getenv("T");
	snprintf(p, sizeof p, "%s/pfs.out", t ? t : "/tmp");
	return p;
}

static void show_file(const char *path, char *b)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0) { printf("  (cannot open %s)\n", path); return; }
	long n = read(fd, b, 1 << 19);
	close(fd);
	printf("  %s now holds %ld bytes ", path, n);
	showtrunc(b, n > 0 ? n : 0);
	putchar('\n');
}

static sigjmp_buf bus_jmp;
static void on_bus(int s) { siglongjmp(bus_jmp, s); }

/* "N@OFF" -> count and offset (has_off 0 when no @) */
static void parse_cnt_off(const char *a, long *cnt, long long *off, int *has_off)
{
	*cnt = atol(a);
	const char *at = strchr(a, '@');
	*has_off = at != NULL;
	*off = at ? parse_off(at + 1) : 0;
}

static int open_flags(const char *spec)
{
	int fl = 0;
	char *c = strdup(spec), *t;
	for (t = strtok(c, ","); t; t = strtok(NULL, ",")) {
		if (!strcmp(t, "r")) fl |= O_RDONLY;
		else if (!strcmp(t, "w")) fl |= O_WRONLY;
		else if (!strcmp(t, "rw")) fl |= O_RDWR;
		else if (!strcmp(t, "direct")) fl |= O_DIRECT;
		else if (!strcmp(t, "nonblock")) fl |= O_NONBLOCK;
		else if (!strcmp(t, "append")) fl |= O_APPEND;
	}
	free(c);
	return fl;
}

static int ts_eq(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* The fields of two stats that differ, as a list ("same" when none). */
static void stat_diff(const struct stat *a, const struct stat *b)
{
	int n = 0;
#define DIFF(cond, name) do { if (cond) printf("%s%s", n++ ? "," : " differ:", name); } while (0)
	DIFF(a->st_ino != b->st_ino, "ino");
	DIFF(a->st_dev != b->st_dev, "dev");
	DIFF(a->st_mode != b->st_mode, "mode");
	DIFF(a->st_nlink != b->st_nlink, "nlink");
	DIFF(a->st_uid != b->st_uid, "uid");
	DIFF(a->st_gid != b->st_gid, "gid");
	DIFF(a->st_size != b->st_size, "size");
	DIFF(!ts_eq(a->st_atim, b->st_atim), "atime");
	DIFF(!ts_eq(a->st_mtim, b->st_mtim), "mtime");
	DIFF(!ts_eq(a->st_ctim, b->st_ctim), "ctime");
#undef DIFF
	printf("%s\n", n ? "" : " same");
}

static const struct { unsigned mask; const char *name; } in_names[] = {
	{ IN_ACCESS, "IN_ACCESS" }, { IN_MODIFY, "IN_MODIFY" }, { IN_ATTRIB, "IN_ATTRIB" },
	{ IN_CLOSE_WRITE, "IN_CLOSE_WRITE" }, { IN_CLOSE_NOWRITE, "IN_CLOSE_NOWRITE" },
	{ IN_OPEN, "IN_OPEN" }, { IN_MOVE_SELF, "IN_MOVE_SELF" },
	{ IN_DELETE_SELF, "IN_DELETE_SELF" }, { IN_UNMOUNT, "IN_UNMOUNT" },
	{ IN_Q_OVERFLOW, "IN_Q_OVERFLOW" }, { IN_IGNORED, "IN_IGNORED" },
};

static int do_inw(char **argv)
{
	char ev[4096] __attribute__((aligned(8)));
	int in = inotify_init1(IN_CLOEXEC);
	int wd = inotify_add_watch(in, argv[0], IN_ALL_EVENTS);
	printf("inotify_add_watch(%s, IN_ALL_EVENTS)", argv[0]);
	res(wd);
	if (wd < 0) return 1;
	printf("$ sh -c '%s' (another process)\n", argv[2]);
	pid_t pid = fork();
	if (pid == 0) {
		execlp("sh", "sh", "-c", argv[2], (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	for (;;) {
		struct pollfd p = { in, POLLIN, 0 };
		if (poll(&p, 1, atoi(argv[1])) <= 0) break;
		long n = read(in, ev, sizeof(ev));
		for (char *c = ev; n > 0 && c < ev + n;) {
			struct inotify_event *e = (struct inotify_event *)c;
			printf("event");
			for (unsigned k = 0; k < sizeof(in_names) / sizeof(in_names[0]); k++)
				if (e->mask & in_names[k].mask) printf(" %s", in_names[k].name);
			printf(e->len ? " name=%s\n" : "\n", e->name);
			c += sizeof(*e) + e->len;
		}
	}
	printf("# no more events within %s ms\n", argv[1]);
	return 0;
}

static int do_stx(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		struct stat st;
		int r = stat(argv[i], &st);
		printf("stat(%s)", argv[i]);
		if (r < 0) { res(-1); continue; }
		printf(" = 0 st_nlink=%ld st_mode=0%o uid=%d gid=%d st_size=%lld\n", (long)st.st_nlink,
		       st.st_mode, (int)st.st_uid, (int)st.st_gid, (long long)st.st_size);
	}
	return 0;
}

static int do_seq(int argc, char **argv, char *buf, char *data)
{
	const char *f = argv[0];
	int fl = open_flags(argv[1]);
	int fd = open(f, fl);
	struct stat last;
	int have_last = 0;
	printf("open(%s, %s)", f, argv[1]);
	res(fd);
	if (fd < 0) return 1;
	for (int i = 2; i < argc; i++) {
		char *op = argv[i];
		char *arg = strchr(op, ':');
		if (arg) *arg++ = 0; else arg = "";
		long cnt; long long off; int has_off;
		errno = 0;
		if (!strcmp(op, "read")) {
			cnt = atol(arg);
			long r = read(fd, buf, cnt);
			printf("read(%ld)", cnt);
			showres_data(r, buf);
		} else if (!strcmp(op, "pread")) {
			parse_cnt_off(arg, &cnt, &off, &has_off);
			long r = pread(fd, buf, cnt, off);
			printf("pread(%ld@%lld)", cnt, off);
			showres_data(r, buf);
		} else if (!strcmp(op, "readv")) {
			struct iovec iov[16]; int n = 0; long tot = 0;
			char *c = strdup(arg), *t;
			for (t = strtok(c, ","); t && n < 16; t = strtok(NULL, ",")) {
				iov[n].iov_base = buf + tot; iov[n].iov_len = atol(t); tot += atol(t); n++;
			}
			long r = readv(fd, iov, n);
			int e = errno;
			printf("readv(%s)", arg);
			errno = e;
			if (r < 0) { res(r); continue; }
			printf(" = %ld", r);
			long left = r;
			for (int k = 0; k < n; k++) {
				long got = left < (long)iov[k].iov_len ? left : (long)iov[k].iov_len;
				printf(" iov%d=", k); show(iov[k].iov_base, got);
				left -= got;
			}
			putchar('\n');
			free(c);
		} else if (!strcmp(op, "sf") || !strcmp(op, "sff") || !strcmp(op, "sp")) {
			parse_cnt_off(arg, &cnt, &off, &has_off);
			long long off0 = off;
			int p[2] = {-1, -1}, out;
			int tofile = !strcmp(op, "sff");
			if (tofile) {
				out = open(tmp_out(), O_RDWR | O_CREAT | O_TRUNC, 0644);
			} else {
				if (pipe(p)) { perror("pipe"); return 1; }
				out = p[1];
			}
			long r;
			if (op[1] == 'p') {
				loff_t lo = off;
				r = splice(fd, has_off ? &lo : NULL, out, NULL, cnt, 0);
				off = lo;
			} else {
				off_t o = off;
				r = sendfile(out, fd, has_off ? &o : NULL, cnt);
				off = o;
			}
			int e = errno;
			if (has_off)
				printf("%s(%s, fd, &%lld, %ld)", op[1] == 'p' ? "splice" : "sendfile",
				       tofile ? "tmpfs file" : "pipe", off0, cnt);
			else
				printf("%s(%s, fd, NULL, %ld)", op[1] == 'p' ? "splice" : "sendfile",
				       tofile ? "tmpfs file" : "pipe", cnt);
			errno = e;
			res(r);
			if (tofile) {
				close(out);
				show_file(tmp_out(), buf);
			} else {
				long n = drain_pipe(p[0], buf, 1 << 19);
				printf("  pipe got %ld bytes ", n); showtrunc(buf, n); putchar('\n');
				close(p[0]); close(p[1]);
			}
			if (has_off && r >= 0) printf("  offset now %lld\n", off);
		} else if (!strcmp(op, "cfr")) {
			char *path = strchr(arg, ':');
			if (!path) return 2;
			*path++ = 0;
			parse_cnt_off(arg, &cnt, &off, &has_off);
			const char *scratch = getenv("T") ? getenv("T") : "/tmp";
			int tmp = !strncmp(path, scratch, strlen(scratch)) && path[strlen(scratch)] == '/';
			int out = open(path, tmp ? O_WRONLY | O_CREAT | O_TRUNC : O_WRONLY, 0644);
			if (out < 0) { printf("open(%s, O_WRONLY)", path); res(-1); continue; }
			loff_t lo = off;
			long r = syscall(SYS_copy_file_range, fd, has_off ? &lo : NULL, out, NULL, (size_t)cnt, 0);
			int e = errno;
			if (has_off) printf("copy_file_range(fd, &%lld, %s, NULL, %ld, 0)", off, path, cnt);
			else printf("copy_file_range(fd, NULL, %s, NULL, %ld, 0)", path, cnt);
			errno = e;
			res(r);
			close(out);
			if (tmp) show_file(path, buf);
		} else if (!strcmp(op, "seek")) {
			char *o = strchr(arg, ':');
			if (!o) return 2;
			*o++ = 0;
			int wh = !strcmp(arg, "set") ? SEEK_SET : !strcmp(arg, "cur") ? SEEK_CUR :
				 !strcmp(arg, "end") ? SEEK_END : !strcmp(arg, "data") ? SEEK_DATA : SEEK_HOLE;
			long long v = parse_off(o);
			long long r = lseek(fd, v, wh);
			printf("lseek(%lld, SEEK_%s)", v, !strcmp(arg, "set") ? "SET" : !strcmp(arg, "cur") ? "CUR" :
			       !strcmp(arg, "end") ? "END" : !strcmp(arg, "data") ? "DATA" : "HOLE");
			if (r < 0) res(-1); else printf(" = %lld\n", r);
		} else if (!strcmp(op, "pos")) {
			long long r = lseek(fd, 0, SEEK_CUR);
			printf("lseek(0, SEEK_CUR)");
			if (r < 0) res(-1); else printf(" = %lld\n", r);
		} else if (!strcmp(op, "times")) {
			struct stat st;
			int r = fstat(fd, &st);
			printf("fstat() times");
			if (r < 0) { res(-1); continue; }
			if (!have_last) {
				printf(": the first, atime %s mtime, mtime %s ctime\n",
				       ts_eq(st.st_atim, st.st_mtim) ? "==" : "!=",
				       ts_eq(st.st_mtim, st.st_ctim) ? "==" : "!=");
			} else {
				printf(": atime %s, mtime %s, ctime %s\n",
				       ts_eq(st.st_atim, last.st_atim) ? "same" : "moved",
				       ts_eq(st.st_mtim, last.st_mtim) ? "same" : "moved",
				       ts_eq(st.st_ctim, last.st_ctim) ? "same" : "moved");
			}
			last = st;
			have_last = 1;
		} else if (!strcmp(op, "fdlink")) {
			char path[64], link[4096];
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			long r = readlink(path, link, sizeof(link) - 1);
			printf("readlink(/proc/self/fd/N)");
			if (r < 0) { res(-1); continue; }
			link[r] = 0;
			printf(" = \"%s\"\n", link);
		} else if (!strcmp(op, "same")) {
			struct stat a, b;
			int r = stat(arg, &a);
			printf("stat(%s) against fstat()", arg);
			if (r < 0 || fstat(fd, &b) < 0) { res(-1); continue; }
			stat_diff(&a, &b);
		} else if (!strcmp(op, "sh")) {
			printf("$ sh -c '%s' (another process)\n", arg);
			pid_t pid = fork();
			if (pid == 0) {
				execlp("sh", "sh", "-c", arg, (char *)NULL);
				_exit(127);
			}
			int r;
			waitpid(pid, &r, 0);
			printf("rc=%d\n", WIFEXITED(r) ? WEXITSTATUS(r) : -1);
		} else if (!strcmp(op, "fstat")) {
			struct stat st;
			int r = fstat(fd, &st);
			printf("fstat()");
			if (r < 0) { res(-1); continue; }
			printf(" = 0 st_size=%lld st_blocks=%lld st_blksize=%ld st_mode=0%o\n",
			       (long long)st.st_size, (long long)st.st_blocks, (long)st.st_blksize, st.st_mode);
		} else if (!strcmp(op, "mmap")) {
			char *l = strchr(arg, ':');
			long len = l ? atol(l + 1) : 4096;
			if (l) *l = 0;
			int shared = !strcmp(arg, "shared");
			char *m = mmap(NULL, len, PROT_READ, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
			int e = errno;
			printf("mmap(%ld, PROT_READ, %s)", len, shared ? "MAP_SHARED" : "MAP_PRIVATE");
			errno = e;
			if (m == MAP_FAILED) { res(-1); continue; }
			printf(" = ok\n");
			signal(SIGBUS, on_bus);
			signal(SIGSEGV, on_bus);
			volatile long k = 0;
			int s = sigsetjmp(bus_jmp, 1);
			if (s) {
				printf("  touching byte %ld: signal %d (%s)\n", (long)k, s, strsignal(s));
			} else {
				for (k = 0; k < len; k++) buf[k] = m[k];
				long n = len;
				while (n > 0 && buf[n - 1] == 0) n--;
				printf("  mapped %ld bytes, %ld before the trailing NULs: ", len, n);
				showtrunc(buf, n); putchar('\n');
			}
			signal(SIGBUS, SIG_DFL); signal(SIGSEGV, SIG_DFL);
			munmap(m, len);
		} else if (!strcmp(op, "wr")) {
			long n = unesc(arg, data);
			long r = write(fd, data, n);
			printf("write("); show(data, n); printf(", %ld)", n);
			res(r);
		} else if (!strcmp(op, "w")) {
			char *d = strchr(arg, ':');
			if (!d) return 2;
			*d++ = 0;
			long n = unesc(d, data);
			int wfd = open(arg, O_WRONLY);
			if (wfd < 0) { printf("open(%s, O_WRONLY)", arg); res(-1); continue; }
			long r = write(wfd, data, n);
			printf("write(%s, ", arg); show(data, n); printf(", %ld)", n);
			res(r);
			close(wfd);
		} else if (!strcmp(op, "eff")) {
			struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
			struct __user_cap_data_struct d[2];
			int c = atoi(arg + 1);
			syscall(SYS_capget, &h, d);
			if (arg[0] == '-')
				d[c / 32].effective &= ~(1u << (c % 32));
			else
				d[c / 32].effective |= 1u << (c % 32);
			printf("capset(effective %c%d)", arg[0], c);
			res(syscall(SYS_capset, &h, d));
		} else if (!strcmp(op, "sleep")) {
			usleep(atol(arg) * 1000);
			printf("slept %s ms\n", arg);
		} else {
			printf("unknown op %s\n", op);
			return 2;
		}
	}
	close(fd);
	return 0;
}

static volatile sig_atomic_t nsig;
static volatile long sig_ms;
static void on_usr1(int s)
{
	(void)s;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	sig_ms = t.tv_sec * 1000L + t.tv_nsec / 1000000L;
	nsig++;
}

static int do_blk(int argc, char **argv, char *buf)
{
	const char *method = argv[0], *f = argv[1];
	int restart = argc > 2 && !strcmp(argv[2], "restart");
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(SIGUSR1, &sa, NULL);
	int fd = open(f, O_RDONLY);
	if (fd < 0) { printf("open(%s)", f); res(-1); return 1; }
	int p[2];
	if (pipe(p)) return 1;
	printf("pid=%d %s(%s)%s start_ms=%ld\n", getpid(), method, f, restart ? " SA_RESTART" : "", now_ms());
	const char *at = strchr(method, '@');
	long long off = at ? parse_off(at + 1) : 0;
	off_t o = off;
	loff_t lo = off;
	long t0 = now_ms(), r;
	if (!strncmp(method, "pread", 5)) r = pread(fd, buf, 4096, off);
	else if (!strcmp(method, "read")) r = read(fd, buf, 4096);
	else if (!strncmp(method, "sendfile", 8)) r = sendfile(p[1], fd, at ? &o : NULL, 4096);
	else r = splice(fd, at ? &lo : NULL, p[1], NULL, 4096, 0);
	int e = errno;
	long t1 = now_ms();
	if (strncmp(method, "read", 4) && strncmp(method, "pread", 5) && r > 0) r = read(p[0], buf, r);
	printf("pid=%d %s", getpid(), method);
	errno = e;
	showres_data(r, buf);
	printf("pid=%d elapsed_ms=%ld end_ms=%ld handler_calls=%d", getpid(), t1 - t0, t1, (int)nsig);
	if (nsig) printf(" handler_at_ms=%ld", (long)sig_ms);
	putchar('\n');
	return 0;
}

static int do_wt(int argc, char **argv, char *data)
{
	const char *f = argv[0];
	long n = unesc(argv[1], data);
	timer_t tm;
	int handler = argc > 2;
	int timed = handler && argv[2][0] != 'h';
	int restart = handler && strstr(argv[2], "restart");
	if (handler) {
		struct sigaction sa = {0};
		sa.sa_handler = on_usr1;
		sa.sa_flags = restart ? SA_RESTART : 0;
		sigaction(SIGUSR1, &sa, NULL);
	}
	int fd = open(f, O_WRONLY);
	if (fd < 0) { printf("open(%s, O_WRONLY)", f); res(-1); return 1; }
	long t0 = now_ms();
	if (timed) {
		struct sigevent sev = {0};
		sev.sigev_notify = SIGEV_SIGNAL;
		sev.sigev_signo = SIGUSR1;
		timer_create(CLOCK_MONOTONIC, &sev, &tm);
		long ms = atol(argv[2]);
		struct itimerspec its = {{0, 0}, {ms / 1000, (ms % 1000) * 1000000L}};
		timer_settime(tm, 0, &its, NULL);
	}
	long r = write(fd, data, n);
	int e = errno;
	long t1 = now_ms();
	printf("pid=%d write(%s, ", getpid(), f); show(data, n); printf(", %ld)", n);
	errno = e;
	res(r);
	printf("pid=%d start_ms=%ld end_ms=%ld elapsed_ms=%ld", getpid(), t0, t1, t1 - t0);
	if (timed) printf(" timer=%sms%s handler_calls=%d", argv[2], restart ? "" : ",no SA_RESTART", (int)nsig);
	else if (handler) printf(" SIGUSR1 handler%s, handler_calls=%d", restart ? " SA_RESTART" : " no SA_RESTART", (int)nsig);
	if (nsig) printf(" handler_at_ms=%ld", (long)sig_ms);
	putchar('\n');
	close(fd);
	return r < 0;
}

static int do_rloop(int argc, char **argv, char *buf)
{
	const char *f = argv[0];
	int n = argc > 1 ? atoi(argv[1]) : 5;
	for (int i = 1; i <= n; i++) {
		int fd = open(f, O_RDONLY);
		long t0 = now_ms();
		long r = read(fd, buf, 4096);
		int e = errno;
		long t1 = now_ms();
		close(fd);
		printf("pid=%d attempt %d start_ms=%ld end_ms=%ld read", getpid(), i, t0, t1);
		errno = e;
		showres_data(r, buf);
		if (r >= 0) return 0;
	}
	return 1;
}

static int do_st(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		struct stat st;
		int r = stat(argv[i], &st);
		printf("stat(%s)", argv[i]);
		if (r < 0) { res(-1); continue; }
		printf(" = 0 st_size=%lld st_blocks=%lld st_blksize=%ld st_mode=0%o uid=%d gid=%d\n",
		       (long long)st.st_size, (long long)st.st_blocks, (long)st.st_blksize, st.st_mode,
		       (int)st.st_uid, (int)st.st_gid);
	}
	return 0;
}

static volatile sig_atomic_t vt_rel, vt_acq;
static void on_vtrel(int s) { (void)s; vt_rel++; }
static void on_vtacq(int s) { (void)s; vt_acq++; }

static int do_vtproc(char **argv)
{
	int hold = atoi(argv[1]);
	struct sigaction sa = {0};
	sa.sa_handler = on_vtrel;
	sigaction(SIGUSR2, &sa, NULL);
	sa.sa_handler = on_vtacq;
	sigaction(SIGRTMIN, &sa, NULL);
	int fd = open(argv[0], O_RDWR);
	if (fd < 0) { printf("vtproc: open(%s)", argv[0]); res(-1); return 1; }
	struct vt_mode m = {0};
	m.mode = VT_PROCESS;
	m.relsig = SIGUSR2;
	m.acqsig = SIGRTMIN;
	if (ioctl(fd, VT_SETMODE, &m)) { printf("vtproc: VT_SETMODE"); res(-1); return 1; }
	printf("vtproc pid=%d: %s in VT_PROCESS mode, hold %d ms, at ms=%ld\n", getpid(), argv[0], hold, now_ms());
	sigset_t none;
	sigemptyset(&none);
	int seen_rel = 0, seen_acq = 0;
	for (;;) {
		while (vt_rel == seen_rel && vt_acq == seen_acq) sigsuspend(&none);
		if (vt_rel != seen_rel) {
			seen_rel = vt_rel;
			long t = now_ms();
			printf("vtproc: release request at ms=%ld, holding %d ms\n", t, hold);
			usleep(hold * 1000L);
			printf("vtproc: VT_RELDISP(1) issued at ms=%ld", now_ms());
			int r = ioctl(fd, VT_RELDISP, 1);
			printf(", returned at ms=%ld", now_ms());
			res(r);
		}
		if (vt_acq != seen_acq) {
			seen_acq = vt_acq;
			int r = ioctl(fd, VT_RELDISP, VT_ACKACQ);
			printf("vtproc: acquire at ms=%ld, VT_RELDISP(VT_ACKACQ)", now_ms());
			res(r);
		}
	}
}

/* The timerfd lines of /proc/self/fdinfo/FD, on one line. */
static void tfd_info(int fd, const char *when)
{
	char path[64], info[1024];
	int f;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = open(path, O_RDONLY);
	n = f < 0 ? -1 : read(f, info, sizeof(info) - 1);
	if (f >= 0)
		close(f);
	if (n < 0) {
		printf("fdinfo %s: unreadable\n", when);
		return;
	}
	info[n] = 0;
	printf("fdinfo %s:", when);
	for (char *line = strtok(info, "\n"); line; line = strtok(NULL, "\n"))
		if (!strncmp(line, "clockid", 7) || !strncmp(line, "ticks", 5) ||
		    !strncmp(line, "it_value", 8))
			printf(" [%s]", line);
	printf("\n");
}

static int do_tfd(char **argv)
{
	int clock = atoi(argv[0]), ms = atoi(argv[1]);
	struct itimerspec on = { .it_value = { ms / 1000, ms % 1000 * 1000000L } };
	struct itimerspec soon = { .it_value = { 0, 50 * 1000000L } };
	struct itimerspec off = { 0 };
	unsigned long long ticks;
	int fd = syscall(SYS_timerfd_create, clock, 0);

	printf("timerfd_create(%d, 0)", clock);
	res(fd);
	if (fd < 0)
		return 1;
	printf("timerfd_settime(+%d ms)", ms);
	res(syscall(SYS_timerfd_settime, fd, 0, &on, NULL));
	tfd_info(fd, "armed");
	printf("timerfd_settime(0: disarm)");
	res(syscall(SYS_timerfd_settime, fd, 0, &off, NULL));
	tfd_info(fd, "disarmed");
	printf("timerfd_settime(+50 ms)");
	res(syscall(SYS_timerfd_settime, fd, 0, &soon, NULL));
	usleep(300 * 1000);
	tfd_info(fd, "expired unread");
	printf("read(timerfd)");
	res(read(fd, &ticks, sizeof(ticks)));
	tfd_info(fd, "read");
	return 0;
}

int main(int argc, char **argv)
{
	static char buf[1 << 20];
	static char data[1 << 20];
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc < 2) return 2;
	const char *cmd = argv[1];
	if (!strcmp(cmd, "ms")) { printf("%ld\n", now_ms()); return 0; }
	if (!strcmp(cmd, "as") && argc > 6) return do_as(argv + 2);
	if (!strcmp(cmd, "drop") && argc > 3) return do_drop(argv + 2);
	if (argc < 3) return 2;
	if (!strcmp(cmd, "seq") && argc > 3) return do_seq(argc - 2, argv + 2, buf, data);
	if (!strcmp(cmd, "blk") && argc > 3) return do_blk(argc - 2, argv + 2, buf);
	if (!strcmp(cmd, "wt") && argc > 3) return do_wt(argc - 2, argv + 2, data);
	if (!strcmp(cmd, "rloop")) return do_rloop(argc - 2, argv + 2, buf);
	if (!strcmp(cmd, "st")) return do_st(argc - 2, argv + 2);
	if (!strcmp(cmd, "stx")) return do_stx(argc - 2, argv + 2);
	if (!strcmp(cmd, "inw") && argc > 4) return do_inw(argv + 2);
	if (!strcmp(cmd, "cat")) {
		for (int i = 2; i < argc; i++) {
			int fd = open(argv[i], O_RDONLY);
			if (fd < 0) { perror(argv[i]); return 1; }
			long r;
			while ((r = read(fd, buf, 65536)) > 0) fwrite(buf, 1, r, stdout);
			if (r < 0) { perror(argv[i]); return 1; }
			close(fd);
		}
		return 0;
	}
	if (!strcmp(cmd, "vtproc") && argc > 3) return do_vtproc(argv + 2);
	if (!strcmp(cmd, "tfd") && argc > 3) return do_tfd(argv + 2);
	const char *f = argv[2];
	int rc = 0;

	if (!strcmp(cmd, "w") || !strcmp(cmd, "wa")) {
		int fd = xopen(f, O_WRONLY | (cmd[1] == 'a' ? O_APPEND : 0));
		for (int i = 3; i < argc; i++) {
			long n = unesc(argv[i], data);
			errno = 0;
			long r = write(fd, data, n);
			printf("write(");
			showtrunc(data, n);
			printf(", %ld)", n);
			res(r);
			if (r < 0) rc = 1;
		}
		close(fd);
	} else if (!strcmp(cmd, "wn")) {
		long n = atol(argv[3]);
		char ch = argv[4][0];
		memset(data, ch, n);
		if (argc > 5) n += unesc(argv[5], data + n);
		int fd = xopen(f, O_WRONLY);
		long r = write(fd, data, n);
		printf("write(");
		showtrunc(data, n);
		printf(", %ld)", n);
		res(r);
		if (r < 0) rc = 1;
		close(fd);
	} else if (!strcmp(cmd, "r")) {
		long off = argc > 3 ? atol(argv[3]) : 0;
		long cnt = argc > 4 ? atol(argv[4]) : 65536;
		int fd = xopen(f, O_RDONLY);
		long r = pread(fd, buf, cnt, off);
		printf("pread(%ld@%ld)", cnt, off);
		if (r >= 0) { printf(" = %ld ", r); showtrunc(buf, r); putchar('\n'); }
		else { res(r); rc = 1; }
		close(fd);
	} else if (!strcmp(cmd, "rs")) {
		long cnt = argc > 3 ? atol(argv[3]) : 1;
		int fd = xopen(f, O_RDONLY);
		for (int i = 0; i < 100000; i++) {
			long r = read(fd, buf, cnt);
			printf("read(%ld)", cnt);
			if (r > 0) { printf(" = %ld ", r); showtrunc(buf, r); putchar('\n'); }
			else { res(r); if (r < 0) rc = 1; break; }
		}
		close(fd);
	} else if (!strcmp(cmd, "rr")) {
		int fd = xopen(f, O_RDONLY);
		for (int i = 0; i < 2; i++) {
			long r = read(fd, buf, sizeof buf);
			printf("read#%d", i + 1);
			if (r >= 0) { printf(" = %ld ", r); showtrunc(buf, r); putchar('\n'); }
			else res(r);
		}
		printf("lseek(0, SEEK_SET)");
		res(lseek(fd, 0, SEEK_SET));
		long r = read(fd, buf, sizeof buf);
		printf("read#3");
		if (r >= 0) { printf(" = %ld ", r); showtrunc(buf, r); putchar('\n'); }
		else res(r);
		close(fd);
	} else if (!strcmp(cmd, "rl") && argc > 4) {
		int fd = xopen(f, O_RDONLY);
		long r = read(fd, buf, 2);
		printf("read#1(2) = %ld ", r); showtrunc(buf, r > 0 ? r : 0); putchar('\n');
		long n = unesc(argv[4], data);
		int wfd = xopen(argv[3], O_WRONLY);
		printf("write(%s, ", argv[3]); show(data, n); printf(", %ld)", n); res(write(wfd, data, n));
		close(wfd);
		r = read(fd, buf, sizeof buf);
		printf("read#2 = %ld ", r); showtrunc(buf, r > 0 ? r : 0); putchar('\n');
		printf("lseek(0, SEEK_SET)"); res(lseek(fd, 0, SEEK_SET));
		r = read(fd, buf, sizeof buf);
		printf("read#3 = %ld ", r); showtrunc(buf, r > 0 ? r : 0); putchar('\n');
		close(fd);
	} else if (!strcmp(cmd, "poll")) {
		int fd = xopen(f, O_RDONLY);
		struct pollfd p = {fd, POLLIN | POLLPRI | POLLOUT, 0};
		int ms = argc > 3 ? atoi(argv[3]) : 0;
		long t0 = now_ms();
		int r = poll(&p, 1, ms);
		printf("poll(POLLIN|POLLPRI|POLLOUT, %dms) = %d revents=%s%s%s%s%s (elapsed_ms=%ld)\n", ms, r,
		       p.revents & POLLIN ? "POLLIN " : "", p.revents & POLLPRI ? "POLLPRI " : "",
		       p.revents & POLLOUT ? "POLLOUT " : "", p.revents & POLLERR ? "POLLERR " : "",
		       p.revents & POLLHUP ? "POLLHUP " : "", now_ms() - t0);
		close(fd);
	} else if (!strcmp(cmd, "ra") || !strcmp(cmd, "ran")) {
		int secs = argc > 3 ? atoi(argv[3]) : 1;
		struct sigaction sa = {0};
		sa.sa_handler = on_alrm;
		sa.sa_flags = (argc > 4 && !strcmp(argv[4], "restart")) ? SA_RESTART : 0;
		sigaction(SIGALRM, &sa, NULL);
		int fd = xopen(f, O_RDONLY | (cmd[2] == 'n' ? O_NONBLOCK : 0));
		long t0 = now_ms();
		alarm(secs);
		long r = read(fd, buf, sizeof buf);
		int e = errno;
		long t1 = now_ms();
		alarm(0);
		printf("read[%salarm %ds%s]", cmd[2] == 'n' ? "O_NONBLOCK," : "", secs, sa.sa_flags ? ",SA_RESTART" : "");
		errno = e;
		if (r >= 0) { printf(" = %ld ", r); showtrunc(buf, r); putchar('\n'); }
		else res(r);
		printf("elapsed_ms=%ld\n", t1 - t0);
		close(fd);
	} else if (!strcmp(cmd, "rw")) {
		int fd = xopen(f, O_RDWR);
		long r = read(fd, buf, sizeof buf);
		printf("read");
		if (r >= 0) { printf(" = %ld ", r); showtrunc(buf, r); putchar('\n'); }
		else { res(r); return 1; }
		long w = write(fd, buf, r);
		printf("write(same fd, ");
		show(buf, r);
		printf(", %ld)", r);
		res(w);
		if (w < 0) rc = 1;
		close(fd);
	} else if (!strcmp(cmd, "o")) {
		int fl = !strcmp(argv[3], "r") ? O_RDONLY : !strcmp(argv[3], "w") ? O_WRONLY : O_RDWR;
		int fd = open(f, fl);
		printf("open(%s, %s)", f, argv[3]);
		res(fd);
		if (fd < 0) rc = 1;
	} else
		return 2;
	return rc;
}
