/* Preloaded ahead of libfaketime by tests/shifted/run.
 *
 * The suite runs with FAKETIME_DONT_FAKE_MONOTONIC=1, so that only the date moves: with a faked monotonic
 * clock, every timed lock wait in Python (sem_clockwait, which libfaketime 0.9.10 does not wrap) would
 * wait for a deadline a year away. libfaketime's clock_nanosleep, though, still shifts an absolute
 * CLOCK_MONOTONIC deadline by the fake offset and fails with EINVAL, which breaks time.sleep (Python 3.11+
 * sleeps until an absolute monotonic deadline). Sleeps on the monotonic clock go to the kernel here; the
 * rest go on to libfaketime. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *request, struct timespec *remain) {
    static int (*next)(clockid_t, int, const struct timespec *, struct timespec *);
    if (clock == CLOCK_MONOTONIC) {
        return syscall(SYS_clock_nanosleep, clock, flags, request, remain) == 0 ? 0 : errno;
    }
    if (next == NULL) {
        next = (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(RTLD_NEXT, "clock_nanosleep");
    }
    return next(clock, flags, request, remain);
}
