/* status.c - the start's verdict: powerfs forks without -f, and the
 * parent exits only once the child serves, or with the status the child
 * failed with.  A server started by the keeper says the same to its
 * keeper through the descriptor it is given.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "powerfs/status.h"

/* Where our verdict on the start goes: without -f, the parent waiting for
 * it; in a server, the keeper.  One byte: 0 (serving) or the exit status. */
static int ready_fd = -1;

void status_set_fd(int fd)
{
	ready_fd = fd;
}

void status_report(guchar status)
{
	if (ready_fd < 0)
		return;
	if (write(ready_fd, &status, 1) != 1)
		perror("powerfs: reporting to the parent");
	close(ready_fd);
	ready_fd = -1;
}

void status_fail(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("powerfs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	status_report(code);
	exit(code);
}

void status_daemonize(void)
{
	int fds[2];
	pid_t pid;
	guchar status = 1;

	if (pipe2(fds, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
		perror("powerfs: fork");
		exit(1);
	}
	if (pid > 0) {
		close(fds[1]);
		if (read(fds[0], &status, 1) != 1)
			status = 1;
		_exit(status);
	}
	close(fds[0]);
	setsid();
	ready_fd = fds[1];
}

void status_ready(gboolean foreground)
{
	int null;

	if (ready_fd < 0)
		return;
	status_report(0);
	if (foreground)
		return;
	if (chdir("/") < 0)
		g_warning("chdir /: %s", g_strerror(errno));
	null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
}
