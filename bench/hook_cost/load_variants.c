// SPDX-License-Identifier: GPL-2.0
/* Loads hook_variants.bpf.o with the programs named on the command line (NAME:COPIES, each
 * copy one more link on the same hook) attached until SIGINT/SIGTERM; prints "attached" on
 * stderr once they are. */
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int wanted(const char *name, int argc, char **argv)
{
	size_t len = strlen(name);

	for (int i = 2; i < argc; i++)
		if (!strncmp(argv[i], name, len) && argv[i][len] == ':')
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *prog;

	if (argc < 3) {
		fprintf(stderr, "usage: load_variants OBJECT NAME:COPIES...\n");
		return 2;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj)
		return 1;
	bpf_object__for_each_program(prog, obj)
		bpf_program__set_autoload(prog, wanted(bpf_program__name(prog), argc, argv));
	if (bpf_object__load(obj)) {
		fprintf(stderr, "load_variants: load failed\n");
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		char *colon = strchr(argv[i], ':');
		int copies = colon ? atoi(colon + 1) : 0;

		if (!colon)
			return 2;
		*colon = 0;
		prog = bpf_object__find_program_by_name(obj, argv[i]);
		if (!prog) {
			fprintf(stderr, "load_variants: no program %s\n", argv[i]);
			return 2;
		}
		for (int k = 0; k < copies; k++)
			if (!bpf_program__attach(prog)) {
				fprintf(stderr, "load_variants: attaching %s failed\n", argv[i]);
				return 1;
			}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "attached\n");
	while (!stop)
		pause();
	bpf_object__close(obj); /* the links go with the process anyway */
	return 0;
}
