/* bench-client.c - the timing clients of scripts/bench, in C so that the
 * client's own cost stays small next to a FUSE round trip.
 *
 *   bench-client pairs DIR NAME WARMUP N
 *       One client, fds kept open: N x (write NAME to wake_lock, write NAME
 *       to wake_unlock) after WARMUP untimed pairs.  Prints ns per pair.
 *   bench-client par DIR K PREFIX WARMUP N
 *       K processes, each with its own lock PREFIX<i>, start together and
 *       each do N pairs.  Prints pairs per second (all K together, from the
 *       start signal to the last one done).
 *   bench-client fill DIR PREFIX COUNT
 *       Locks COUNT locks PREFIX<i> (no timeout).  Prints nothing.
 *   bench-client readall FILE WARMUP N
 *       N x (open FILE, read it to EOF in 1 MiB reads, close).  Prints
 *       ns per whole read, then the byte count.
 *   bench-client churn DIR PREFIX K WARMUP N
 *       One client, fds kept open, K names PREFIX<i> taken in turn: N x
 *       (lock name i, unlock name i) after WARMUP untimed pairs, each write
 *       timed on its own.  Prints the median, 99th percentile and maximum
 *       write latency in ns, then the elapsed ns of the timed part.
 *
 * All times CLOCK_MONOTONIC.  Any failing call is fatal (exit 1, errno on
 * stderr), so a broken server cannot pass for a fast one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "bench-client: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int open_in(const char *dir, const char *name, int flags)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		die(path);
	return fd;
}

static void write_all(int fd, const char *buf, size_t len, const char *what)
{
	ssize_t n = write(fd, buf, len);

	if (n != (ssize_t)len) {
		if (n >= 0)
			errno = EIO;
		die(what);
	}
}

struct pair_fds {
	int lock, unlock;
	const char *name;
	size_t len;
};

static void pair_open(struct pair_fds *p, const char *dir, const char *name)
{
	p->lock = open_in(dir, "wake_lock", O_WRONLY);
	p->unlock = open_in(dir, "wake_unlock", O_WRONLY);
	p->name = name;
	p->len = strlen(name);
}

static void pairs_run(const struct pair_fds *p, long n)
{
	for (long i = 0; i < n; i++) {
		write_all(p->lock, p->name, p->len, "write wake_lock");
		write_all(p->unlock, p->name, p->len, "write wake_unlock");
	}
}

static int cmd_pairs(char **argv)
{
	struct pair_fds p;
	long warmup = atol(argv[2]), n = atol(argv[3]);
	long long t0, t1;

	pair_open(&p, argv[0], argv[1]);
	pairs_run(&p, warmup);
	t0 = now_ns();
	pairs_run(&p, n);
	t1 = now_ns();
	printf("%.1f\n", (double)(t1 - t0) / n);
	return 0;
}

static int cmd_par(char **argv)
{
	const char *dir = argv[0], *prefix = argv[2];
	int k = atoi(argv[1]);
	long warmup = atol(argv[3]), n = atol(argv[4]);
	int ready[2], go[2], failed = 0;
	long long t0, t1;
	char c;

	if (pipe(ready) < 0 || pipe(go) < 0)
		die("pipe");
	for (int i = 0; i < k; i++) {
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (pid == 0) {
			static char name[256];
			struct pair_fds p;

			close(ready[0]);
			close(go[1]);
			snprintf(name, sizeof(name), "%s%d", prefix, i);
			pair_open(&p, dir, name);
			pairs_run(&p, warmup);
			write_all(ready[1], "r", 1, "ready pipe");
			if (read(go[0], &c, 1) < 0)	/* EOF = go */
				die("go pipe");
			pairs_run(&p, n);
			_exit(0);
		}
	}
	close(ready[1]);
	close(go[0]);
	for (int i = 0; i < k; i++)
		if (read(ready[0], &c, 1) != 1) {
			fprintf(stderr, "bench-client: a client died\n");
			failed = 1;
			break;
		}
	t0 = now_ns();
	close(go[1]);
	for (int i = 0; i < k; i++) {
		int status;

		if (wait(&status) < 0)
			die("wait");
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	}
	t1 = now_ns();
	if (failed)
		return 1;
	printf("%.1f\n", (double)k * n * 1e9 / (double)(t1 - t0));
	return 0;
}

static int cmd_fill(char **argv)
{
	int fd = open_in(argv[0], "wake_lock", O_WRONLY);
	long count = atol(argv[2]);
	char name[256];

	for (long i = 0; i < count; i++) {
		int len = snprintf(name, sizeof(name), "%s%ld", argv[1], i);

		write_all(fd, name, (size_t)len, "write wake_lock");
	}
	close(fd);
	return 0;
}

static long read_whole(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long total = 0;
	ssize_t n;

	if (fd < 0)
		die(path);
	while ((n = read(fd, buf, size)) > 0)
		total += n;
	if (n < 0)
		die("read");
	close(fd);
	return total;
}

static int cmd_readall(char **argv)
{
	size_t size = 1 << 20;
	char *buf = malloc(size);
	long warmup = atol(argv[1]), n = atol(argv[2]), bytes = 0;
	long long t0, t1;

	if (!buf)
		die("malloc");
	for (long i = 0; i < warmup; i++)
		read_whole(argv[0], buf, size);
	t0 = now_ns();
	for (long i = 0; i < n; i++)
		bytes = read_whole(argv[0], buf, size);
	t1 = now_ns();
	printf("%.1f\n%ld\n", (double)(t1 - t0) / n, bytes);
	free(buf);
	return 0;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

static int cmd_churn(char **argv)
{
	int lock = open_in(argv[0], "wake_lock", O_WRONLY);
	int unlock = open_in(argv[0], "wake_unlock", O_WRONLY);
	long k = atol(argv[2]), warmup = atol(argv[3]), n = atol(argv[4]);
	long long *lat = calloc(2 * (size_t)n, sizeof(*lat)), t0, t1;
	char name[4096];

	if (!lat || k < 1 || n < 1)
		die("churn: bad arguments or no memory");
	t0 = now_ns();
	for (long i = -warmup; i < n; i++) {
		int len = snprintf(name, sizeof(name), "%s%ld", argv[1],
				   (i + warmup) % k);
		long long a = now_ns(), b, c;

		write_all(lock, name, (size_t)len, "write wake_lock");
		b = now_ns();
		write_all(unlock, name, (size_t)len, "write wake_unlock");
		c = now_ns();
		if (i < 0) {
			t0 = c;
			continue;
		}
		lat[2 * i] = b - a;
		lat[2 * i + 1] = c - b;
	}
	t1 = now_ns();
	qsort(lat, 2 * (size_t)n, sizeof(*lat), cmp_ll);
	printf("%lld\n%lld\n%lld\n%lld\n", lat[n], lat[(2 * n * 99) / 100],
	       lat[2 * n - 1], t1 - t0);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int nargs;
		int (*run)(char **argv);
	} cmds[] = {
		{ "pairs", 4, cmd_pairs },
		{ "par", 5, cmd_par },
		{ "fill", 3, cmd_fill },
		{ "readall", 3, cmd_readall },
		{ "churn", 5, cmd_churn },
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; argc >= 2 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			if (argc != cmds[i].nargs + 2)
				break;
			return cmds[i].run(argv + 2);
		}
	fprintf(stderr, "usage: bench-client pairs|par|fill|readall|churn ... "
			"(see the comment at the top of bench-client.c)\n");
	return 2;
}
