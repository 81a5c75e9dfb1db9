/* fault-preload.c - failures the tests cannot cause otherwise, injected with
 * LD_PRELOAD into powerfs (tests/test_keeper.py builds it with cc):
 *
 *   PF_FAULT_PAGESIZE=N   getpagesize() and sysconf(_SC_PAGESIZE) say N: a
 *                         kernel with pages of N bytes, as libfuse and
 *                         powerfs see it (the kernel's own rules stay those
 *                         of its real page size)
 *   PF_FAULT_FORK=PATH    fork() fails with EAGAIN while PATH exists
 *   PF_FAULT_SIGNALFD=1   signalfd() fails with ENOMEM
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

static long fake_page_size(void)
{
	const char *v = getenv("PF_FAULT_PAGESIZE");

	return v ? atol(v) : 0;
}

int getpagesize(void)
{
	long n = fake_page_size();

	return n ? (int)n : (int)((long (*)(int))dlsym(RTLD_NEXT, "sysconf"))(
				    _SC_PAGESIZE);
}

long sysconf(int name)
{
	static long (*real)(int);
	long n;

	if (!real)
		real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
	if ((name == _SC_PAGESIZE || name == _SC_PAGE_SIZE) &&
	    (n = fake_page_size()))
		return n;
	return real(name);
}

pid_t fork(void)
{
	static pid_t (*real)(void);
	const char *path = getenv("PF_FAULT_FORK");
	struct stat st;

	if (!real)
		real = (pid_t (*)(void))dlsym(RTLD_NEXT, "fork");
	if (path && stat(path, &st) == 0) {
		errno = EAGAIN;
		return -1;
	}
	return real();
}

int signalfd(int fd, const sigset_t *mask, int flags)
{
	static int (*real)(int, const sigset_t *, int);

	if (!real)
		real = (int (*)(int, const sigset_t *, int))dlsym(RTLD_NEXT,
								  "signalfd");
	if (getenv("PF_FAULT_SIGNALFD")) {
		errno = ENOMEM;
		return -1;
	}
	return real(fd, mask, flags);
}
