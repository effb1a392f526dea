/* cli.h — verbs implemented outside main.c. Each takes argv with the verb at
 * argv[0] and returns the process exit code. */
#ifndef DD_CLI_H
#define DD_CLI_H

/* Read option `opt`'s value s as a whole number in [min, max] into *out; on a bad
 * value print why on stderr and return -1. */
int cli_number(const char *opt, const char *s, long long min, long long max, long long *out);

static inline int cli_int(const char *opt, const char *s, int min, int max, int *out)
{
	long long v;
	if (cli_number(opt, s, min, max, &v))
		return -1;
	*out = (int)v;
	return 0;
}

extern const char cli_dataset_usage[];
extern const char cli_example_usage[];
int cli_dataset(int argc, char **argv);
int cli_example(int argc, char **argv);
extern const char cli_train_usage[];
int cli_train(int argc, char **argv);
extern const char cli_classify_usage[];
int cli_classify(int argc, char **argv);
extern const char cli_net_usage[];
int cli_net(int argc, char **argv);
extern const char cli_user_usage[];
int cli_user(int argc, char **argv);

#endif
