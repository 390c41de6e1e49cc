// SPDX-License-Identifier: GPL-2.0
/* What a hook costs a process that is not traced: the best of 5 timings (ns per call) of
 * getppid (hooked by none of our programs), a 1-byte read of /dev/zero, a 1-byte pipe
 * ping-pong between two processes and a 1-byte AF_UNIX stream ping-pong (a round trip each:
 * 4 syscalls, 2 switches, 2 wake-ups), pinned to CPU 1.  bench/hook_cost/run.sh runs it with
 * nothing attached, then with each hook set attached to an idle process. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* One round trip a call: the child echoes each byte back. */
static double pingpong_ns(int to_child, int from_child, int child_in, int child_out, int n)
{
	char b = 0;
	pid_t pid = fork();
	double t0;

	if (pid == 0) {
		for (int i = 0; i < n; i++) {
			if (read(child_in, &b, 1) != 1 || write(child_out, &b, 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	t0 = now_ns();
	for (int i = 0; i < n; i++) {
		if (write(to_child, &b, 1) != 1 || read(from_child, &b, 1) != 1)
			exit(1);
	}
	t0 = (now_ns() - t0) / n;
	waitpid(pid, NULL, 0);
	return t0;
}

static double min2(double a, double b) { return a < b ? a : b; }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000000;
	double best[4] = {1e18, 1e18, 1e18, 1e18};
	cpu_set_t cpus;
	char b;
	int zero = open("/dev/zero", O_RDONLY);

	CPU_ZERO(&cpus);
	CPU_SET(1, &cpus);
	if (zero < 0 || sched_setaffinity(0, sizeof(cpus), &cpus)) {
		perror("syscall_loop");
		return 1;
	}
	for (int rep = 0; rep < 5; rep++) {
		int a[2], c[2], sv[2];
		double t0 = now_ns();

		for (int i = 0; i < n; i++)
			syscall(SYS_getppid);
		best[0] = min2(best[0], (now_ns() - t0) / n);
		t0 = now_ns();
		for (int i = 0; i < n; i++)
			if (read(zero, &b, 1) != 1)
				return 1;
		best[1] = min2(best[1], (now_ns() - t0) / n);
		if (pipe(a) || pipe(c) || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			return 1;
		best[2] = min2(best[2], pingpong_ns(a[1], c[0], a[0], c[1], n / 10));
		best[3] = min2(best[3], pingpong_ns(sv[0], sv[0], sv[1], sv[1], n / 10));
		close(a[0]), close(a[1]), close(c[0]), close(c[1]), close(sv[0]), close(sv[1]);
	}
	printf("%8.0f %8.0f %8.0f %8.0f\n", best[0], best[1], best[2], best[3]);
	return 0;
}
